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

use std::sync::Arc;

use device_kit::registration::install_driver_backend;
use tvm_ffi::Result;

pub use api::{CudaDeviceApi, CudaHostDeviceApi};
pub use context::CudaBackend;

// Unit tests run in a binary of their own, which links the process state.
#[cfg(test)]
use tvm_ffi_capi as _;

device_kit::backend_registration!(CudaBackend, install, "CUDA");

/// Installs `backend`: the kit's device APIs, its module loaders and NVRTC.
fn install(backend: &Arc<CudaBackend>) -> Result<()> {
    install_driver_backend(backend)?;
    module::register_module_loaders(backend.clone());
    nvrtc::register_nvrtc_compile();
    Ok(())
}
