//! Device attributes every driver-API backend reads the same way: one vendor attribute number
//! each, read with the vendor's `...DeviceGetAttribute`, and the name, memory and existence of
//! a device.

use tvm_ffi::{Any, Device, Result};
use tvm_runtime::device::DeviceAttr;

use crate::driver::runtime::GpuRuntime;
use crate::driver::shared_ops::SharedOps;

/// The vendor's numbers of the attributes read one integer each (CUDA's `CUdevice_attribute`
/// and HIP's `hipDeviceAttribute_t` number them differently).
#[derive(Clone, Copy, Debug)]
pub struct VendorAttributeIds {
    /// Most threads per block.
    pub max_threads_per_block: i32,
    /// Largest block extent in x, y and z.
    pub max_block_dims: [i32; 3],
    /// Shared memory per block, in bytes.
    pub max_shared_memory_per_block: i32,
    /// Threads per warp (wavefront).
    pub warp_size: i32,
    /// Registers per block.
    pub max_registers_per_block: i32,
    /// Clock rate, in kHz.
    pub clock_rate: i32,
    /// Multiprocessors (compute units).
    pub multiprocessor_count: i32,
    /// L2 cache, in bytes.
    pub l2_cache_size: i32,
    /// Compute capability, major and minor.
    pub compute_capability: [i32; 2],
}

impl VendorAttributeIds {
    /// The answer to `attr` of `device` (which exists) when every backend reads it alike;
    /// `None` for an attribute the backend answers itself (versions, architecture).
    pub fn answer<R: GpuRuntime>(
        &self,
        runtime: &R,
        device: Device,
        attr: DeviceAttr,
    ) -> Option<Result<Option<Any>>> {
        let read = |id| runtime.device_attribute(device, id);
        let value = match attr {
            DeviceAttr::Exist => Ok(Any::from(i64::from(runtime.check_device(device).is_ok()))),
            DeviceAttr::MaxThreadsPerBlock => read(self.max_threads_per_block).map(Any::from),
            DeviceAttr::WarpSize => read(self.warp_size).map(Any::from),
            DeviceAttr::MaxSharedMemoryPerBlock => {
                read(self.max_shared_memory_per_block).map(Any::from)
            }
            DeviceAttr::MaxClockRate => read(self.clock_rate).map(Any::from),
            DeviceAttr::MultiProcessorCount => read(self.multiprocessor_count).map(Any::from),
            DeviceAttr::MaxRegistersPerBlock => read(self.max_registers_per_block).map(Any::from),
            DeviceAttr::L2CacheSizeBytes => read(self.l2_cache_size).map(Any::from),
            DeviceAttr::MaxThreadDimensions => {
                let [x, y, z] = self.max_block_dims;
                (|| Ok(format!("[{}, {}, {}]", read(x)?, read(y)?, read(z)?)))().map(Any::from)
            }
            DeviceAttr::ComputeVersion => {
                let [major, minor] = self.compute_capability;
                (|| Ok(format!("{}.{}", read(major)?, read(minor)?)))().map(Any::from)
            }
            DeviceAttr::DeviceName => runtime.device_name(device).map(Any::from),
            DeviceAttr::TotalGlobalMemory => runtime
                .total_memory(device)
                .map(|bytes| Any::from(bytes as i64)),
            DeviceAttr::AvailableGlobalMemory => runtime
                .memory_info(device)
                .map(|(free, _)| Any::from(free as i64)),
            _ => return None,
        };
        Some(value.map(Some))
    }
}
