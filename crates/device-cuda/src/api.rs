//! The device API of `cuda` (device memory) and `cuda_host` (pinned host memory) devices.

use std::ffi::c_char;

use device_common::device_api::{GpuDeviceApi, GpuHostDeviceApi};
use tvm_ffi::{Any, Device, Result};
use tvm_runtime::device::DeviceAttr;

use crate::context::{CudaBackend, CudaRuntime};
use crate::driver::version_text;

/// `CUdevice_attribute` numbers the attributes are read with.
mod attribute {
    pub const MAX_THREADS_PER_BLOCK: i32 = 1;
    pub const MAX_BLOCK_DIM_X: i32 = 2;
    pub const MAX_BLOCK_DIM_Y: i32 = 3;
    pub const MAX_BLOCK_DIM_Z: i32 = 4;
    pub const MAX_SHARED_MEMORY_PER_BLOCK: i32 = 8;
    pub const WARP_SIZE: i32 = 10;
    pub const MAX_REGISTERS_PER_BLOCK: i32 = 12;
    pub const CLOCK_RATE: i32 = 13;
    pub const MULTIPROCESSOR_COUNT: i32 = 16;
    pub const L2_CACHE_SIZE: i32 = 38;
    pub const COMPUTE_CAPABILITY_MAJOR: i32 = 75;
    pub const COMPUTE_CAPABILITY_MINOR: i32 = 76;
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
        let int = |a| -> Result<Option<Any>> {
            Ok(Some(Any::from(i64::from(
                self.device_attribute(device, a)?,
            ))))
        };
        match attr {
            DeviceAttr::Exist => Ok(Some(Any::from(i64::from(
                self.check_device(device).is_ok(),
            )))),
            DeviceAttr::MaxThreadsPerBlock => int(attribute::MAX_THREADS_PER_BLOCK),
            DeviceAttr::WarpSize => int(attribute::WARP_SIZE),
            DeviceAttr::MaxSharedMemoryPerBlock => int(attribute::MAX_SHARED_MEMORY_PER_BLOCK),
            DeviceAttr::MaxClockRate => int(attribute::CLOCK_RATE),
            DeviceAttr::MultiProcessorCount => int(attribute::MULTIPROCESSOR_COUNT),
            DeviceAttr::MaxRegistersPerBlock => int(attribute::MAX_REGISTERS_PER_BLOCK),
            DeviceAttr::L2CacheSizeBytes => int(attribute::L2_CACHE_SIZE),
            DeviceAttr::ComputeVersion => {
                let major = self.device_attribute(device, attribute::COMPUTE_CAPABILITY_MAJOR)?;
                let minor = self.device_attribute(device, attribute::COMPUTE_CAPABILITY_MINOR)?;
                Ok(Some(Any::from(format!("{major}.{minor}"))))
            }
            DeviceAttr::MaxThreadDimensions => {
                let dims = [
                    attribute::MAX_BLOCK_DIM_X,
                    attribute::MAX_BLOCK_DIM_Y,
                    attribute::MAX_BLOCK_DIM_Z,
                ]
                .map(|a| self.device_attribute(device, a));
                let [x, y, z] = dims;
                Ok(Some(Any::from(format!("[{}, {}, {}]", x?, y?, z?))))
            }
            DeviceAttr::DeviceName => Ok(Some(Any::from(self.device_name(device)?))),
            DeviceAttr::ApiVersion => Ok(Some(Any::from(i64::from(self.driver.version)))),
            DeviceAttr::DriverVersion => Ok(Some(Any::from(version_text(self.driver.version)))),
            DeviceAttr::TotalGlobalMemory => Ok(Some(Any::from(self.total_memory(device)? as i64))),
            DeviceAttr::AvailableGlobalMemory => {
                Ok(Some(Any::from(self.memory_info(device)?.0 as i64)))
            }
            DeviceAttr::GcnArch | DeviceAttr::ImagePitchAlignment => Ok(None),
        }
    }
}

/// The `cuda` devices: memory from `cuMemAlloc`, copies and streams of the driver.
pub type CudaDeviceApi = GpuDeviceApi<CudaBackend>;

/// The `cuda_host` devices: page-locked host memory (`cuMemAllocHost`); index `i` allocates
/// through the context of `cuda:i`.
pub type CudaHostDeviceApi = GpuHostDeviceApi<CudaBackend>;
