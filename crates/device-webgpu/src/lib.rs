//! The WebGPU device backend of the TVM runtime, through `wgpu` (Vulkan underneath on Linux,
//! Metal on macOS, DX12 or Vulkan on Windows): nothing is loaded until a WebGPU device is first
//! used, and a missing driver is an error that says so (while `webgpu:N` simply does not exist).
//!
//! A buffer-handle backend of the kit (`device_kit::buffer`), with its file map:
//!
//! - [`WebGpuBackend`] (`backend`): adapters by index, attributes from the adapter's limits,
//!   allocation; the kit's `BufferDeviceApi` serves it to the runtime (strided copies, one
//!   queue per device as its stream). `instance` lists the adapters, `device` holds a device
//!   and its queue, `memory` its buffers (one storage buffer per allocation, sizes padded to 4
//!   bytes; unaligned ends through the host).
//! - Kernel modules of kind `webgpu` (`module`, `launch`, `wgsl`): WGSL shaders with their
//!   function metadata, from the serialized form a compiled library embeds
//!   (`ffi.Module.load_from_bytes.webgpu`) or from a `.wgsl` file and its `.tvm_meta.json`
//!   (`ffi.Module.load_from_file.wgsl`). Tensors bind as storage buffers 0..n-1 of group 0,
//!   scalars in one uniform params block at binding n (see the `launch` module docs), and the
//!   grid comes from the launch arguments.
//! - Asynchronous at heart (`async_api`, `completion`): synchronization and readback are
//!   futures completed by a poller thread per device ([`sync_async`], [`copy_to_host_async`]),
//!   served as global functions for the RPC server's asynchronous mode and for Python's
//!   asyncio.
//! - `error`: the kit's error with wgpu's message as its failure.
//! - `wayland_log`: libwayland's client log silenced, so that a headless process prints no
//!   `XDG_RUNTIME_DIR` complaint when wgpu creates its Vulkan instance.
//!
//! [`register`] installs the backend for `kDLWebGPU` and its global functions.

mod async_api;
mod backend;
mod completion;
mod device;
mod error;
mod instance;
mod launch;
mod memory;
mod module;
#[cfg(all(unix, not(target_vendor = "apple")))]
mod wayland_log;
mod wgsl;

use std::sync::Arc;

use device_kit::buffer::BufferDeviceApi;
use device_kit::registration::{install_buffer_backend, register_global};
use tvm_ffi::{Any, Array, Function, Result};

pub use async_api::{copy_to_host_async, sync_async};
pub use backend::WebGpuBackend;
pub use error::{WebGpuError, WgpuFailure};
pub use launch::WebGpuKernel;
pub use memory::WebGpuBuffer;
pub use module::{WebGpuModule, load_wgsl_file, module_from_bytes, module_to_bytes};

// Unit tests run in a binary of their own, which links the process state.
#[cfg(test)]
use tvm_ffi_capi as _;

/// DLPack's device type of WebGPU devices.
pub const WEBGPU_DEVICE_TYPE: i32 = tvm_ffi::abi::kDLWebGPU;

/// The runtime's device API of WebGPU devices.
pub type WebGpuDeviceApi = BufferDeviceApi<WebGpuBackend>;

device_kit::backend_registration!(WebGpuBackend, install, "WebGPU");

/// The kit's installation of a buffer-handle backend, and WebGPU's own global functions.
fn install(backend: &Arc<WebGpuBackend>) -> Result<()> {
    let outcome =
        install_buffer_backend::<_, WebGpuKernel>(backend, module_from_bytes, load_wgsl_file);
    let name = "runtime.webgpu.supported_dtypes";
    let listed = Arc::clone(backend);
    register_global(
        name,
        Function::from_typed(name, move |device: tvm_ffi::Device| {
            let names = listed.supported_dtypes(device)?;
            Ok::<_, tvm_ffi::Error>(names.into_iter().map(Any::from).collect::<Array>())
        }),
    );
    let name = "runtime.webgpu.max_storage_binding_size";
    let limited = Arc::clone(backend);
    register_global(
        name,
        Function::from_typed(name, move |device: tvm_ffi::Device| {
            limited.max_storage_binding_size(device).map(|n| n as i64)
        }),
    );
    async_api::register_async_globals(backend);
    outcome
}
