//! Device attributes every driver-API backend reads the same way: one vendor attribute number
//! each, read with the vendor's `...DeviceGetAttribute`.

use tvm_ffi::{Any, Result};
use tvm_runtime::device::DeviceAttr;

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
}

impl VendorAttributeIds {
    /// The answer to `attr` when it is one of these, read through `read` (the vendor number to
    /// its value on the device); `None` for an attribute the backend answers itself.
    pub fn answer(
        &self,
        attr: DeviceAttr,
        read: impl Fn(i32) -> Result<i32>,
    ) -> Option<Result<Option<Any>>> {
        let id = match attr {
            DeviceAttr::MaxThreadsPerBlock => self.max_threads_per_block,
            DeviceAttr::WarpSize => self.warp_size,
            DeviceAttr::MaxSharedMemoryPerBlock => self.max_shared_memory_per_block,
            DeviceAttr::MaxClockRate => self.clock_rate,
            DeviceAttr::MultiProcessorCount => self.multiprocessor_count,
            DeviceAttr::MaxRegistersPerBlock => self.max_registers_per_block,
            DeviceAttr::L2CacheSizeBytes => self.l2_cache_size,
            DeviceAttr::MaxThreadDimensions => {
                let [x, y, z] = self.max_block_dims;
                let dims = (|| Ok(format!("[{}, {}, {}]", read(x)?, read(y)?, read(z)?)))();
                return Some(dims.map(|dims| Some(Any::from(dims))));
            }
            _ => return None,
        };
        Some(read(id).map(|value| Some(Any::from(i64::from(value)))))
    }
}
