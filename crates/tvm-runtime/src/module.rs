//! Modules: named collections of functions (a loaded shared library, the system library, or a
//! device module) that may import other modules.

use std::sync::Mutex;

use crate::profiling::TimerConfig;

use tvm_ffi::abi::kTVMFFIModule;
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

/// The object behind a [`Module`] (`ffi.Module`, index 73). Its layout is private: other
/// languages reach modules through the `ffi.Module*` global functions.
#[repr(C)]
pub struct ModuleObj {
    base: Object,
    inner: Box<dyn ModuleImpl>,
    imports: Mutex<Vec<Module>>,
}

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

/// Where the reflected field `imports_` (the imported modules, an `Array`) is reported: right
/// after the header, where the original's layout has it. The field is read only through its
/// getter, which finds the module from the field's address.
const IMPORTS_FIELD_OFFSET: usize = std::mem::size_of::<Object>();

/// The getter of `imports_`: the imported modules as a new array.
unsafe extern "C" fn imports_getter(
    field: *mut std::ffi::c_void,
    result: *mut tvm_ffi::abi::TVMFFIAny,
) -> std::ffi::c_int {
    // SAFETY: a field getter is called with the object's address plus the field's offset, and
    // this one is registered for `ffi.Module`, whose objects are `ModuleObj`s that stay alive
    // during the call.
    let obj = unsafe {
        &*field
            .cast::<u8>()
            .sub(IMPORTS_FIELD_OFFSET)
            .cast::<ModuleObj>()
    };
    let imports = obj
        .imports
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let array: tvm_ffi::Array = imports.into_iter().map(Any::from).collect();
    // SAFETY: `result` is the caller's slot for one owning value.
    unsafe { result.write(Any::from(array).into_raw()) };
    0
}

/// Registers the type metadata of `ffi.Module`: its size and the read-only field `imports_`
/// (structural comparison stays unsupported for modules, as in the original).
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

    /// Wraps a module implementation in a new module object.
    pub fn new(inner: impl ModuleImpl) -> Module {
        let obj = ObjectRef::new(ModuleObj {
            base: Object::header(),
            inner: Box::new(inner),
            imports: Mutex::new(Vec::new()),
        });
        Module { obj }
    }

    /// The underlying object reference.
    pub fn as_object(&self) -> &ObjectRef<ModuleObj> {
        &self.obj
    }

    /// The module kind.
    pub fn kind(&self) -> String {
        self.obj.inner.kind().to_owned()
    }

    fn imports_guard(&self) -> std::sync::MutexGuard<'_, Vec<Module>> {
        self.obj.imports.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The imported modules.
    pub fn imports(&self) -> Vec<Module> {
        self.imports_guard().clone()
    }

    /// Function `name` of this module, then (with `query_imports`) of its imports, depth first.
    pub fn get_function(&self, name: &str, query_imports: bool) -> Result<Option<Function>> {
        if let Some(f) = self.obj.inner.get_function(self, name)? {
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
        Ok(self.obj.inner.get_function(self, name)?.is_some())
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
        self.obj
            .inner
            .time_evaluator(self, name, device, config, preprocess)
    }

    /// The JSON type schema of function `name`, if recorded.
    pub fn function_metadata(&self, name: &str) -> Result<Option<String>> {
        self.obj.inner.function_metadata(name)
    }

    /// The documentation of function `name`, if recorded.
    pub fn function_doc(&self, name: &str) -> Result<Option<String>> {
        self.obj.inner.function_doc(name)
    }

    /// [`Module::function_metadata`] (`doc` false) or [`Module::function_doc`] (`doc` true) of
    /// this module, then, with `query_imports`, of its imports depth first.
    pub fn function_info(
        &self,
        name: &str,
        doc: bool,
        query_imports: bool,
    ) -> Result<Option<String>> {
        let own = if doc {
            self.function_doc(name)?
        } else {
            self.function_metadata(name)?
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
    pub fn property_mask(&self) -> i64 {
        self.obj.inner.property_mask()
    }

    /// The formats [`Module::write_to_file`] accepts.
    pub fn write_formats(&self) -> Vec<String> {
        self.obj.inner.write_formats()
    }

    /// The module's source in `format` (empty when it has none).
    pub fn inspect_source(&self, format: &str) -> Result<String> {
        self.obj.inner.inspect_source(format)
    }

    /// Writes the module to `path` in `format`.
    pub fn write_to_file(&self, path: &str, format: &str) -> Result<()> {
        self.obj.inner.write_to_file(path, format)
    }

    /// Whether both refer to the same module object.
    pub fn same_as(&self, other: &Module) -> bool {
        self.obj.ptr_eq(&other.obj)
    }

    /// Adds `other` to the imports; a `RuntimeError` if that would create a cycle.
    pub fn import_module(&self, other: &Module) -> Result<()> {
        if other.obj.ptr_eq(&self.obj) || other.reaches(self) {
            return Err(Error::new(
                ErrorKind::RuntimeError,
                "Cyclic dependency detected during import",
            ));
        }
        self.imports_guard().push(other.clone());
        Ok(())
    }

    fn reaches(&self, target: &Module) -> bool {
        self.imports()
            .iter()
            .any(|m| m.obj.ptr_eq(&target.obj) || m.reaches(target))
    }

    /// Removes every import.
    pub fn clear_imports(&self) {
        self.imports_guard().clear();
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
