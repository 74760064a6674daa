//! The driver's flat copies, for the copy planner of `device_common::copy`.

use std::ffi::c_void;

use device_common::copy::RawCopies;
use tvm_ffi::{Device, Result};
use tvm_runtime::device::StreamHandle;

use crate::context::CudaRuntime;

/// Copies queued through the context of one device.
pub struct DeviceCopies<'a> {
    /// The driver.
    pub runtime: &'a CudaRuntime,
    /// The device whose context queues the copies.
    pub device: Device,
}

impl RawCopies for DeviceCopies<'_> {
    unsafe fn host_to_device(
        &self,
        dst: u64,
        src: *const u8,
        len: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        let driver = &self.runtime.driver;
        // SAFETY: guaranteed by the caller; the context was bound by the backend.
        let rc =
            unsafe { (driver.api.memcpy_htod_async)(dst, src.cast::<c_void>(), len, stream.0) };
        driver.check(
            rc,
            &format!("copying {len} bytes from the host to {}", self.device),
        )
    }

    unsafe fn device_to_host(
        &self,
        dst: *mut u8,
        src: u64,
        len: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        let driver = &self.runtime.driver;
        // SAFETY: as above.
        let rc = unsafe { (driver.api.memcpy_dtoh_async)(dst.cast(), src, len, stream.0) };
        driver.check(
            rc,
            &format!("copying {len} bytes from {} to the host", self.device),
        )
    }

    unsafe fn device_to_device(
        &self,
        dst: u64,
        src: u64,
        len: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        let driver = &self.runtime.driver;
        // SAFETY: as above.
        let rc = unsafe { (driver.api.memcpy_dtod_async)(dst, src, len, stream.0) };
        driver.check(rc, &format!("copying {len} bytes on {}", self.device))
    }

    fn synchronize(&self, stream: StreamHandle) -> Result<()> {
        self.runtime.synchronize(self.device, stream)
    }
}
