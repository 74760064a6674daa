//! The device API of `cuda` (device memory) and `cuda_host` (pinned host memory) devices.

use std::ffi::c_char;

use device_kit::driver::device_api::{GpuDeviceApi, GpuHostDeviceApi};
use tvm_ffi::{Any, Device, Result};
use tvm_runtime::device::DeviceAttr;

use crate::context::{CudaBackend, CudaRuntime};
use crate::driver::version_text;

/// `CUdevice_attribute` numbers the attributes are read with.
mod attribute {
    use device_kit::driver::attributes::VendorAttributeIds;

    pub const COMPUTE_CAPABILITY_MAJOR: i32 = 75;
    pub const COMPUTE_CAPABILITY_MINOR: i32 = 76;
    pub const COMMON: VendorAttributeIds = VendorAttributeIds {
        max_threads_per_block: 1,
        max_block_dims: [2, 3, 4],
        max_shared_memory_per_block: 8,
        warp_size: 10,
        max_registers_per_block: 12,
        clock_rate: 13,
        multiprocessor_count: 16,
        l2_cache_size: 38,
    };
}

impl CudaRuntime {
    /// `cuDeviceGetAttribute`.
    pub fn device_attribute(&self, device: Device, attribute: i32) -> Result<i32> {
        self.check_device(device)?;
        let mut value = 0;
        // SAFETY: an out-parameter; the index was checked.
        let rc = unsafe {
            (self.driver.api.device_get_attribute)(&mut value, attribute, device.device_id())
        };
        self.driver
            .check(rc, &format!("reading attribute {attribute} of {device}"))?;
        Ok(value)
    }

    /// The device's name.
    pub fn device_name(&self, device: Device) -> Result<String> {
        self.check_device(device)?;
        let mut name = [0 as c_char; 256];
        // SAFETY: a buffer of the length given; the index was checked.
        let rc = unsafe {
            (self.driver.api.device_get_name)(name.as_mut_ptr(), 256, device.device_id())
        };
        self.driver
            .check(rc, &format!("reading the name of {device}"))?;
        name[255] = 0;
        // SAFETY: NUL-terminated (the last byte is forced to NUL).
        Ok(unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned())
    }

    /// Total bytes of memory of `device`.
    pub fn total_memory(&self, device: Device) -> Result<usize> {
        self.check_device(device)?;
        let mut bytes = 0;
        // SAFETY: an out-parameter; the index was checked.
        let rc = unsafe { (self.driver.api.device_total_mem)(&mut bytes, device.device_id()) };
        self.driver
            .check(rc, &format!("reading the memory size of {device}"))?;
        Ok(bytes)
    }

    /// An attribute of `device` (which exists), as the device API reports it.
    pub fn attr(&self, device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
        if let Some(answer) = attribute::COMMON.answer(attr, |a| self.device_attribute(device, a)) {
            return answer;
        }
        match attr {
            DeviceAttr::Exist => Ok(Some(Any::from(i64::from(
                self.check_device(device).is_ok(),
            )))),
            DeviceAttr::ComputeVersion => {
                let major = self.device_attribute(device, attribute::COMPUTE_CAPABILITY_MAJOR)?;
                let minor = self.device_attribute(device, attribute::COMPUTE_CAPABILITY_MINOR)?;
                Ok(Some(Any::from(format!("{major}.{minor}"))))
            }
            DeviceAttr::DeviceName => Ok(Some(Any::from(self.device_name(device)?))),
            DeviceAttr::ApiVersion => Ok(Some(Any::from(i64::from(self.driver.version)))),
            DeviceAttr::DriverVersion => Ok(Some(Any::from(version_text(self.driver.version)))),
            DeviceAttr::TotalGlobalMemory => Ok(Some(Any::from(self.total_memory(device)? as i64))),
            DeviceAttr::AvailableGlobalMemory => {
                Ok(Some(Any::from(self.memory_info(device)?.0 as i64)))
            }
            _ => Ok(None),
        }
    }
}

/// The `cuda` devices: memory from `cuMemAlloc`, copies and streams of the driver.
pub type CudaDeviceApi = GpuDeviceApi<CudaBackend>;

/// The `cuda_host` devices: page-locked host memory (`cuMemAllocHost`); index `i` allocates
/// through the context of `cuda:i`.
pub type CudaHostDeviceApi = GpuHostDeviceApi<CudaBackend>;
