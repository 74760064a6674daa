//! The CUDA driver as the backend's [`GpuRuntime`]: the methods of [`CudaRuntime`] in
//! `memory.rs`, `stream.rs` and `api.rs`, and the driver's flat copies.

use std::ffi::c_void;

use device_kit::driver::DriverLibrary;
use device_kit::driver::runtime::GpuRuntime;
use tvm_ffi::abi::kDLCUDA;
use tvm_ffi::{Any, Device, Result};
use tvm_runtime::device::{DeviceAttr, StreamHandle};

use crate::context::{CudaRuntime, DRIVER_CANDIDATES, DRIVER_OVERRIDE_VAR};
use crate::driver::CudaDriver;

impl GpuRuntime for CudaRuntime {
    const WHAT: &'static str = "CUDA driver";
    const OVERRIDE_VAR: &'static str = DRIVER_OVERRIDE_VAR;
    const CANDIDATES: &'static [&'static str] = &DRIVER_CANDIDATES;
    const DEVICE_TYPE: i32 = kDLCUDA;
    const NAME: &'static str = "cuda";
    const HOST_NAME: &'static str = "cuda_host";

    fn load(library: DriverLibrary) -> std::result::Result<CudaRuntime, String> {
        Ok(CudaRuntime {
            driver: CudaDriver::load(library)?,
            contexts: Default::default(),
        })
    }

    fn check_device(&self, device: Device) -> Result<()> {
        CudaRuntime::check_device(self, device)
    }

    fn bind(&self, device: Device) -> Result<()> {
        CudaRuntime::bind(self, device)
    }

    fn attr(&self, device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
        CudaRuntime::attr(self, device, attr)
    }

    fn alloc_device(&self, device: Device, nbytes: usize, alignment: usize) -> Result<u64> {
        CudaRuntime::alloc_device(self, device, nbytes, alignment)
    }

    unsafe fn free_device(&self, device: Device, ptr: u64) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { CudaRuntime::free_device(self, device, ptr) }
    }

    fn alloc_host(&self, device: Device, nbytes: usize, alignment: usize) -> Result<*mut c_void> {
        CudaRuntime::alloc_host(self, device, nbytes, alignment)
    }

    unsafe fn free_host(&self, ptr: *mut c_void) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { CudaRuntime::free_host(self, ptr) }
    }

    fn create_stream(&self, device: Device) -> Result<StreamHandle> {
        CudaRuntime::create_stream(self, device)
    }

    unsafe fn destroy_stream(&self, device: Device, stream: StreamHandle) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { CudaRuntime::destroy_stream(self, device, stream) }
    }

    fn synchronize(&self, device: Device, stream: StreamHandle) -> Result<()> {
        CudaRuntime::synchronize(self, device, stream)
    }

    fn stream_wait(&self, device: Device, from: StreamHandle, to: StreamHandle) -> Result<()> {
        CudaRuntime::stream_wait(self, device, from, to)
    }

    unsafe fn copy_to_device(
        &self,
        device: Device,
        dst: u64,
        src: *const u8,
        len: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: guaranteed by the caller; the context of `device` is bound.
        let rc = unsafe { (self.driver.api.memcpy_htod_async)(dst, src.cast(), len, stream.0) };
        self.driver.check(
            rc,
            &format!("copying {len} bytes from the host to {device}"),
        )
    }

    unsafe fn copy_to_host(
        &self,
        device: Device,
        dst: *mut u8,
        src: u64,
        len: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: as above.
        let rc = unsafe { (self.driver.api.memcpy_dtoh_async)(dst.cast(), src, len, stream.0) };
        self.driver.check(
            rc,
            &format!("copying {len} bytes from {device} to the host"),
        )
    }

    unsafe fn copy_on_device(
        &self,
        device: Device,
        dst: u64,
        src: u64,
        len: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: as above.
        let rc = unsafe { (self.driver.api.memcpy_dtod_async)(dst, src, len, stream.0) };
        self.driver
            .check(rc, &format!("copying {len} bytes on {device}"))
    }
}
