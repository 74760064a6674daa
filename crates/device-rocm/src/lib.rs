//! The ROCm backend: devices `rocm` (10) and `rocm_host` (11) through the HIP runtime, with
//! `libamdhip64.so` (or the file `$TVM_ROCM_DRIVER` names) opened at run time on first use, so a
//! process without it imports and runs everything else; asking for a ROCm device there is an
//! error that names the library looked for.
//!
//! - [`hip`]: the library's entry points, versions and error text;
//! - [`runtime`]: memory, copies with strides, streams and events, through device-kit's
//!   device API;
//! - `attributes`: device attributes, the `gfx...` architecture among them;
//! - [`module`]: kernel modules of HSACO code objects and launches following the shared launch
//!   convention with the arguments packed into one aligned blob, on the thread's current stream.

mod attributes;
pub mod hip;
pub mod module;
pub mod runtime;

use std::sync::Arc;

use device_kit::driver::device_api::{GpuDeviceApi, GpuHostDeviceApi};
use device_kit::registration::install_driver_backend;
use tvm_ffi::Result;

pub use runtime::{HipRuntime, RocmBackend};

// Unit tests run in a binary of their own, which links the process state.
#[cfg(test)]
use tvm_ffi_capi as _;

/// The `rocm` devices: memory from `hipMalloc`, copies and streams of HIP.
pub type RocmDeviceApi = GpuDeviceApi<RocmBackend>;

/// The `rocm_host` devices: page-locked host memory (`hipHostMalloc`); index `i` allocates with
/// `rocm:i` current.
pub type RocmHostDeviceApi = GpuHostDeviceApi<RocmBackend>;

device_kit::backend_registration!(RocmBackend, install, "ROCm");

/// Installs `backend`: the kit's device APIs, its module loaders.
fn install(backend: &Arc<RocmBackend>) -> Result<()> {
    install_driver_backend(backend)?;
    module::register_module_loaders(backend.clone());
    Ok(())
}
