//! The CUDA backend: devices `cuda` (2) and `cuda_host` (3) through the CUDA driver API, with the
//! driver (`libcuda.so.1`, or the file `$TVM_CUDA_DRIVER` names) opened at run time on first
//! use, so a process without it imports and runs everything else; asking for a CUDA device
//! there is an error that names the library looked for.
//!
//! - [`context`]: the driver and a primary context per device;
//! - [`api`]: the device API (memory, copies with strides, streams, events, attributes);
//! - [`module`] and [`launch`]: kernel modules of kind `cuda` (PTX, cubin, fatbin) and launches
//!   following the shared launch convention, on the thread's current stream;
//! - [`nvrtc`]: CUDA C to PTX with NVRTC (`tvm.support.nvrtc_compile`), when `libnvrtc` is
//!   present.

pub mod api;
pub mod context;
pub mod driver;
pub mod launch;
mod memory;
pub mod module;
pub mod nvrtc;
mod runtime;
mod stream;

use std::sync::Arc;

use device_kit::registration::BackendSlot;
use tvm_ffi::Result;
use tvm_ffi::abi::{kDLCUDA, kDLCUDAHost};

pub use api::{CudaDeviceApi, CudaHostDeviceApi};
pub use context::CudaBackend;

// Unit tests run in a binary of their own, which links the process state.
#[cfg(test)]
use tvm_ffi_capi as _;

static BACKEND: BackendSlot<CudaBackend> = BackendSlot::new();

/// Registers the backend for `cuda` and `cuda_host` devices (reading [`CudaBackend::from_env`])
/// and the loaders of `cuda` modules; returns the registered backend (the first one, when
/// called again). Loads nothing: the driver is opened on the first use of a CUDA device.
pub fn register() -> Result<Arc<CudaBackend>> {
    BACKEND.register(|| Arc::new(CudaBackend::from_env()), install)
}

/// [`register`] with `backend` in place of the one from the environment.
pub fn register_backend(backend: Arc<CudaBackend>) -> Result<Arc<CudaBackend>> {
    BACKEND.register(|| backend, install)
}

/// The registered backend, once [`register`] or [`register_backend`] ran.
pub fn registered_backend() -> Option<Arc<CudaBackend>> {
    BACKEND.get()
}

/// Installs `backend` for `cuda` and `cuda_host` devices, its module loaders and NVRTC.
fn install(backend: &Arc<CudaBackend>) -> Result<()> {
    tvm_runtime::device::register_device_api(
        kDLCUDA,
        Arc::new(CudaDeviceApi::new(backend.clone())),
    )?;
    tvm_runtime::device::register_device_api(
        kDLCUDAHost,
        Arc::new(CudaHostDeviceApi::new(backend.clone())),
    )?;
    module::register_module_loaders(backend.clone());
    nvrtc::register_nvrtc_compile();
    Ok(())
}
