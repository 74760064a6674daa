//! Device memory (`cuMemAlloc`) and pinned host memory (`cuMemAllocHost`).

use std::ffi::c_void;

use device_kit::driver::runtime::VendorErrors;
use tvm_ffi::{Device, Result};

use crate::context::CudaRuntime;
use crate::driver::CuDevicePtr;

/// The alignment of every driver allocation.
pub const DRIVER_ALIGNMENT: usize = 256;

fn check_alignment(alignment: usize) -> Result<()> {
    device_kit::driver::runtime::check_alignment("CUDA", DRIVER_ALIGNMENT, alignment)
}

impl CudaRuntime {
    /// `nbytes` of memory on `device` (at least one byte).
    pub fn alloc_device(&self, device: Device, nbytes: usize, alignment: usize) -> Result<u64> {
        check_alignment(alignment)?;
        self.bind(device)?;
        let mut ptr: CuDevicePtr = 0;
        // SAFETY: an out-parameter; the context of `device` is current.
        let rc = unsafe { (self.driver.api.mem_alloc)(&mut ptr, nbytes.max(1)) };
        self.driver
            .check(rc, &format!("allocating {nbytes} bytes on {device}"))?;
        Ok(ptr)
    }

    /// Frees memory from [`CudaRuntime::alloc_device`].
    ///
    /// # Safety
    /// `ptr` came from `alloc_device` on `device` and is freed once.
    pub unsafe fn free_device(&self, device: Device, ptr: u64) -> Result<()> {
        self.bind(device)?;
        // SAFETY: guaranteed by the caller.
        let rc = unsafe { (self.driver.api.mem_free)(ptr) };
        self.driver
            .check(rc, &format!("freeing {ptr:#x} on {device}"))
    }

    /// `nbytes` of page-locked host memory, through the context of `device`.
    pub fn alloc_host(
        &self,
        device: Device,
        nbytes: usize,
        alignment: usize,
    ) -> Result<*mut c_void> {
        check_alignment(alignment)?;
        self.bind(device)?;
        let mut ptr = std::ptr::null_mut();
        // SAFETY: an out-parameter; a context is current.
        let rc = unsafe { (self.driver.api.mem_alloc_host)(&mut ptr, nbytes.max(1)) };
        self.driver.check(
            rc,
            &format!("allocating {nbytes} bytes of pinned host memory"),
        )?;
        Ok(ptr)
    }

    /// Frees memory from [`CudaRuntime::alloc_host`].
    ///
    /// # Safety
    /// `ptr` came from `alloc_host` and is freed once.
    pub unsafe fn free_host(&self, ptr: *mut c_void) -> Result<()> {
        // SAFETY: guaranteed by the caller.
        let rc = unsafe { (self.driver.api.mem_free_host)(ptr) };
        self.driver
            .check(rc, &format!("freeing pinned host memory {ptr:p}"))
    }
}
