//! The device API of `cuda` (device memory) and `cuda_host` (pinned host memory) devices.

use device_kit::driver::device_api::{GpuDeviceApi, GpuHostDeviceApi};
use tvm_ffi::{Any, Device, Result};
use tvm_runtime::device::DeviceAttr;

use crate::context::{CudaBackend, CudaRuntime};
use crate::driver::version_text;

/// `CUdevice_attribute` numbers the attributes are read with.
mod attribute {
    use device_kit::driver::attributes::VendorAttributeIds;

    pub const COMMON: VendorAttributeIds = VendorAttributeIds {
        max_threads_per_block: 1,
        max_block_dims: [2, 3, 4],
        max_shared_memory_per_block: 8,
        warp_size: 10,
        max_registers_per_block: 12,
        clock_rate: 13,
        multiprocessor_count: 16,
        l2_cache_size: 38,
        compute_capability: [75, 76],
    };
}

impl CudaRuntime {
    /// An attribute of `device` (which exists), as the device API reports it.
    pub fn attr(&self, device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
        if let Some(answer) = attribute::COMMON.answer(self, device, attr) {
            return answer;
        }
        Ok(match attr {
            DeviceAttr::ApiVersion => Some(Any::from(i64::from(self.driver.version))),
            DeviceAttr::DriverVersion => Some(Any::from(version_text(self.driver.version))),
            _ => None,
        })
    }
}

/// The `cuda` devices: memory from `cuMemAlloc`, copies and streams of the driver.
pub type CudaDeviceApi = GpuDeviceApi<CudaBackend>;

/// The `cuda_host` devices: page-locked host memory (`cuMemAllocHost`); index `i` allocates
/// through the context of `cuda:i`.
pub type CudaHostDeviceApi = GpuHostDeviceApi<CudaBackend>;
