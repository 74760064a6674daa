//! The backend API of compiled kernels: slots filled at load, parallel loops with workspaces and
//! barriers through them, libraries with a slot no runtime fills refused, the thread settings.

use std::path::Path;

use tvm_ffi::Function;
use tvm_runtime::backend::{self, Affinity};
use tvm_runtime::load_module;

use crate::module::compile_kernel;

fn kernel(name: &str) -> std::path::PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/kernels/{name}.c"));
    compile_kernel(&source, name)
}

#[test]
fn loaded_kernels_find_the_backend_through_their_slots() {
    tvm_runtime::init();
    let module = load_module(kernel("backend_slots")).unwrap();
    let filled = module.get_function_required("slots_filled").unwrap();
    assert!(filled.call(()).unwrap().cast::<bool>().unwrap());
    let sum = module.get_function_required("parallel_sum").unwrap();
    for n in [0i64, 1, 7, 1000, 123_457] {
        let total: i64 = sum.call((n,)).unwrap().cast().unwrap();
        assert_eq!(total, n * (n - 1).max(0) / 2, "sum of 0..{n}");
    }
    let err = sum.call(("x",)).unwrap_err();
    assert_eq!(
        (err.kind().as_ref(), err.message().as_ref()),
        ("TypeError", "parallel_sum expects a count")
    );
}

#[test]
fn a_slot_the_runtime_cannot_fill_refuses_the_library() {
    tvm_runtime::init();
    let path = kernel("unknown_slot");
    let err = load_module(&path).unwrap_err();
    assert_eq!(err.kind(), "OSError", "{err}");
    let message = err.message();
    assert!(
        message.contains("`__TVMBackendNoSuchFunction`"),
        "{message}"
    );
    assert!(message.contains(path.to_str().unwrap()), "{message}");
    assert!(message.contains("__TVMBackendParallelLaunch"), "{message}");
}

#[test]
fn context_symbols_list_the_backend_functions() {
    tvm_runtime::init();
    let symbols: tvm_ffi::Array = Function::get_global_required("ffi.GetContextSymbols")
        .unwrap()
        .call(())
        .unwrap()
        .cast()
        .unwrap();
    let names: Vec<String> = symbols
        .as_slice()
        .iter()
        .step_by(2)
        .map(|name| name.cast().unwrap())
        .collect();
    for (name, _) in backend::context_functions() {
        assert!(names.contains(&format!("__{name}")), "{name} in {names:?}");
    }
}

#[test]
fn thread_settings_are_checked() {
    tvm_runtime::init();
    let configure = Function::get_global_required("runtime.config_threadpool").unwrap();
    let err = configure.call((0i64, -2i64)).unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    assert!(err.message().contains("-2"), "{err}");
    let err = configure.call((7i64, 0i64)).unwrap_err();
    assert!(err.message().contains("unknown affinity mode 7"), "{err}");
    let err = Affinity::from_mode(-2, Vec::new()).unwrap_err();
    assert!(err.message().contains("needs a list of cpus"), "{err}");
    let err = backend::config_threadpool(Affinity::SharedCores(vec![100_000]), 2).unwrap_err();
    assert!(err.message().contains("cpu 100000"), "{err}");
    let err = backend::config_threadpool(Affinity::Unpinned, backend::MAX_THREADS + 1).unwrap_err();
    assert!(err.message().contains("at most 1024"), "{err}");
}

#[test]
fn system_library_slots_are_filled() {
    use std::ffi::c_void;
    use std::sync::atomic::{AtomicPtr, Ordering};
    static SLOT: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
    tvm_runtime::init();
    // SAFETY: a NUL-terminated name and the address of a pointer-sized slot that lives forever.
    let rc = unsafe {
        tvm_ffi::abi::TVMFFIEnvModRegisterSystemLibSymbol(
            c"backend_test.__TVMBackendAllocWorkspace".as_ptr(),
            SLOT.as_ptr().cast(),
        )
    };
    assert_eq!(rc, 0);
    tvm_runtime::system_lib("backend_test.").unwrap();
    let expected = backend::context_functions()[0];
    assert_eq!(expected.0, "TVMBackendAllocWorkspace");
    assert_eq!(SLOT.load(Ordering::SeqCst), expected.1);
}

#[test]
fn workspaces_of_other_devices_come_from_their_backend() {
    use tvm_ffi::abi::{kDLExtDev, kDLFloat};
    crate::device::setup();
    let alloc = |id: i32, nbytes: u64| {
        backend::backend_alloc_workspace(kDLExtDev, id, nbytes, kDLFloat as i32, 32)
    };
    let block = alloc(1, 4096);
    assert!(!block.is_null());
    // Cached by this thread after the free, and handed out again for the same size.
    assert_eq!(backend::backend_free_workspace(kDLExtDev, 1, block), 0);
    let again = alloc(1, 4096);
    assert_eq!(again, block);
    assert_eq!(backend::backend_free_workspace(kDLExtDev, 1, again), 0);
    // A device the backend does not have, and more than the test device's memory.
    assert!(alloc(7, 64).is_null());
    let err = tvm_ffi::Error::take_raised().unwrap();
    assert!(err.message().contains("does not exist"), "{err}");
    assert!(alloc(1, 1 << 40).is_null());
    assert_eq!(tvm_ffi::Error::take_raised().unwrap().kind(), "MemoryError");
}
