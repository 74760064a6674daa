//! Loading compiled C kernels as modules, and the system library.

use std::ffi::{c_int, c_void};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use tvm_ffi::abi::{self, TVMFFIAny};
use tvm_ffi::{Any, Function};
use tvm_runtime::{load_module, system_lib};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Compiles a C source into a shared library with the real C compiler (through `cc`).
///
/// Every call writes into a directory of its own: tests run in parallel and several compile the
/// same kernel, so a shared output path would let one test load a file another is still writing.
pub fn compile_kernel(source: &Path, name: &str) -> PathBuf {
    static NEXT_BUILD: AtomicUsize = AtomicUsize::new(0);
    let target = env!("TVM_RUNTIME_BUILD_TARGET");
    let compiler = cc::Build::new()
        .target(target)
        .host(target)
        .opt_level(1)
        .cargo_metadata(false)
        .get_compiler();
    let dir = std::env::temp_dir()
        .join(format!("tvm-runtime-tests-{}", std::process::id()))
        .join(NEXT_BUILD.fetch_add(1, Ordering::Relaxed).to_string());
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("{name}.so"));
    let status = compiler
        .to_command()
        .args(["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&out)
        .arg("-I")
        .arg(repo_root().join("cpp-abi/include"))
        .arg(source)
        .status()
        .expect("the C compiler runs");
    assert!(status.success(), "compiling {} failed", source.display());
    out
}

fn kernel(name: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/kernels/{name}.c"));
    compile_kernel(&source, name)
}

#[test]
fn exported_functions_metadata_and_docs() {
    let module = load_module(kernel("basic")).unwrap();
    assert_eq!(module.kind(), "library");
    let add = module.get_function_required("add_int").unwrap();
    assert_eq!(add.call((2i64, 40i64)).unwrap().cast::<i64>().unwrap(), 42);
    let err = add.call(("x", 1i64)).unwrap_err();
    assert_eq!(
        (err.kind().as_ref(), err.message().as_ref()),
        ("TypeError", "add_int expects two ints")
    );
    assert!(module.implements_function("add_int").unwrap());
    assert_eq!(
        module.function_doc("add_int").unwrap().as_deref(),
        Some("Adds two ints.")
    );
    assert!(
        module
            .function_metadata("add_int")
            .unwrap()
            .unwrap()
            .contains("type_schema")
    );
    let err = module.get_function_required("missing").unwrap_err();
    assert_eq!(err.kind(), "AttributeError");
    assert!(
        err.message().contains("missing") && err.message().contains("library"),
        "{err}"
    );
}

#[test]
fn functions_keep_their_library_loaded() {
    let add = load_module(kernel("basic"))
        .unwrap()
        .get_function_required("add_int")
        .unwrap();
    // The module is gone from here; the function still holds it, so the code is still mapped.
    assert_eq!(add.call((1i64, 1i64)).unwrap().cast::<i64>().unwrap(), 2);
}

#[test]
fn library_context_and_context_symbols() {
    static CONTEXT_VALUE: u8 = 0;
    let addr = (&CONTEXT_VALUE as *const u8).cast_mut().cast::<c_void>();
    // SAFETY: a NUL-terminated name; the address lives for the process.
    let rc =
        unsafe { abi::TVMFFIEnvModRegisterContextSymbol(c"test_context_symbol".as_ptr(), addr) };
    assert_eq!(rc, 0);
    let module = load_module(kernel("basic")).unwrap();
    let context = module.get_function_required("context").unwrap();
    let cookie: *mut c_void = context.call((0i64,)).unwrap().cast().unwrap();
    assert_eq!(
        cookie,
        module.as_object().as_raw().cast(),
        "the cookie is the library module"
    );
    let symbol: *mut c_void = context.call((1i64,)).unwrap().cast().unwrap();
    assert_eq!(symbol, addr);
}

#[test]
fn generated_code_finds_imports_then_globals() {
    let module = load_module(kernel("basic")).unwrap();
    let helper = tvm_runtime::Module::new(Helper);
    module.import_module(&helper).unwrap();
    let call_import = module.get_function_required("call_import").unwrap();
    let from_import = call_import.call(("helper.triple", 5i64)).unwrap();
    assert_eq!(from_import.cast::<i64>().unwrap(), 15);
    let from_registry = call_import.call(("testing.echo", 9i64)).unwrap();
    assert_eq!(from_registry.cast::<i64>().unwrap(), 9);
    let err = call_import.call(("no.such.function", 0i64)).unwrap_err();
    assert!(err.message().contains("no.such.function"), "{err}");
    let err = helper.import_module(&module).unwrap_err();
    assert!(err.message().contains("Cyclic"), "{err}");
}

struct Helper;

impl tvm_runtime::ModuleImpl for Helper {
    fn kind(&self) -> &str {
        "helper"
    }
    fn get_function(
        &self,
        _m: &tvm_runtime::Module,
        name: &str,
    ) -> tvm_ffi::Result<Option<Function>> {
        Ok(
            (name == "helper.triple")
                .then(|| Function::from_typed("helper.triple", |x: i64| 3 * x)),
        )
    }
}

#[test]
fn bad_paths_and_files_are_named() {
    let err = load_module("/definitely/not/here.so").unwrap_err();
    assert_eq!(err.kind(), "FileNotFoundError");
    assert!(err.message().contains("/definitely/not/here.so"), "{err}");
    let text = std::env::temp_dir().join(format!("not-a-library-{}.so", std::process::id()));
    std::fs::write(&text, "plain text").unwrap();
    let err = load_module(&text).unwrap_err();
    assert_eq!(err.kind(), "OSError");
    assert!(err.message().contains(text.to_str().unwrap()), "{err}");
    let err = load_module("/tmp/no_extension").unwrap_err();
    assert!(err.message().contains("extension"), "{err}");
    let err = load_module("/tmp/libx.so.6a").unwrap_err();
    assert!(err.message().contains("Loader for `.6a` files"), "{err}");
}

#[test]
fn a_bare_name_not_in_the_current_directory_is_found_by_the_loader() {
    // libc is loaded in every process, so the loader finds it by name; it exports no functions.
    let module = load_module("libc.so.6").unwrap();
    assert!(module.get_function("add_int", false).unwrap().is_none());
    let err = load_module("libtvm_nowhere_at_all.so").unwrap_err();
    assert_eq!(err.kind(), "FileNotFoundError", "{err}");
    assert!(err.message().contains("libtvm_nowhere_at_all.so"), "{err}");
    assert!(err.message().contains("search path"), "{err}");
}

#[test]
fn versioned_library_names_load_as_shared_libraries() {
    let library = kernel("basic");
    for version in ["6", "1.2.3"] {
        let versioned = library.with_file_name(format!("libbasic.so.{version}"));
        std::fs::copy(&library, &versioned).unwrap();
        let module = load_module(&versioned).unwrap();
        assert!(
            module.get_function("add_int", false).unwrap().is_some(),
            "{version}"
        );
    }
}

#[test]
fn special_files_are_refused_without_blocking() {
    let dir = std::env::temp_dir().join(format!("tvm-special-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("folder.so")).unwrap();
    let err = load_module(dir.join("folder.so")).unwrap_err();
    assert_eq!(err.kind(), "OSError");
    assert!(err.message().contains("a directory"), "{err}");
    // A FIFO would block a reader forever; it is refused before anything opens it.
    let fifo = dir.join("pipe.so");
    let c_fifo = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_fifo.as_ptr(), 0o600) }, 0);
    let err = load_module(&fifo).unwrap_err();
    assert!(err.message().contains("not a regular file"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn libraries_cut_short_are_refused_before_dlopen() {
    // dlopen maps a cut file as it is, and touching a missing page is SIGBUS in this process.
    let library = kernel("basic");
    let whole = std::fs::read(&library).unwrap();
    let len = whole.len();
    let mut cuts = vec![
        2,
        10,
        40,
        63,
        64,
        100,
        500,
        1000,
        4096,
        5000,
        len / 2,
        len - 100,
    ];
    cuts.extend([len * 3 / 4, len - 64, len - 1]);
    for cut in cuts {
        let path = library.with_file_name(format!("cut-{cut}.so"));
        std::fs::write(&path, &whole[..cut]).unwrap();
        let err = load_module(&path).unwrap_err();
        assert_eq!(err.kind(), "OSError", "cut at {cut}: {err}");
        assert!(err.message().contains(path.to_str().unwrap()), "{err}");
        if cut >= 4 {
            assert!(err.message().contains("the file is cut short"), "{err}");
            assert!(
                err.message().contains(&format!("({cut} bytes, but")),
                "{err}"
            );
        }
    }
    // The whole file still loads.
    assert!(load_module(&library).is_ok());
    // The same check, for loaders other than this one (`tvm.base.load_backend_libs`).
    let check = Function::get_global_required("runtime.CheckSharedLibrary").unwrap();
    check.call((library.to_str().unwrap(),)).unwrap();
    let cut = library.with_file_name("cut-1000.so");
    let err = check.call((cut.to_str().unwrap(),)).unwrap_err();
    assert!(err.message().contains("(1000 bytes, but its "), "{err}");
}

#[test]
fn unresolved_symbols_are_load_errors_not_exits() {
    // The kernel calls a function nobody defines: with lazy binding the process would die on
    // the first call (exit 127); the loader must refuse it now and name the symbol.
    let err = load_module(kernel("unresolved")).unwrap_err();
    assert_eq!(err.kind(), "OSError");
    assert!(err.message().contains("tvm_test_no_such_function"), "{err}");
}

#[test]
fn libraries_for_another_abi_major_are_refused() {
    let err = load_module(kernel("future_abi")).unwrap_err();
    assert_eq!(err.kind(), "ImportError");
    assert!(
        err.message().contains("7.2") && err.message().contains("0.1"),
        "{err}"
    );
}

unsafe extern "C" fn syslib_double(
    _handle: *mut c_void,
    args: *const TVMFFIAny,
    _num_args: i32,
    result: *mut TVMFFIAny,
) -> c_int {
    // SAFETY: called with one int argument and a valid result slot.
    unsafe { *result = Any::from((*args).payload.v_int64 * 2).into_raw() };
    0
}

#[test]
fn system_library_functions_are_found_by_prefix() {
    // SAFETY: a NUL-terminated name and a safe-call function.
    let rc = unsafe {
        abi::TVMFFIEnvModRegisterSystemLibSymbol(
            c"__tvm_ffi_mylib.double".as_ptr(),
            syslib_double as *mut c_void,
        )
    };
    assert_eq!(rc, 0);
    let lib = system_lib("mylib.").unwrap();
    let double = lib.get_function_required("double").unwrap();
    assert_eq!(double.call((21i64,)).unwrap().cast::<i64>().unwrap(), 42);
    assert!(
        system_lib("")
            .unwrap()
            .get_function("double", false)
            .unwrap()
            .is_none()
    );
    assert!(
        system_lib("mylib.")
            .unwrap()
            .as_object()
            .ptr_eq(lib.as_object()),
        "one module per prefix"
    );
}

#[test]
fn embedding_example_runs_a_kernel() {
    let example = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .join("../examples/run_kernel");
    assert!(
        example.exists(),
        "cargo builds the example with the tests: {}",
        example.display()
    );
    let kernel = compile_kernel(
        &repo_root().join("cpp-abi/examples/add_one_c.c"),
        "add_one_c",
    );
    let output = Command::new(&example).arg(&kernel).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        stdout.trim(),
        "add_one([1.0, 2.0, 3.0, 4.5]) = [2.0, 3.0, 4.0, 5.5]"
    );
}

#[test]
fn only_handed_out_library_contexts_are_accepted() {
    tvm_runtime::init();
    let lookup = Function::get_global_required("ffi.ModuleLookupFromImports").unwrap();
    for cookie in [5i64, -1, 0x7fff_0000_0000] {
        let err = lookup.call((cookie, "x")).unwrap_err();
        assert_eq!(err.kind(), "ValueError", "{cookie}: {err}");
        assert!(
            err.message()
                .contains("not the context of a loaded library"),
            "{err}"
        );
    }
    // The cookie a library received works.
    let module = load_module(kernel("basic")).unwrap();
    let context = module.get_function_required("context").unwrap();
    let cookie: *mut c_void = context.call((0i64,)).unwrap().cast().unwrap();
    assert!(lookup.call((cookie as i64, "nothing")).unwrap().is_none());
}

#[test]
fn a_read_only_library_context_is_a_load_error() {
    let dir = std::env::temp_dir().join(format!("tvm-runtime-ctx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("const_ctx.c");
    std::fs::write(
        &source,
        "#include <tvm/ffi/c_api.h>\nTVM_FFI_DLL_EXPORT const int __tvm_ffi__library_ctx = 3;\n",
    )
    .unwrap();
    let err = load_module(compile_kernel(&source, "const_ctx")).unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    assert!(err.message().contains("__tvm_ffi__library_ctx"), "{err}");
}

#[test]
fn modules_reflect_their_imports_as_a_read_only_field() {
    let outer = tvm_runtime::Module::new(Helper);
    let inner = tvm_runtime::Module::new(Helper);
    outer.import_module(&inner).unwrap();
    // The type metadata registers with the runtime's globals.
    tvm_runtime::init();
    let field = tvm_ffi::reflection::fields_of(abi::kTVMFFIModule)
        .find(|f| f.name() == "imports_")
        .expect("ffi.Module has imports_");
    assert_eq!(field.offset(), 24);
    assert!(
        field.metadata().contains("ffi.Array"),
        "{}",
        field.metadata()
    );
    let imports = field.get(&Any::from(outer.clone())).unwrap();
    let imports = imports.cast::<tvm_ffi::Array>().unwrap();
    assert_eq!(imports.len(), 1);
    assert_eq!(
        imports.as_slice()[0].as_object_ptr(),
        Any::from(inner).as_object_ptr()
    );
    let err = field
        .set(&Any::from(outer), Any::none().as_view())
        .unwrap_err();
    assert_eq!(err.kind(), "AttributeError");
    let info = tvm_ffi::types::type_info(abi::kTVMFFIModule).unwrap();
    assert!(!info.metadata.is_null());
    // SAFETY: a registered type's metadata lives for the process.
    let metadata = unsafe { &*info.metadata };
    assert!(metadata.total_size > 24);
    assert_eq!(
        metadata.structural_eq_hash_kind,
        abi::kTVMFFISEqHashKindUnsupported
    );
}
