//! The Vulkan device backend of the TVM runtime, through `ash` with `libvulkan` opened at run
//! time: nothing is loaded until a Vulkan device is first used, and a missing loader or driver
//! is an error that names it (while `vulkan:N` simply does not exist).
//!
//! - [`VulkanDeviceApi`]: devices by index, host-mapped memory where the device offers it (a
//!   staging path otherwise), strided copies, one queue per device as its stream, attributes.
//! - Kernel modules of kind `vulkan`: SPIR-V shaders with their function metadata, loaded from
//!   the serialized form a compiled library embeds (`ffi.Module.load_from_bytes.vulkan`) or from
//!   a `.spv` file and its `.tvm_meta.json` (`ffi.Module.load_from_file.spv`). Tensors bind as
//!   storage buffers 0..n-1 of set 0, scalars as 8-byte push constants, and the grid comes from
//!   the launch arguments of the shared launch convention.
//!
//! [`register`] installs the backend for `kDLVulkan` and the module loaders.

mod api;
mod copy;
mod device;
mod error;
mod instance;
mod launch;
mod memory;
mod module;
mod set_cache;
mod spirv;

use std::sync::{Arc, OnceLock};

use tvm_ffi::{Any, Array, Function, Result};

pub use api::VulkanDeviceApi;
pub use error::VulkanError;
pub use instance::VulkanOptions;
pub use module::{SpirvShader, VulkanModule, load_spv_file, module_from_bytes, module_to_bytes};

// Unit tests run in a binary of their own, which links the process state.
#[cfg(test)]
use tvm_ffi_capi as _;

/// DLPack's device type of Vulkan devices.
pub const VULKAN_DEVICE_TYPE: i32 = tvm_ffi::abi::kDLVulkan;

static BACKEND: OnceLock<Arc<VulkanDeviceApi>> = OnceLock::new();

/// The registered backend, once [`register`] ran.
pub fn registered_backend() -> Option<Arc<VulkanDeviceApi>> {
    BACKEND.get().cloned()
}

fn register_global(name: &str, f: Function) {
    // A name taken by someone else keeps their function.
    let _ = f.register_global(name, false);
}

/// Registers the backend for `kDLVulkan` (reading [`VulkanOptions::from_env`] on first use) and
/// the `vulkan` module loaders. Loads nothing; later calls do nothing.
pub fn register() -> Result<()> {
    register_api(VulkanDeviceApi::from_env).map(|_| ())
}

/// [`register`] with explicit options; returns the registered backend (the first one, when
/// called again).
pub fn register_with(options: VulkanOptions) -> Result<Arc<VulkanDeviceApi>> {
    register_api(|| VulkanDeviceApi::new(options))
}

fn register_api(make: impl FnOnce() -> VulkanDeviceApi) -> Result<Arc<VulkanDeviceApi>> {
    let mut outcome = Ok(());
    let api = BACKEND.get_or_init(|| {
        let api = Arc::new(make());
        outcome = tvm_runtime::device::register_device_api(VULKAN_DEVICE_TYPE, api.clone());
        let (from_bytes, from_file) = (api.clone(), api.clone());
        device_kit::kernel::register_module_loaders(
            "vulkan",
            "spv",
            move |bytes| module_from_bytes(from_bytes.clone(), bytes),
            move |path| load_spv_file(from_file.clone(), path),
        );
        let name = "runtime.vulkan.device_names";
        let backend = api.clone();
        register_global(
            name,
            Function::from_typed(name, move || {
                let names = backend.device_names()?;
                Ok::<_, tvm_ffi::Error>(names.into_iter().map(Any::from).collect::<Array>())
            }),
        );
        api
    });
    outcome.map(|()| Arc::clone(api))
}
