//! Modules: named collections of functions (a loaded shared library, the system library, or a
//! device module) that may import other modules.

use std::ffi::CString;
use std::sync::Mutex;

use crate::module_cxx;
use crate::profiling::TimerConfig;

use tvm_ffi::abi::{TVMFFIObject, kTVMFFIModule};
use tvm_ffi::{
    Any, AnyView, Error, ErrorKind, Function, Object, ObjectCore, ObjectRef, Result, TryFromAnyView,
};

/// What a kind of module provides.
pub trait ModuleImpl: Send + Sync + 'static {
    /// The module kind, such as `"library"` or `"system_lib"`.
    fn kind(&self) -> &str;

    /// The module's own function `name` (imports are searched by [`Module`]). `module` is the
    /// module object itself, for functions that must keep it alive.
    fn get_function(&self, module: &Module, name: &str) -> Result<Option<Function>>;

    /// The JSON type schema of function `name`, if the module records one.
    fn function_metadata(&self, _name: &str) -> Result<Option<String>> {
        Ok(None)
    }

    /// The documentation of function `name`, if the module records one.
    fn function_doc(&self, _name: &str) -> Result<Option<String>> {
        Ok(None)
    }

    /// The module's property bits: [`Module::BINARY_SERIALIZABLE`], [`Module::RUNNABLE`],
    /// [`Module::COMPILATION_EXPORTABLE`] (none by default).
    fn property_mask(&self) -> i64 {
        0
    }

    /// The formats [`ModuleImpl::write_to_file`] accepts (none by default).
    fn write_formats(&self) -> Vec<String> {
        Vec::new()
    }

    /// The module's source in `format`, empty when it has none (the default).
    fn inspect_source(&self, _format: &str) -> Result<String> {
        Ok(String::new())
    }

    /// Writes the module to `path` in `format`; by default a `RuntimeError` naming the kind.
    fn write_to_file(&self, _path: &str, _format: &str) -> Result<()> {
        Err(Error::new(
            ErrorKind::RuntimeError,
            format!("Module[{}] does not support WriteToFile", self.kind()),
        ))
    }

    /// The module serialized to bytes; by default a `RuntimeError` naming the kind.
    fn save_to_bytes(&self) -> Result<Vec<u8>> {
        Err(Error::new(
            ErrorKind::RuntimeError,
            format!("Module[{}] does not support SaveToBytes", self.kind()),
        ))
    }

    /// A time evaluator of function `name` that measures where the module lives, for modules
    /// whose functions run elsewhere (a remote module); `None` times the function here.
    fn time_evaluator(
        &self,
        _module: &Module,
        _name: &str,
        _device: tvm_ffi::Device,
        _config: &TimerConfig,
        _preprocess: &str,
    ) -> Result<Option<Function>> {
        Ok(None)
    }
}

/// The part every module object shares, seen from its handle: the header, `imports_` (an owned
/// `ffi.Array` of modules) and the C++ class's import lookup cache (unused here). The C++ ABI
/// puts a vtable pointer 8 bytes before the handle (`tvm/ffi/module.h`); modules made by this
/// runtime are [`NativeModule`]s, the others were made by C++ code and are called through their
/// vtable (`module_cxx`).
#[repr(C)]
pub struct ModuleObj {
    base: Object,
    imports: *mut TVMFFIObject,
    import_lookup_cache: *mut TVMFFIObject,
}

// SAFETY: the imports are replaced under the module's lock (native modules) or by the module's
// own C++ code; the object is shared through atomic reference counts.
unsafe impl Send for ModuleObj {}
// SAFETY: as above.
unsafe impl Sync for ModuleObj {}

// SAFETY: repr(C) with the header first; `ffi.Module` has the static index 73.
unsafe impl ObjectCore for ModuleObj {
    const TYPE_KEY: &'static str = "ffi.Module";
    fn type_index() -> i32 {
        kTVMFFIModule
    }
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFIModule
    }
}

/// A module made by this runtime: the shared part, then what the C++ class `NativeModuleObj`
/// reads (its table of Rust functions and its kind), then the implementation.
#[repr(C)]
struct NativeModule {
    common: ModuleObj,
    methods: *const module_cxx::ModuleMethods,
    kind: *const std::ffi::c_char,
    kind_text: CString,
    inner: Box<dyn ModuleImpl>,
    /// Held while `imports` is replaced or read.
    imports_lock: Mutex<()>,
}

impl Drop for NativeModule {
    fn drop(&mut self) {
        let imports = std::mem::replace(&mut self.common.imports, std::ptr::null_mut());
        if !imports.is_null() {
            // SAFETY: the module owned one reference to its imports array.
            unsafe { tvm_ffi::object::dec_ref(imports) };
        }
    }
}

/// The allocation of a native module: the C++ vtable pointer, then the object.
#[repr(C)]
struct NativeBlock {
    vtable: *const std::ffi::c_void,
    module: NativeModule,
}

/// The deleter of native modules: drops the module (strong flag), frees the block (weak flag).
unsafe extern "C" fn native_module_deleter(obj: *mut std::ffi::c_void, flags: std::ffi::c_int) {
    tvm_ffi::boundary::ffi_boundary("the module deleter", || {
        // SAFETY: `obj` is the handle of a native module, `offset_of!(NativeBlock, module)` bytes
        // into the block `Module::new` allocated.
        let block = unsafe {
            obj.cast::<u8>()
                .sub(std::mem::offset_of!(NativeBlock, module))
                .cast::<NativeBlock>()
        };
        if flags & tvm_ffi::abi::kTVMFFIObjectDeleterFlagBitMaskStrong != 0 {
            // SAFETY: the strong count reached zero: nobody reads the module any more.
            unsafe { std::ptr::drop_in_place(&raw mut (*block).module) };
        }
        if flags & tvm_ffi::abi::kTVMFFIObjectDeleterFlagBitMaskWeak != 0 {
            // SAFETY: the block came from `libc::malloc` and no reference remains.
            unsafe { libc::free(block.cast()) };
        }
    });
}

/// Where the reflected field `imports_` (the imported modules, an `Array`) is: right after the
/// header, where the C++ layout has it.
const IMPORTS_FIELD_OFFSET: usize = std::mem::offset_of!(ModuleObj, imports);

/// The getter of `imports_`: the imported modules as an array.
unsafe extern "C" fn imports_getter(
    field: *mut std::ffi::c_void,
    result: *mut tvm_ffi::abi::TVMFFIAny,
) -> std::ffi::c_int {
    tvm_ffi::boundary::ffi_status("ffi.Module.imports_", || {
        // SAFETY: a field getter is called with the object's address plus the field's offset,
        // and this one is registered for `ffi.Module`, whose objects stay alive for the call.
        let handle = unsafe { field.cast::<u8>().sub(IMPORTS_FIELD_OFFSET) };
        // SAFETY: as above.
        let obj = unsafe { ObjectRef::<ModuleObj>::from_borrowed(handle.cast()) };
        let array = Module { obj }.imports_array();
        // SAFETY: `result` is the caller's slot for one owning value.
        unsafe { result.write(Any::from(array).into_raw()) };
        Ok(())
    })
}

/// Registers the type metadata of `ffi.Module`: its size and the read-only field `imports_`
/// (structural comparison stays unsupported for modules, as in apache-tvm-ffi).
pub(crate) fn register_type_metadata() -> Result<()> {
    use tvm_ffi::abi::{self, TVMFFIByteArray, TVMFFIFieldInfo, TVMFFITypeMetadata};
    let check = |rc: i32, what: &str| {
        if rc == 0 {
            Ok(())
        } else {
            Err(Error::take_raised_or(ErrorKind::RuntimeError, what))
        }
    };
    let metadata = TVMFFITypeMetadata {
        doc: TVMFFIByteArray::EMPTY,
        creator: None,
        total_size: i32::try_from(std::mem::size_of::<ModuleObj>()).unwrap_or(0),
        structural_eq_hash_kind: abi::kTVMFFISEqHashKindUnsupported,
    };
    // SAFETY: the record is valid for the call; the runtime copies it.
    let rc = unsafe { abi::TVMFFITypeRegisterMetadata(kTVMFFIModule, &metadata) };
    check(rc, "ffi.Module metadata")?;
    let field = TVMFFIFieldInfo {
        name: TVMFFIByteArray::from_text("imports_"),
        doc: TVMFFIByteArray::from_text("The imported modules."),
        metadata: TVMFFIByteArray::from_text(
            r#"{"type_schema":"{\"type\":\"ffi.Array\",\"args\":[{\"type\":\"Any\"}]}"}"#,
        ),
        flags: 0,
        size: std::mem::size_of::<usize>() as i64,
        alignment: std::mem::align_of::<usize>() as i64,
        offset: IMPORTS_FIELD_OFFSET as i64,
        getter: Some(imports_getter),
        setter: std::ptr::null_mut(),
        default_value_or_factory: abi::TVMFFIAny::NONE,
        field_static_type_index: abi::kTVMFFIArray,
    };
    // SAFETY: as above; the getter matches the field's declaration.
    let rc = unsafe { abi::TVMFFITypeRegisterField(kTVMFFIModule, &field) };
    check(rc, "ffi.Module.imports_")
}

/// The object an `Any` holds, with the reference the `Any` owned.
fn owned_object(value: Any) -> *mut TVMFFIObject {
    let ptr = value.as_object_ptr().expect("an object value");
    std::mem::forget(value);
    ptr
}

/// Who implements a module's functions.
enum Implementation<'a> {
    /// A module of this runtime.
    Native(&'a NativeModule),
    /// A module made by C++ code, called through its vtable.
    Virtual(module_cxx::Virtual<'static>),
}

/// A reference to a module.
#[derive(Clone)]
pub struct Module {
    obj: ObjectRef<ModuleObj>,
}

impl Module {
    /// Property bit: the module can be serialized to bytes.
    pub const BINARY_SERIALIZABLE: i64 = 0b001;
    /// Property bit: the module's functions can run in this process.
    pub const RUNNABLE: i64 = 0b010;
    /// Property bit: the module can be exported for compilation (written as source or object).
    pub const COMPILATION_EXPORTABLE: i64 = 0b100;

    /// Wraps a module implementation in a new module object, laid out as a C++ `ModuleObj`
    /// (the vtable of the C++ half before the handle, when the process has it).
    pub fn new(inner: impl ModuleImpl) -> Module {
        let kind_text = CString::new(inner.kind().replace('\0', "\\0")).expect("NUL replaced");
        let vtable = module_cxx::bridge().map_or(std::ptr::null(), |b| b.native_vtable);
        let imports = owned_object(Any::from(tvm_ffi::Array::new()));
        let size = std::mem::size_of::<NativeBlock>();
        // SAFETY: malloc with a non-zero size; checked for NULL below.
        let block = unsafe { libc::malloc(size) }.cast::<NativeBlock>();
        if block.is_null() {
            std::alloc::handle_alloc_error(std::alloc::Layout::new::<NativeBlock>());
        }
        // SAFETY: the block is large enough and aligned (malloc alignment covers NativeBlock).
        unsafe {
            block.write(NativeBlock {
                vtable,
                module: NativeModule {
                    common: ModuleObj {
                        base: Object::header(),
                        imports,
                        import_lookup_cache: std::ptr::null_mut(),
                    },
                    methods: &module_cxx::NATIVE_METHODS,
                    kind: kind_text.as_ptr(),
                    kind_text,
                    inner: Box::new(inner),
                    imports_lock: Mutex::new(()),
                },
            });
            let header = (&raw mut (*block).module).cast::<TVMFFIObject>();
            (*header).combined_ref_count =
                std::sync::atomic::AtomicU64::new(tvm_ffi::abi::kTVMFFIObjectBothOne);
            (*header).type_index = kTVMFFIModule;
            (*header).deleter = Some(native_module_deleter);
            Module {
                obj: ObjectRef::from_raw(header),
            }
        }
    }

    /// Wraps a module object reference.
    pub(crate) fn from_object(obj: ObjectRef<ModuleObj>) -> Module {
        Module { obj }
    }

    /// The underlying object reference.
    pub fn as_object(&self) -> &ObjectRef<ModuleObj> {
        &self.obj
    }

    /// The module as a native module, if this runtime made it: its vtable pointer is the one
    /// of the C++ class `NativeModuleObj`, or NULL (made while the process had no C++ half; a
    /// module made by C++ code always has a vtable).
    fn native(&self) -> Option<&NativeModule> {
        let header = self.obj.as_raw();
        // SAFETY: every module object has its vtable pointer right before the handle.
        let vtable = unsafe { *header.cast::<*const std::ffi::c_void>().sub(1) };
        let is_native = vtable.is_null()
            || module_cxx::bridge().is_some_and(|bridge| bridge.native_vtable == vtable);
        // SAFETY: modules with this vtable were allocated by `Module::new` as NativeModules.
        is_native.then(|| unsafe { &*header.cast::<NativeModule>() })
    }

    fn implementation(&self) -> Result<Implementation<'_>> {
        match self.native() {
            Some(native) => Ok(Implementation::Native(native)),
            None => module_cxx::Virtual::of(self).map(Implementation::Virtual),
        }
    }

    /// Whether this runtime made the module (as opposed to C++ code in another library).
    pub fn is_native(&self) -> bool {
        self.native().is_some()
    }

    /// The module kind (for a C++ module whose `kind()` fails, a text saying so).
    pub fn kind(&self) -> String {
        self.try_kind()
            .unwrap_or_else(|err| format!("<kind() failed: {err}>"))
    }

    /// The module kind, or the error of a C++ module's `kind()`.
    pub fn try_kind(&self) -> Result<String> {
        match self.implementation()? {
            Implementation::Native(native) => Ok(native.inner.kind().to_owned()),
            Implementation::Virtual(calls) => calls.kind(),
        }
    }

    /// The imports array (shared; an empty one when the field is NULL).
    fn imports_array(&self) -> tvm_ffi::Array {
        let _guard = self.native().map(|native| {
            native
                .imports_lock
                .lock()
                .unwrap_or_else(|e| e.into_inner())
        });
        let ptr = self.obj.imports;
        if ptr.is_null() {
            return tvm_ffi::Array::new();
        }
        // SAFETY: the field holds a live object, kept alive by the module while the lock (or,
        // for a C++ module, the caller's use of it) lasts; the new reference is our own.
        let obj = unsafe { ObjectRef::<Object>::from_borrowed(ptr) };
        Any::from_object(obj).cast().unwrap_or_default()
    }

    /// The imported modules (anything else in a C++ module's list is skipped).
    pub fn imports(&self) -> Vec<Module> {
        self.imports_array()
            .iter()
            .filter_map(|item| item.try_as::<Module>())
            .collect()
    }

    /// The module's own function `name` (not its imports).
    fn own_function(&self, name: &str) -> Result<Option<Function>> {
        match self.implementation()? {
            Implementation::Native(native) => native.inner.get_function(self, name),
            Implementation::Virtual(calls) => calls.get_function(name),
        }
    }

    /// Function `name` of this module, then (with `query_imports`) of its imports, depth first.
    pub fn get_function(&self, name: &str, query_imports: bool) -> Result<Option<Function>> {
        if let Some(f) = self.own_function(name)? {
            return Ok(Some(f));
        }
        if query_imports {
            return self.find_in_imports(name);
        }
        Ok(None)
    }

    /// Function `name` in the imports (recursively), depth first.
    pub fn find_in_imports(&self, name: &str) -> Result<Option<Function>> {
        for import in self.imports() {
            if let Some(f) = import.get_function(name, true)? {
                return Ok(Some(f));
            }
        }
        Ok(None)
    }

    /// Function `name`, or an `AttributeError` naming it and the module.
    pub fn get_function_required(&self, name: &str) -> Result<Function> {
        self.get_function(name, false)?.ok_or_else(|| {
            Error::new(
                ErrorKind::AttributeError,
                format!("Module[{}] has no function `{name}`", self.kind()),
            )
        })
    }

    /// Whether the module (not its imports) has function `name`.
    pub fn implements_function(&self, name: &str) -> Result<bool> {
        match self.implementation()? {
            Implementation::Native(native) => Ok(native.inner.get_function(self, name)?.is_some()),
            Implementation::Virtual(calls) => calls.implements_function(name),
        }
    }

    /// The time evaluator of function `name` that the module's kind provides, if it measures
    /// elsewhere (see [`ModuleImpl::time_evaluator`]).
    pub(crate) fn remote_time_evaluator(
        &self,
        name: &str,
        device: tvm_ffi::Device,
        config: &TimerConfig,
        preprocess: &str,
    ) -> Result<Option<Function>> {
        match self.native() {
            Some(native) => native
                .inner
                .time_evaluator(self, name, device, config, preprocess),
            None => Ok(None),
        }
    }

    /// The JSON type schema of function `name`, if recorded.
    pub fn function_metadata(&self, name: &str) -> Result<Option<String>> {
        self.function_info(name, false, false)
    }

    /// The documentation of function `name`, if recorded.
    pub fn function_doc(&self, name: &str) -> Result<Option<String>> {
        self.function_info(name, true, false)
    }

    /// [`Module::function_metadata`] (`doc` false) or [`Module::function_doc`] (`doc` true) of
    /// this module, then, with `query_imports`, of its imports depth first.
    pub fn function_info(
        &self,
        name: &str,
        doc: bool,
        query_imports: bool,
    ) -> Result<Option<String>> {
        let own = match self.implementation()? {
            Implementation::Native(native) if doc => native.inner.function_doc(name)?,
            Implementation::Native(native) => native.inner.function_metadata(name)?,
            Implementation::Virtual(calls) => calls.function_info(name, doc)?,
        };
        if own.is_some() || !query_imports {
            return Ok(own);
        }
        for import in self.imports() {
            if let Some(found) = import.function_info(name, doc, true)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// The module's property bits ([`Module::RUNNABLE`], ...).
    pub fn property_mask(&self) -> Result<i64> {
        match self.implementation()? {
            Implementation::Native(native) => Ok(native.inner.property_mask()),
            Implementation::Virtual(calls) => calls.property_mask(),
        }
    }

    /// The formats [`Module::write_to_file`] accepts.
    pub fn write_formats(&self) -> Result<Vec<String>> {
        match self.implementation()? {
            Implementation::Native(native) => Ok(native.inner.write_formats()),
            Implementation::Virtual(calls) => calls.write_formats(),
        }
    }

    /// The module's source in `format` (empty when it has none).
    pub fn inspect_source(&self, format: &str) -> Result<String> {
        match self.implementation()? {
            Implementation::Native(native) => native.inner.inspect_source(format),
            Implementation::Virtual(calls) => calls.inspect_source(format),
        }
    }

    /// Writes the module to `path` in `format`.
    pub fn write_to_file(&self, path: &str, format: &str) -> Result<()> {
        match self.implementation()? {
            Implementation::Native(native) => native.inner.write_to_file(path, format),
            Implementation::Virtual(calls) => calls.write_to_file(path, format),
        }
    }

    /// The module serialized to bytes.
    pub fn save_to_bytes(&self) -> Result<Vec<u8>> {
        match self.implementation()? {
            Implementation::Native(native) => native.inner.save_to_bytes(),
            Implementation::Virtual(calls) => calls.save_to_bytes(),
        }
    }

    /// Whether both refer to the same module object.
    pub fn same_as(&self, other: &Module) -> bool {
        self.obj.ptr_eq(&other.obj)
    }

    /// Adds `other` to the imports; a `RuntimeError` if that would create a cycle. A module may
    /// be imported more than once (lookups find the first).
    pub fn import_module(&self, other: &Module) -> Result<()> {
        let native = match self.implementation()? {
            Implementation::Native(native) => native,
            Implementation::Virtual(calls) => return calls.import_module(other),
        };
        if other.same_as(self) || other.reaches(self) {
            return Err(Error::new(
                ErrorKind::RuntimeError,
                "Cyclic dependency detected during import",
            ));
        }
        let mut items: Vec<Any> = self.imports_array().iter().cloned().collect();
        items.push(Any::from(other.clone()));
        self.replace_imports(native, tvm_ffi::Array::from_vec(items));
        Ok(())
    }

    /// Whether `target` is reached from this module through imports.
    fn reaches(&self, target: &Module) -> bool {
        let mut seen = vec![self.obj.as_raw()];
        let mut pending = vec![self.clone()];
        while let Some(module) = pending.pop() {
            for import in module.imports() {
                if import.same_as(target) {
                    return true;
                }
                if !seen.contains(&import.obj.as_raw()) {
                    seen.push(import.obj.as_raw());
                    pending.push(import);
                }
            }
        }
        false
    }

    /// Stores a new imports array in a native module, releasing the old one.
    fn replace_imports(&self, native: &NativeModule, imports: tvm_ffi::Array) {
        let new_ptr = owned_object(Any::from(imports));
        let old = {
            let _guard = native
                .imports_lock
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let field = (&raw const native.common.imports).cast_mut();
            // SAFETY: the field is written only here, under the lock, and read under it.
            unsafe { std::ptr::replace(field, new_ptr) }
        };
        if !old.is_null() {
            // SAFETY: the module owned one reference to the old array.
            unsafe { tvm_ffi::object::dec_ref(old) };
        }
    }

    /// Removes every import.
    pub fn clear_imports(&self) -> Result<()> {
        match self.implementation()? {
            Implementation::Native(native) => {
                self.replace_imports(native, tvm_ffi::Array::new());
                Ok(())
            }
            Implementation::Virtual(calls) => calls.clear_imports(),
        }
    }
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Module(kind={}, {:p})", self.kind(), self.obj.as_raw())
    }
}

impl From<Module> for Any {
    fn from(m: Module) -> Any {
        Any::from_object(m.obj)
    }
}

impl TryFromAnyView for Module {
    const TYPE_NAME: &'static str = "ffi.Module";
    fn try_from_view(view: &AnyView<'_>) -> Option<Module> {
        ObjectRef::<ModuleObj>::try_from_view(view).map(|obj| Module { obj })
    }
}
