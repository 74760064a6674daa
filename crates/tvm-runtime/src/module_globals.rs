//! The `ffi.Module*` globals beyond lookup and loading: function metadata and documentation
//! (with apache-tvm-ffi's optional `query_imports`), properties, source, file export and
//! serialization (`ffi.ModuleSaveToBytes`), and the
//! process-wide set of modules kept alive (`ffi.ModuleGlobalsAdd`/`Remove`, which the
//! original's `load_module(keep_module_alive=True)` calls).

use std::sync::Mutex;

use tvm_ffi::{Any, AnyView, Array, ErrorKind, Function};

use crate::module::Module;
use crate::{register, register_typed};

/// Modules pinned for the life of the process, each once.
static PINNED: Mutex<Vec<Module>> = Mutex::new(Vec::new());

/// Pins `module` (a module pinned already stays pinned once).
pub(crate) fn pin(module: Module) {
    let mut pinned = PINNED.lock().unwrap_or_else(|e| e.into_inner());
    if !pinned.iter().any(|m| m.same_as(&module)) {
        pinned.push(module);
    }
}

/// Unpins `module`; nothing happens when it was not pinned.
pub(crate) fn unpin(module: &Module) {
    let removed = {
        let mut pinned = PINNED.lock().unwrap_or_else(|e| e.into_inner());
        let position = pinned.iter().position(|m| m.same_as(module));
        position.map(|i| pinned.remove(i))
    };
    // Released outside the lock: the last reference may unload a library.
    drop(removed);
}

/// `(module, name[, query_imports]) -> Optional<String>`: the metadata (`doc` false) or the
/// documentation (`doc` true) of a function.
fn function_info(name: &'static str, doc: bool) -> Function {
    Function::from_packed(move |args: &[AnyView<'_>]| {
        if !(2..=3).contains(&args.len()) {
            tvm_ffi::bail!(
                ErrorKind::TypeError,
                "{name} takes (module, name[, query_imports]), got {} argument(s)",
                args.len()
            );
        }
        let module: Module = args[0].cast()?;
        let function: String = args[1].cast()?;
        let query_imports = match args.get(2) {
            Some(flag) => flag.cast::<bool>()?,
            None => false,
        };
        Ok(module
            .function_info(&function, doc, query_imports)?
            .map_or_else(Any::none, Any::from))
    })
}

/// Registers the functions above.
pub(crate) fn register_all() {
    register(
        "ffi.ModuleGetFunctionMetadata",
        function_info("ffi.ModuleGetFunctionMetadata", false),
    );
    register(
        "ffi.ModuleGetFunctionDoc",
        function_info("ffi.ModuleGetFunctionDoc", true),
    );
    register_typed("ffi.ModuleGetPropertyMask", |m: Module| m.property_mask());
    register_typed("ffi.ModuleGetWriteFormats", |m: Module| {
        Ok::<Array, tvm_ffi::Error>(m.write_formats()?.into_iter().collect())
    });
    register_typed("ffi.ModuleSaveToBytes", |m: Module| {
        Ok::<tvm_ffi::Bytes, tvm_ffi::Error>(m.save_to_bytes()?.into())
    });
    register_typed("ffi.ModuleInspectSource", |m: Module, format: String| {
        m.inspect_source(&format)
    });
    register_typed(
        "ffi.ModuleWriteToFile",
        |m: Module, path: String, format: String| m.write_to_file(&path, &format),
    );
    // Checks a shared library's file before something else (`tvm.base.load_backend_libs`, which
    // uses ctypes) hands it to `dlopen`: a file cut short would crash the process there.
    register_typed("runtime.CheckSharedLibrary", |path: String| {
        let path = std::path::Path::new(&path);
        crate::elf::check_complete(path, path)
    });
    register_typed("ffi.ModuleGlobalsAdd", pin);
    register_typed("ffi.ModuleGlobalsRemove", |m: Module| unpin(&m));
}
