//! Modules and the C++ half of the ABI (`crates/tvm-ffi-capi/cxx/module_bridge.h`, mirrored
//! here).
//!
//! Every module of the process is a C++ `tvm::ffi::ModuleObj` in memory: a vtable pointer 8
//! bytes before the handle, `imports_` at handle + 24. The runtime's own modules store the
//! vtable of the C++ class `NativeModuleObj`, whose virtual functions call [`NATIVE_METHODS`]
//! (Rust functions, the same ones the runtime uses); modules made by C++ code in other libraries
//! are called through the bridge's table, whose functions make the virtual call and catch what
//! it throws. Both tables are [`ModuleMethods`]; the bridge is found through the global function
//! `ffi.CxxModuleBridge`, registered by the C++ half when it is loaded.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

use tvm_ffi::abi::{TVMFFIAny, TVMFFIByteArray, TVMFFIObject, TVMFFIObjectHandle};
use tvm_ffi::boundary::ffi_status;
use tvm_ffi::{Any, Error, ErrorKind, Function, ObjectRef, Result};

use crate::module::{Module, ModuleObj};

type Handle = TVMFFIObjectHandle;
type Name = *const TVMFFIByteArray;

/// A module's virtual functions in C form (`TVMFFIModuleMethods`): 0, or -1 with the error
/// raised; results are owning values.
#[repr(C)]
pub(crate) struct ModuleMethods {
    kind: unsafe extern "C" fn(Handle, *mut TVMFFIAny) -> c_int,
    get_property_mask: unsafe extern "C" fn(Handle, *mut i32) -> c_int,
    get_function: unsafe extern "C" fn(Handle, Name, *mut TVMFFIAny) -> c_int,
    implements_function: unsafe extern "C" fn(Handle, Name, *mut i32) -> c_int,
    get_function_doc: unsafe extern "C" fn(Handle, Name, *mut TVMFFIAny) -> c_int,
    get_function_metadata: unsafe extern "C" fn(Handle, Name, *mut TVMFFIAny) -> c_int,
    write_to_file: unsafe extern "C" fn(Handle, Name, Name) -> c_int,
    get_write_formats: unsafe extern "C" fn(Handle, *mut TVMFFIAny) -> c_int,
    save_to_bytes: unsafe extern "C" fn(Handle, *mut TVMFFIAny) -> c_int,
    inspect_source: unsafe extern "C" fn(Handle, Name, *mut TVMFFIAny) -> c_int,
    import_module: unsafe extern "C" fn(Handle, Handle) -> c_int,
    clear_imports: unsafe extern "C" fn(Handle) -> c_int,
}

/// What `ffi.CxxModuleBridge` points at (`TVMFFICxxModuleBridge`).
#[repr(C)]
pub(crate) struct CxxModuleBridge {
    size: u64,
    /// The vtable pointer of the runtime's modules.
    pub(crate) native_vtable: *const c_void,
    virtual_call: ModuleMethods,
}

/// The bridge of the C++ half linked into this process, if there is one (a process whose
/// `libtvm_ffi.so` has none still runs the runtime's modules, for Rust and C callers).
pub(crate) fn bridge() -> Option<&'static CxxModuleBridge> {
    // Found once; not found is asked again (the C++ half registers the function when it is
    // loaded, which may be after a first module was made).
    static BRIDGE: AtomicUsize = AtomicUsize::new(0);
    let mut address = BRIDGE.load(Ordering::Acquire);
    if address == 0 {
        address = Function::get_global("ffi.CxxModuleBridge")
            .and_then(|get| get.call(()).ok())
            .and_then(|ptr| ptr.cast::<*mut c_void>().ok())
            .map_or(0, |ptr| ptr as usize);
        if address == 0 {
            return None;
        }
        BRIDGE.store(address, Ordering::Release);
    }
    // SAFETY: the C++ half returns the address of its static bridge, which lives as long as
    // the process.
    let bridge = unsafe { &*(address as *const CxxModuleBridge) };
    (bridge.size == std::mem::size_of::<CxxModuleBridge>() as u64).then_some(bridge)
}

/// The bridge, or the error of a C++ module in a process without the C++ half (which cannot
/// happen: such a module was made by C++ code linked against one).
fn required_bridge() -> Result<&'static CxxModuleBridge> {
    bridge().ok_or_else(|| {
        Error::new(
            ErrorKind::RuntimeError,
            "a module made by C++ code cannot be called: this runtime has no C++ half \
             (ffi.CxxModuleBridge is not registered)",
        )
    })
}

/// A C status as a result (the raised error, or a RuntimeError naming `what`).
fn check(rc: c_int, what: &str) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::take_raised_or(
            ErrorKind::RuntimeError,
            format_args!("{what} failed without an error"),
        ))
    }
}

/// Virtual calls on a module made by C++ code.
pub(crate) struct Virtual<'a> {
    handle: Handle,
    methods: &'a ModuleMethods,
}

impl Virtual<'static> {
    /// The virtual functions of `module` (made by C++ code).
    pub(crate) fn of(module: &Module) -> Result<Virtual<'static>> {
        Ok(Virtual {
            handle: module.as_object().as_raw().cast(),
            methods: &required_bridge()?.virtual_call,
        })
    }
}

impl Virtual<'_> {
    fn any_result(
        &self,
        what: &str,
        call: impl FnOnce(Handle, *mut TVMFFIAny) -> c_int,
    ) -> Result<Any> {
        let mut out = TVMFFIAny::NONE;
        check(call(self.handle, &mut out), what)?;
        // SAFETY: on success the callee stored an owning value.
        Ok(unsafe { Any::from_raw(out) })
    }

    pub(crate) fn kind(&self) -> Result<String> {
        // SAFETY: a live module handle and a result slot.
        self.any_result("ModuleObj::kind", |h, out| unsafe {
            (self.methods.kind)(h, out)
        })?
        .cast()
    }

    pub(crate) fn property_mask(&self) -> Result<i64> {
        let mut mask = 0;
        // SAFETY: a live module handle and a result slot.
        let rc = unsafe { (self.methods.get_property_mask)(self.handle, &mut mask) };
        check(rc, "ModuleObj::GetPropertyMask")?;
        Ok(i64::from(mask))
    }

    pub(crate) fn get_function(&self, name: &str) -> Result<Option<Function>> {
        let name = TVMFFIByteArray::from_text(name);
        let any = self.any_result("ModuleObj::GetFunction", |h, out| {
            // SAFETY: a live module handle, a name valid for the call and a result slot.
            unsafe { (self.methods.get_function)(h, &name, out) }
        })?;
        if any.is_none() {
            Ok(None)
        } else {
            any.cast().map(Some)
        }
    }

    pub(crate) fn implements_function(&self, name: &str) -> Result<bool> {
        let name = TVMFFIByteArray::from_text(name);
        let mut found = 0;
        // SAFETY: a live module handle, a name valid for the call and a result slot.
        let rc = unsafe { (self.methods.implements_function)(self.handle, &name, &mut found) };
        check(rc, "ModuleObj::ImplementsFunction")?;
        Ok(found != 0)
    }

    pub(crate) fn function_info(&self, name: &str, doc: bool) -> Result<Option<String>> {
        let name = TVMFFIByteArray::from_text(name);
        let call = if doc {
            self.methods.get_function_doc
        } else {
            self.methods.get_function_metadata
        };
        // SAFETY: a live module handle, a name valid for the call and a result slot.
        let any = self.any_result("ModuleObj::GetFunctionDoc/Metadata", |h, out| unsafe {
            call(h, &name, out)
        })?;
        if any.is_none() {
            Ok(None)
        } else {
            any.cast().map(Some)
        }
    }

    pub(crate) fn write_to_file(&self, path: &str, format: &str) -> Result<()> {
        let (path, format) = (
            TVMFFIByteArray::from_text(path),
            TVMFFIByteArray::from_text(format),
        );
        // SAFETY: a live module handle and two byte arrays valid for the call.
        let rc = unsafe { (self.methods.write_to_file)(self.handle, &path, &format) };
        check(rc, "ModuleObj::WriteToFile")
    }

    pub(crate) fn write_formats(&self) -> Result<Vec<String>> {
        // SAFETY: a live module handle and a result slot.
        let formats: tvm_ffi::Array = self
            .any_result("ModuleObj::GetWriteFormats", |h, out| unsafe {
                (self.methods.get_write_formats)(h, out)
            })?
            .cast()?;
        formats.iter().map(|format| format.cast()).collect()
    }

    pub(crate) fn save_to_bytes(&self) -> Result<Vec<u8>> {
        // SAFETY: a live module handle and a result slot.
        let bytes: tvm_ffi::Bytes = self
            .any_result("ModuleObj::SaveToBytes", |h, out| unsafe {
                (self.methods.save_to_bytes)(h, out)
            })?
            .cast()?;
        Ok(bytes.as_bytes().to_vec())
    }

    pub(crate) fn inspect_source(&self, format: &str) -> Result<String> {
        let format = TVMFFIByteArray::from_text(format);
        // SAFETY: a live module handle, a format valid for the call and a result slot.
        self.any_result("ModuleObj::InspectSource", |h, out| unsafe {
            (self.methods.inspect_source)(h, &format, out)
        })?
        .cast()
    }

    pub(crate) fn import_module(&self, other: &Module) -> Result<()> {
        let other = other.as_object().as_raw().cast();
        // SAFETY: two live module handles.
        let rc = unsafe { (self.methods.import_module)(self.handle, other) };
        check(rc, "ModuleObj::ImportModule")
    }

    pub(crate) fn clear_imports(&self) -> Result<()> {
        // SAFETY: a live module handle.
        let rc = unsafe { (self.methods.clear_imports)(self.handle) };
        check(rc, "ModuleObj::ClearImports")
    }
}

// ---------------------------------------------------------------------------------------------
// The runtime's modules, called from C++ (the table behind NativeModuleObj's vtable)
// ---------------------------------------------------------------------------------------------

/// The module a handle refers to, with a reference of its own.
///
/// # Safety
/// `handle` is a live module handle made by this runtime.
unsafe fn module_of(handle: Handle) -> Module {
    // SAFETY: guaranteed by the caller; the new reference is the Module's.
    let obj = unsafe { ObjectRef::<ModuleObj>::from_borrowed(handle.cast::<TVMFFIObject>()) };
    Module::from_object(obj)
}

/// The text of a name argument.
///
/// # Safety
/// `name` points at a valid byte array.
unsafe fn text<'a>(name: Name) -> Result<&'a str> {
    // SAFETY: guaranteed by the caller.
    let bytes = unsafe { (*name).as_bytes() };
    std::str::from_utf8(bytes).map_err(|_| {
        Error::new(
            ErrorKind::ValueError,
            format!(
                "a module function name is not UTF-8: {:?}",
                String::from_utf8_lossy(bytes)
            ),
        )
    })
}

/// Stores an owning value in a result slot.
///
/// # Safety
/// `out` is valid for writes.
unsafe fn store(out: *mut TVMFFIAny, value: Any) {
    // SAFETY: guaranteed by the caller.
    unsafe { out.write(value.into_raw()) };
}

fn optional(value: Option<impl Into<Any>>) -> Any {
    value.map_or_else(Any::none, Into::into)
}

unsafe extern "C" fn native_kind(handle: Handle, out: *mut TVMFFIAny) -> c_int {
    ffi_status("ModuleObj::kind", || {
        // SAFETY: the C++ thunk passes its own live handle and a result slot.
        unsafe { store(out, Any::from(module_of(handle).kind())) };
        Ok(())
    })
}

unsafe extern "C" fn native_property_mask(handle: Handle, out: *mut i32) -> c_int {
    ffi_status("ModuleObj::GetPropertyMask", || {
        // SAFETY: as above.
        let mask = unsafe { module_of(handle) }.property_mask()?;
        // SAFETY: a result slot.
        unsafe { out.write(i32::try_from(mask).unwrap_or(0)) };
        Ok(())
    })
}

unsafe extern "C" fn native_get_function(handle: Handle, name: Name, out: *mut TVMFFIAny) -> c_int {
    ffi_status("ModuleObj::GetFunction", || {
        // SAFETY: as above; `name` is valid for the call.
        let (module, name) = unsafe { (module_of(handle), text(name)?) };
        let function = module.get_function(name, false)?;
        // SAFETY: a result slot.
        unsafe { store(out, optional(function)) };
        Ok(())
    })
}

unsafe extern "C" fn native_implements_function(
    handle: Handle,
    name: Name,
    out: *mut i32,
) -> c_int {
    ffi_status("ModuleObj::ImplementsFunction", || {
        // SAFETY: as above.
        let (module, name) = unsafe { (module_of(handle), text(name)?) };
        let found = module.implements_function(name)?;
        // SAFETY: a result slot.
        unsafe { out.write(i32::from(found)) };
        Ok(())
    })
}

unsafe extern "C" fn native_function_doc(handle: Handle, name: Name, out: *mut TVMFFIAny) -> c_int {
    ffi_status("ModuleObj::GetFunctionDoc", || {
        // SAFETY: as above.
        let (module, name) = unsafe { (module_of(handle), text(name)?) };
        let doc = module.function_info(name, true, false)?;
        // SAFETY: a result slot.
        unsafe { store(out, optional(doc)) };
        Ok(())
    })
}

unsafe extern "C" fn native_function_metadata(
    handle: Handle,
    name: Name,
    out: *mut TVMFFIAny,
) -> c_int {
    ffi_status("ModuleObj::GetFunctionMetadata", || {
        // SAFETY: as above.
        let (module, name) = unsafe { (module_of(handle), text(name)?) };
        let metadata = module.function_info(name, false, false)?;
        // SAFETY: a result slot.
        unsafe { store(out, optional(metadata)) };
        Ok(())
    })
}

unsafe extern "C" fn native_write_to_file(handle: Handle, path: Name, format: Name) -> c_int {
    ffi_status("ModuleObj::WriteToFile", || {
        // SAFETY: as above; both byte arrays are valid for the call.
        let (module, path, format) = unsafe { (module_of(handle), text(path)?, text(format)?) };
        module.write_to_file(path, format)
    })
}

unsafe extern "C" fn native_write_formats(handle: Handle, out: *mut TVMFFIAny) -> c_int {
    ffi_status("ModuleObj::GetWriteFormats", || {
        // SAFETY: as above.
        let formats = unsafe { module_of(handle) }.write_formats()?;
        let array: tvm_ffi::Array = formats.into_iter().collect();
        // SAFETY: a result slot.
        unsafe { store(out, Any::from(array)) };
        Ok(())
    })
}

unsafe extern "C" fn native_save_to_bytes(handle: Handle, out: *mut TVMFFIAny) -> c_int {
    ffi_status("ModuleObj::SaveToBytes", || {
        // SAFETY: as above.
        let bytes = unsafe { module_of(handle) }.save_to_bytes()?;
        // SAFETY: a result slot.
        unsafe { store(out, Any::from(tvm_ffi::Bytes::from(bytes))) };
        Ok(())
    })
}

unsafe extern "C" fn native_inspect_source(
    handle: Handle,
    format: Name,
    out: *mut TVMFFIAny,
) -> c_int {
    ffi_status("ModuleObj::InspectSource", || {
        // SAFETY: as above.
        let (module, format) = unsafe { (module_of(handle), text(format)?) };
        let source = module.inspect_source(format)?;
        // SAFETY: a result slot.
        unsafe { store(out, Any::from(source)) };
        Ok(())
    })
}

unsafe extern "C" fn native_import_module(handle: Handle, other: Handle) -> c_int {
    ffi_status("ModuleObj::ImportModule", || {
        if other.is_null() {
            tvm_ffi::bail!(ErrorKind::ValueError, "Cannot import a null module");
        }
        // SAFETY: as above; the C++ caller passes a live module as `other`.
        let (module, other) = unsafe { (module_of(handle), module_of(other)) };
        module.import_module(&other)
    })
}

unsafe extern "C" fn native_clear_imports(handle: Handle) -> c_int {
    ffi_status("ModuleObj::ClearImports", || {
        // SAFETY: as above.
        unsafe { module_of(handle) }.clear_imports()
    })
}

/// The table the vtable of the runtime's modules calls.
pub(crate) static NATIVE_METHODS: ModuleMethods = ModuleMethods {
    kind: native_kind,
    get_property_mask: native_property_mask,
    get_function: native_get_function,
    implements_function: native_implements_function,
    get_function_doc: native_function_doc,
    get_function_metadata: native_function_metadata,
    write_to_file: native_write_to_file,
    get_write_formats: native_write_formats,
    save_to_bytes: native_save_to_bytes,
    inspect_source: native_inspect_source,
    import_module: native_import_module,
    clear_imports: native_clear_imports,
};
