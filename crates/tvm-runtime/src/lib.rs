//! The TVM runtime on top of `tvm-ffi`: devices (the [`device::DeviceApi`] trait, its registry
//! and tensors on any device), modules, shared-library loading (the export conventions of
//! compiled kernels), and the system library.
//!
//! [`init`] registers the runtime's global functions (`ffi.ModuleLoadFromFile`,
//! `ffi.SystemLib`, `ffi.ModuleGetFunction`, ...), through which every language reaches
//! modules. Call it once at start-up; later calls do nothing.

pub mod async_functions;
pub mod backend;
mod blob;
pub mod device;
mod elf;
mod library;
mod module;
mod module_cxx;
mod module_globals;
pub mod profiling;
mod system_lib;

use std::path::Path;
use std::sync::OnceLock;

use tvm_ffi::function::TypedFunction;
use tvm_ffi::{AnyView, Array, Error, ErrorKind, Function, Result};

// Unit tests run in a binary of their own, which links the process state.
#[cfg(test)]
use tvm_ffi_capi as _;

pub use library::load_library;
pub use module::{Module, ModuleImpl, ModuleObj};
pub use system_lib::system_lib;

/// Loads a module from a file, dispatching on its extension to the loader registered as
/// `ffi.Module.load_from_file.<ext>` (`.so`, `.dll`, `.dylib` and `.dso` load as shared
/// libraries).
pub fn load_module(path: impl AsRef<Path>) -> Result<Module> {
    init();
    let path = path.as_ref();
    let text = path.to_str().ok_or_else(|| {
        Error::new(
            ErrorKind::ValueError,
            format!("path is not UTF-8: {}", path.display()),
        )
    })?;
    let format = match text.rsplit_once('.') {
        // A versioned shared library: libfoo.so.6, libfoo.so.1.2.3.
        _ if is_versioned_shared_library(text) => "so",
        Some((_, ext)) if !ext.contains('/') => ext,
        _ => {
            return Err(Error::new(
                ErrorKind::RuntimeError,
                format!(
                    "cannot tell the module format of '{text}': the file name has no extension"
                ),
            ));
        }
    };
    let format = if matches!(format, "dll" | "dylib" | "dso") {
        "so"
    } else {
        format
    };
    let loader = format!("ffi.Module.load_from_file.{format}");
    let loader = Function::get_global(&loader).ok_or_else(|| {
        Error::new(
            ErrorKind::RuntimeError,
            format!("Loader for `.{format}` files is not registered ({loader})"),
        )
    })?;
    loader.call((text, format))?.cast()
}

/// Whether the file name of `path` is `<name>.so.<number>[.<number>...]`.
fn is_versioned_shared_library(path: &str) -> bool {
    let file_name = path.rsplit('/').next().unwrap_or(path);
    file_name.split_once(".so.").is_some_and(|(stem, version)| {
        !stem.is_empty()
            && version
                .split('.')
                .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Makes the TVM FFI C API visible to the shared libraries loaded from now on. Their references
/// to `TVMFFI*` resolve against what the process exports: the Python extension exports them,
/// an executable that embeds the runtime does not, and for it the core loads a shim that does
/// (Linux). [`load_module`] calls this itself; call it before opening a library with `dlopen`
/// directly.
pub fn export_c_api() -> Result<()> {
    match Function::get_global("ffi.ExportCApi") {
        Some(export) => export.call(()).map(drop),
        None => Ok(()),
    }
}

pub(crate) fn register(name: &str, f: Function) {
    // As a default: a name taken by someone else keeps their function, and a library loaded
    // later that brings its own (Apache TVM's libtvm_runtime.so defines many of these names)
    // replaces ours instead of failing to load.
    let _ = f.register_global_default(name);
}

/// Registers a typed closure under `name`, which also names it in argument errors.
pub(crate) fn register_typed<F: TypedFunction<Args>, Args>(name: &str, f: F) {
    register(name, Function::from_typed(name, f));
}

fn lookup_from_imports(ctx: i64, name: &str) -> Result<Option<Function>> {
    if ctx == 0 {
        return Ok(None);
    }
    library::module_of_context(ctx)?.find_in_imports(name)
}

/// Registers the runtime's global functions and installs the device registry as the
/// environment's DLPack allocator (once).
pub fn init() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        register_typed("ffi.ModuleLoadFromFile", |path: String| load_module(path));
        register_typed(
            "ffi.Module.load_from_file.so",
            |path: String, _format: String| load_library(Path::new(&path)),
        );
        register(
            "ffi.SystemLib",
            Function::from_packed(|args: &[AnyView<'_>]| {
                let prefix: String = match args {
                    [] => String::new(),
                    [prefix] => prefix.cast()?,
                    _ => tvm_ffi::bail!(
                        ErrorKind::TypeError,
                        "ffi.SystemLib takes at most 1 argument, got {}",
                        args.len()
                    ),
                };
                Ok(system_lib(&prefix)?.into())
            }),
        );
        register_typed(
            "ffi.ModuleGetFunction",
            |m: Module, name: String, query_imports: bool| m.get_function(&name, query_imports),
        );
        register_typed(
            "ffi.ModuleImplementsFunction",
            |m: Module, name: String, query_imports: bool| {
                Ok::<bool, Error>(m.get_function(&name, query_imports)?.is_some())
            },
        );
        module_globals::register_all();
        // Once per process, like the functions: a second copy of the library keeps the first's.
        let _ = module::register_type_metadata();
        register_typed("ffi.ModuleGetKind", |m: Module| m.try_kind());
        register_typed("ffi.ModuleGetImports", |m: Module| {
            m.imports().into_iter().collect::<Array>()
        });
        register_typed("ffi.ModuleImportModule", |m: Module, other: Module| {
            m.import_module(&other)
        });
        register_typed("ffi.ModuleClearImports", |m: Module| m.clear_imports());
        register_typed("ffi.ModuleLookupFromImports", |ctx: i64, name: String| {
            lookup_from_imports(ctx, &name)
        });
        register(
            "runtime.RPCTimeEvaluator",
            Function::from_packed(profiling::time_evaluator_from_args),
        );
        register(
            "cache_flush_cpu_non_first_arg",
            Function::from_packed(profiling::flush_cpu_caches_of_inputs),
        );
        device::register_globals();
        device::install_dlpack_allocator();
        backend::register_context_symbols();
        backend::register_globals();
    });
}
