//! Device attributes: numbers through `hipDeviceGetAttribute` (HIP's own attribute numbering,
//! from ROCm 5.0), the name, the memory, and the `gfx...` architecture from the device
//! properties.

use device_kit::driver::attributes::VendorAttributeIds;
use device_kit::driver::runtime::{GpuRuntime, VendorErrors};
use device_kit::driver::shared_ops::c_string;
use tvm_ffi::{Any, Device, Result};
use tvm_runtime::device::DeviceAttr;

use crate::hip::version_text;
use crate::runtime::HipRuntime;

/// `hipDeviceAttribute_t` numbers of the attributes every backend reads alike.
const COMMON: VendorAttributeIds = VendorAttributeIds {
    max_threads_per_block: 56,
    max_block_dims: [26, 27, 28],
    max_shared_memory_per_block: 74,
    warp_size: 87,
    max_registers_per_block: 71,
    clock_rate: 5,
    multiprocessor_count: 63,
    l2_cache_size: 19,
    // `hipDeviceAttributeComputeCapabilityMajor` and `...Minor`.
    compute_capability: [23, 61],
};

/// Where `gcnArchName` (`char[256]`) lies in the properties struct: `hipDeviceProp_tR0600`
/// (ROCm 6) and the older layout the unversioned `hipGetDeviceProperties` fills.
const GCN_ARCH_NAME_OFFSET_R0600: usize = 1160;
const GCN_ARCH_NAME_OFFSET_R0000: usize = 396;
/// Room for either properties struct (R0600 is about 1.5 KiB).
const PROPERTIES_BYTES: usize = 4096;
const ARCH_NAME_BYTES: usize = 256;

impl HipRuntime {
    /// The GPU architecture with its feature flags ("gfx90a:sramecc+:xnack-"), from
    /// `hipGetDevicePropertiesR0600` where HIP has it, else the legacy properties call.
    pub fn gcn_arch_name(&self, device: Device) -> Result<Option<String>> {
        self.check_device(device)?;
        let api = &self.hip.api;
        let (get, offset) = match (api.get_device_properties_r0600, api.get_device_properties) {
            (Some(get), _) => (get, GCN_ARCH_NAME_OFFSET_R0600),
            (None, Some(get)) => (get, GCN_ARCH_NAME_OFFSET_R0000),
            (None, None) => return Ok(None),
        };
        let mut properties = vec![0u8; PROPERTIES_BYTES];
        // SAFETY: a buffer larger than either properties struct; the index was checked.
        let rc = unsafe { get(properties.as_mut_ptr(), device.device_id()) };
        let what = format!("reading the properties of {device}");
        self.hip.check(rc, &what)?;
        Ok(Some(c_string(
            &properties[offset..offset + ARCH_NAME_BYTES],
        )))
    }

    /// An attribute of `device`, as the device API reports it. `GcnArch` is the architecture
    /// without its feature flags ("gfx90a"), what `-mcpu` takes.
    pub fn attr(&self, device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
        if let Some(answer) = COMMON.answer(self, device, attr) {
            return answer;
        }
        let hip = &self.hip;
        Ok(match attr {
            DeviceAttr::GcnArch => self
                .gcn_arch_name(device)?
                .map(|name| Any::from(name.split(':').next().unwrap_or_default().to_owned())),
            DeviceAttr::ApiVersion => Some(Any::from(i64::from(hip.runtime_version))),
            DeviceAttr::DriverVersion => Some(Any::from(version_text(hip.driver_version))),
            _ => None,
        })
    }
}
