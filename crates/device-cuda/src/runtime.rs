//! The CUDA driver as the backend's [`GpuRuntime`]: the methods of [`CudaRuntime`] in
//! `memory.rs` and `api.rs`, and the driver's flat copies.

use std::ffi::c_void;

use device_kit::driver::DriverLibrary;
use device_kit::driver::copy::FlatCopy;
use device_kit::driver::runtime::{GpuRuntime, RuntimeNames, VendorErrors};
use device_kit::driver::shared_calls::SharedCalls;
use tvm_ffi::{Any, Device, Result};
use tvm_runtime::device::{DeviceAttr, StreamHandle};

use crate::context::CudaRuntime;
use crate::driver::{CUDA_SUCCESS, CudaDriver, RUNTIME_NAMES};

impl GpuRuntime for CudaRuntime {
    const NAMES: RuntimeNames = RUNTIME_NAMES;

    fn load(library: DriverLibrary) -> std::result::Result<CudaRuntime, String> {
        Ok(CudaRuntime {
            driver: CudaDriver::load(library)?,
            contexts: Default::default(),
        })
    }

    fn calls(&self) -> &SharedCalls {
        &self.driver.calls
    }

    fn check(&self, rc: i32, what: &str) -> Result<()> {
        self.driver.check(rc, what)
    }

    fn check_device(&self, device: Device) -> Result<()> {
        CudaRuntime::check_device(self, device)
    }

    fn bind(&self, device: Device) -> Result<()> {
        CudaRuntime::bind(self, device)
    }

    #[inline]
    fn launch_device(&self, tensors_on: Option<Device>) -> Result<Device> {
        CudaRuntime::launch_device(self, tensors_on)
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

    unsafe fn copy(&self, device: Device, copy: FlatCopy, stream: StreamHandle) -> Result<()> {
        let api = &self.driver.api;
        let stream = stream.0;
        // SAFETY: guaranteed by the caller; the context of `device` is bound.
        let rc = unsafe {
            match copy {
                FlatCopy::HostToDevice { dst, src, len } => {
                    (api.memcpy_htod_async)(dst, src.cast(), len, stream)
                }
                FlatCopy::DeviceToHost { dst, src, len } => {
                    (api.memcpy_dtoh_async)(dst.cast(), src, len, stream)
                }
                FlatCopy::DeviceToDevice { dst, src, len } => {
                    (api.memcpy_dtod_async)(dst, src, len, stream)
                }
            }
        };
        if rc == CUDA_SUCCESS {
            return Ok(());
        }
        self.driver.check(rc, &copy.describe(device))
    }
}
