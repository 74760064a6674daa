//! What the library registers when it is loaded, by whoever loads it: the runtime's and RPC's
//! global functions, module loaders and the compiled-in device backends. The same file serves
//! under our Python package, under Apache TVM FFI's (which loads it with `ctypes`), and in C,
//! C++ and Rust hosts that link it, so the registrations run from the library's constructor
//! (`.init_array` on Linux); [`register_all`] is also callable, as a no-op after the first run.

use std::sync::OnceLock;

use tvm_ffi::error::Result;
use tvm_ffi::{Array, Function};

/// The device backends compiled into this library (cargo features), in name order.
pub fn compiled_device_backends() -> Vec<&'static str> {
    let mut backends = Vec::new();
    if cfg!(feature = "cuda") {
        backends.push("cuda");
    }
    if cfg!(feature = "rocm") {
        backends.push("rocm");
    }
    if cfg!(feature = "vulkan") {
        backends.push("vulkan");
    }
    if cfg!(feature = "webgpu") {
        backends.push("webgpu");
    }
    backends
}

/// Registers everything, once; the outcome of the first run is kept and returned by later
/// calls (device backend registration can fail; `runtime.LibraryLoadStatus` reports it).
pub fn register_all() -> Result<()> {
    static OUTCOME: OnceLock<Result<()>> = OnceLock::new();
    OUTCOME
        .get_or_init(|| {
            tvm_runtime::init();
            tvm_rpc::globals::init();
            register_library_globals();
            // None of these loads a driver: each opens it on the first use of its device.
            #[cfg(feature = "vulkan")]
            device_vulkan::register()?;
            #[cfg(feature = "cuda")]
            device_cuda::register()?;
            #[cfg(feature = "webgpu")]
            device_webgpu::register()?;
            #[cfg(feature = "rocm")]
            device_rocm::register()?;
            Ok(())
        })
        .clone()
}

/// Globals that describe the library itself, for the link helpers and language bindings.
fn register_library_globals() {
    let register = |name: &str, function: Function| {
        // Registration fails only for a name taken by another library, which then answers.
        let _ = function.register_global(name, false);
    };
    register(
        "runtime.CompiledDeviceBackends",
        Function::from_typed("runtime.CompiledDeviceBackends", || {
            compiled_device_backends()
                .into_iter()
                .map(tvm_ffi::Any::from)
                .collect::<Array>()
        }),
    );
    register(
        "runtime.LibraryLoadStatus",
        Function::from_typed("runtime.LibraryLoadStatus", register_all),
    );
}

/// The constructor: runs [`register_all`] behind the panic boundary (nothing unwinds out of a
/// constructor); a failure stays in the kept outcome for `runtime.LibraryLoadStatus`.
extern "C" fn register_at_load() {
    tvm_ffi::boundary::ffi_boundary("the libtvm_ffi.so constructor", || {
        let _ = register_all();
    });
}

// The constructor runs when the dynamic loader maps the library, before `dlopen` returns.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static REGISTER_AT_LOAD: extern "C" fn() = register_at_load;
