//! What the library registers when it is loaded, by whoever loads it: the runtime's and RPC's
//! global functions, module loaders and the compiled-in device backends. The same file serves
//! as `tvm._native` and as a drop-in `libtvm_ffi.so` under the original's Python package, which
//! loads it with `ctypes` and never runs the Python module's init, so the registrations run from
//! the library's constructor (`.init_array` on Linux) and again, as a no-op, from that init.

use std::sync::OnceLock;

use tvm_ffi::error::Result;

/// Registers everything, once; the outcome of the first run is kept and returned by later
/// calls (device backend registration can fail, and the Python module init reports it).
pub(crate) fn register_all() -> Result<()> {
    static OUTCOME: OnceLock<Result<()>> = OnceLock::new();
    OUTCOME
        .get_or_init(|| {
            tvm_runtime::init();
            tvm_rpc::globals::init();
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

/// The constructor: runs [`register_all`] behind the panic boundary (nothing unwinds out of a
/// constructor); a failure stays in the kept outcome for the Python module init to report.
extern "C" fn register_at_load() {
    tvm_ffi::boundary::ffi_boundary("the tvm library constructor", || {
        let _ = register_all();
    });
}

// The constructor runs when the dynamic loader maps the library, before `dlopen` returns.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static REGISTER_AT_LOAD: extern "C" fn() = register_at_load;
