//! Device attributes: numbers through `hipDeviceGetAttribute` (HIP's own attribute numbering,
//! from ROCm 5.0), the name, the memory, and the `gfx...` architecture from the device
//! properties.

use std::ffi::{CStr, c_char};

use device_kit::driver::attributes::VendorAttributeIds;
use device_kit::driver::runtime::GpuRuntime;
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
};
/// `hipDeviceAttributeComputeCapabilityMajor` and `...Minor`.
const COMPUTE_CAPABILITY_MAJOR: i32 = 23;
const COMPUTE_CAPABILITY_MINOR: i32 = 61;

/// Where `gcnArchName` (`char[256]`) lies in the properties struct: `hipDeviceProp_tR0600`
/// (ROCm 6) and the older layout the unversioned `hipGetDeviceProperties` fills.
const GCN_ARCH_NAME_OFFSET_R0600: usize = 1160;
const GCN_ARCH_NAME_OFFSET_R0000: usize = 396;
/// Room for either properties struct (R0600 is about 1.5 KiB).
const PROPERTIES_BYTES: usize = 4096;
const NAME_BYTES: usize = 256;

/// The string in `bytes` up to its first NUL (or all of it).
fn c_string(bytes: &[u8]) -> String {
    CStr::from_bytes_until_nul(bytes)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| String::from_utf8_lossy(bytes).into_owned())
}

impl HipRuntime {
    /// `hipDeviceGetAttribute` of an existing device.
    pub fn device_attribute(&self, device: Device, attribute: i32) -> Result<i32> {
        self.check_device(device)?;
        let mut value = 0;
        // SAFETY: an out-parameter; the index was checked.
        let rc = unsafe {
            (self.hip.api.device_get_attribute)(&mut value, attribute, device.device_id())
        };
        let what = format!("reading attribute {attribute} of {device}");
        self.hip.check(rc, &what).map(|()| value)
    }

    /// The device's marketing name (`hipDeviceGetName`).
    pub fn device_name(&self, device: Device) -> Result<String> {
        self.check_device(device)?;
        let mut name = [0u8; NAME_BYTES];
        // SAFETY: a buffer of the length given; the index was checked.
        let rc = unsafe {
            (self.hip.api.device_get_name)(
                name.as_mut_ptr().cast::<c_char>(),
                NAME_BYTES as i32,
                device.device_id(),
            )
        };
        let what = format!("reading the name of {device}");
        self.hip.check(rc, &what).map(|()| c_string(&name))
    }

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
        Ok(Some(c_string(&properties[offset..offset + NAME_BYTES])))
    }

    /// Total bytes of memory of `device` (`hipDeviceTotalMem`).
    pub fn total_memory(&self, device: Device) -> Result<usize> {
        self.check_device(device)?;
        let mut bytes = 0;
        // SAFETY: an out-parameter; the index was checked.
        let rc = unsafe { (self.hip.api.device_total_mem)(&mut bytes, device.device_id()) };
        let what = format!("reading the memory size of {device}");
        self.hip.check(rc, &what).map(|()| bytes)
    }
}

/// An attribute of `device`, as the device API reports it. `GcnArch` is the architecture
/// without its feature flags ("gfx90a"), what `-mcpu` takes.
pub fn read(runtime: &HipRuntime, device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
    if let Some(answer) = COMMON.answer(attr, |id| runtime.device_attribute(device, id)) {
        return answer;
    }
    let hip = &runtime.hip;
    let value = match attr {
        DeviceAttr::Exist => Any::from(i64::from(runtime.check_device(device).is_ok())),
        DeviceAttr::ComputeVersion => {
            let major = runtime.device_attribute(device, COMPUTE_CAPABILITY_MAJOR)?;
            let minor = runtime.device_attribute(device, COMPUTE_CAPABILITY_MINOR)?;
            Any::from(format!("{major}.{minor}"))
        }
        DeviceAttr::GcnArch => match runtime.gcn_arch_name(device)? {
            Some(name) => Any::from(name.split(':').next().unwrap_or_default().to_owned()),
            None => return Ok(None),
        },
        DeviceAttr::DeviceName => Any::from(runtime.device_name(device)?),
        DeviceAttr::ApiVersion => Any::from(i64::from(hip.runtime_version)),
        DeviceAttr::DriverVersion => Any::from(version_text(hip.driver_version)),
        DeviceAttr::TotalGlobalMemory => Any::from(runtime.total_memory(device)? as i64),
        DeviceAttr::AvailableGlobalMemory => Any::from(runtime.memory_info(device)?.0 as i64),
        _ => return Ok(None),
    };
    Ok(Some(value))
}
