//! The wgpu instance and the adapters it finds, listed once on first use. Device indices are
//! positions in that list.

use std::panic::{AssertUnwindSafe, catch_unwind};

use tvm_runtime::async_functions::block_on;

use crate::error::{WebGpuError, WgResult};

/// The backends this build of wgpu can use, for messages.
#[cfg(target_vendor = "apple")]
const BACKENDS_TEXT: &str = "metal";
#[cfg(windows)]
const BACKENDS_TEXT: &str = "dx12, vulkan";
#[cfg(not(any(target_vendor = "apple", windows)))]
const BACKENDS_TEXT: &str = "vulkan";

/// The instance and its adapters, by index.
pub(crate) struct Instance {
    /// Kept alive for the adapters and devices made from it.
    _raw: wgpu::Instance,
    /// The adapters found, in wgpu's order.
    pub(crate) adapters: Vec<wgpu::Adapter>,
    /// Their descriptions.
    pub(crate) infos: Vec<wgpu::AdapterInfo>,
}

impl Instance {
    /// Creates the instance (honoring wgpu's `WGPU_BACKEND` and related variables) and lists its
    /// adapters; no adapter at all is an `Unavailable` error that says why when wgpu knows.
    pub(crate) fn load() -> WgResult<Instance> {
        #[cfg(all(unix, not(target_vendor = "apple")))]
        crate::wayland_log::silence();
        let made = catch_unwind(AssertUnwindSafe(|| {
            let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
            descriptor.backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::PRIMARY);
            let raw = wgpu::Instance::new(descriptor);
            let adapters = block_on(raw.enumerate_adapters(wgpu::Backends::all()));
            (raw, adapters)
        }));
        let (raw, adapters) = made.map_err(|panic| {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "a panic".to_owned());
            WebGpuError::unavailable(format!("wgpu failed to start: {why}"))
        })?;
        if adapters.is_empty() {
            let why = block_on(raw.request_adapter(&wgpu::RequestAdapterOptions::default()))
                .err()
                .map(|e| format!(": {e}"))
                .unwrap_or_default();
            return Err(WebGpuError::unavailable(format!(
                "no WebGPU adapter found (wgpu backends: {BACKENDS_TEXT}){why}; on Linux install \
                 a Vulkan driver (Debian: mesa-vulkan-drivers libvulkan1)"
            )));
        }
        let infos = adapters.iter().map(wgpu::Adapter::get_info).collect();
        Ok(Instance {
            _raw: raw,
            adapters,
            infos,
        })
    }
}
