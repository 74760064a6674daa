//! The WebGPU device backend of the TVM runtime, through `wgpu` (Vulkan underneath on Linux,
//! Metal on macOS, DX12 or Vulkan on Windows): nothing is loaded until a WebGPU device is first
//! used, and a missing driver is an error that says so (while `webgpu:N` simply does not exist).
//!
//! - [`WebGpuDeviceApi`]: adapters by index, one storage buffer per allocation (sizes padded to
//!   4 bytes), strided copies (unaligned ends through the host), one queue per device as its
//!   stream, attributes from the adapter's limits.
//! - Kernel modules of kind `webgpu`: WGSL shaders with their function metadata, from the
//!   serialized form a compiled library embeds (`ffi.Module.load_from_bytes.webgpu`) or from a
//!   `.wgsl` file and its `.tvm_meta.json` (`ffi.Module.load_from_file.wgsl`). Tensors bind as
//!   storage buffers 0..n-1 of group 0, scalars in one uniform params block at binding n (see
//!   the `launch` module docs), and the grid comes from the launch arguments.
//! - Asynchronous at heart: synchronization and readback are futures completed by a poller
//!   thread per device ([`sync_async`], [`copy_to_host_async`]), served as global functions for
//!   the RPC server's asynchronous mode and for Python's asyncio.
//!
//! [`register`] installs the backend for `kDLWebGPU` and its global functions.

mod api;
mod async_api;
mod completion;
mod copy;
mod device;
mod error;
mod instance;
mod launch;
mod memory;
mod module;
mod wgsl;

use std::sync::{Arc, OnceLock};

use tvm_ffi::{Any, Array, Function, Result};

pub use api::WebGpuDeviceApi;
pub use async_api::{copy_to_host_async, sync_async};
pub use error::WebGpuError;
pub use module::{WebGpuModule, load_wgsl_file, module_from_bytes, module_to_bytes};

// Unit tests run in a binary of their own, which links the process state.
#[cfg(test)]
use tvm_ffi_capi as _;

/// DLPack's device type of WebGPU devices.
pub const WEBGPU_DEVICE_TYPE: i32 = tvm_ffi::abi::kDLWebGPU;

static BACKEND: OnceLock<Arc<WebGpuDeviceApi>> = OnceLock::new();

/// The registered backend, once [`register`] ran.
pub fn registered_backend() -> Option<Arc<WebGpuDeviceApi>> {
    BACKEND.get().cloned()
}

fn register_global(name: &str, f: Function) {
    // A name taken by someone else keeps their function.
    let _ = f.register_global(name, false);
}

/// Registers the backend for `kDLWebGPU`, the `webgpu` module loaders and the asynchronous
/// functions; returns the backend (the first one, when called again). Loads nothing.
pub fn register() -> Result<Arc<WebGpuDeviceApi>> {
    let mut outcome = Ok(());
    let api = BACKEND.get_or_init(|| {
        let api = Arc::new(WebGpuDeviceApi::new());
        outcome = tvm_runtime::device::register_device_api(WEBGPU_DEVICE_TYPE, api.clone());
        let (from_bytes, from_file) = (api.clone(), api.clone());
        device_kit::kernel::register_module_loaders(
            "webgpu",
            "wgsl",
            move |bytes| module_from_bytes(from_bytes.clone(), bytes),
            move |path| load_wgsl_file(from_file.clone(), path),
        );
        let name = "runtime.webgpu.device_names";
        let backend = api.clone();
        register_global(
            name,
            Function::from_typed(name, move || {
                let names = backend.device_names()?;
                Ok::<_, tvm_ffi::Error>(names.into_iter().map(Any::from).collect::<Array>())
            }),
        );
        let name = "runtime.webgpu.supported_dtypes";
        let backend = api.clone();
        register_global(
            name,
            Function::from_typed(name, move |device: tvm_ffi::Device| {
                let names = backend.supported_dtypes(device)?;
                Ok::<_, tvm_ffi::Error>(names.into_iter().map(Any::from).collect::<Array>())
            }),
        );
        let name = "runtime.webgpu.max_storage_binding_size";
        let backend = api.clone();
        register_global(
            name,
            Function::from_typed(name, move |device: tvm_ffi::Device| {
                backend.max_storage_binding_size(device).map(|n| n as i64)
            }),
        );
        async_api::register_async_globals(&api);
        api
    });
    outcome.map(|()| Arc::clone(api))
}
