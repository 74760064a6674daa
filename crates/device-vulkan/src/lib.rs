//! The Vulkan device backend of the TVM runtime, through `ash` with `libvulkan` opened at run
//! time: nothing is loaded until a Vulkan device is first used, and a missing loader or driver
//! is an error that names it (while `vulkan:N` simply does not exist).
//!
//! A buffer-handle backend of the kit (`device_kit::buffer`), with its file map:
//!
//! - [`VulkanBackend`] (`backend`): devices by index, attributes, allocation; the kit's
//!   `BufferDeviceApi` serves it to the runtime (strided copies, the one queue per device as
//!   its stream). `instance` opens the loader, `device` holds a logical device and its queue,
//!   `memory` its buffers (host-mapped where the device offers it, staged otherwise).
//! - Kernel modules of kind `vulkan` (`module`, `launch`, `spirv`, `set_cache`): SPIR-V
//!   shaders with their function metadata, loaded from the serialized form a compiled library
//!   embeds (`ffi.Module.load_from_bytes.vulkan`) or from a `.spv` file and its
//!   `.tvm_meta.json` (`ffi.Module.load_from_file.spv`). Tensors bind as storage buffers
//!   0..n-1 of set 0, scalars as 8-byte push constants, and the grid comes from the launch
//!   arguments of the shared launch convention.
//! - `error`: the kit's error with a failed Vulkan call as its failure.
//!
//! [`register`] installs the backend for `kDLVulkan` and the module loaders.

mod backend;
mod device;
mod error;
mod instance;
mod launch;
mod memory;
mod module;
mod set_cache;
mod spirv;

use device_kit::buffer::BufferDeviceApi;
use device_kit::registration::install_buffer_backend;

pub use backend::VulkanBackend;
pub use error::{VulkanCall, VulkanError};
pub use instance::VulkanOptions;
pub use launch::VulkanKernel;
pub use memory::VulkanBuffer;
pub use module::{SpirvShader, VulkanModule, load_spv_file, module_from_bytes, module_to_bytes};

// Unit tests run in a binary of their own, which links the process state.
#[cfg(test)]
use tvm_ffi_capi as _;

/// DLPack's device type of Vulkan devices.
pub const VULKAN_DEVICE_TYPE: i32 = tvm_ffi::abi::kDLVulkan;

/// The runtime's device API of Vulkan devices.
pub type VulkanDeviceApi = BufferDeviceApi<VulkanBackend>;

device_kit::backend_registration!(VulkanBackend, install, "Vulkan");

/// The kit's installation of a buffer-handle backend, with the loaders of `vulkan` modules.
fn install(backend: &std::sync::Arc<VulkanBackend>) -> tvm_ffi::Result<()> {
    install_buffer_backend::<_, VulkanKernel>(backend, module_from_bytes, load_spv_file)
}
