//! The CUDA driver as the backend's [`GpuRuntime`]: the methods of [`CudaRuntime`] in
//! `memory.rs`, `stream.rs` and `api.rs`, and the driver's flat copies.

use std::ffi::c_void;

use device_kit::driver::DriverLibrary;
use device_kit::driver::copy::FlatCopy;
use device_kit::driver::runtime::{GpuRuntime, RuntimeNames};
use tvm_ffi::abi::{kDLCUDA, kDLCUDAHost};
use tvm_ffi::{Any, Device, Result};
use tvm_runtime::device::{DeviceAttr, StreamHandle};

use crate::context::{CudaRuntime, DRIVER_CANDIDATES, DRIVER_OVERRIDE_VAR};
use crate::driver::{CUDA_SUCCESS, CudaDriver};

impl GpuRuntime for CudaRuntime {
    const NAMES: RuntimeNames = RuntimeNames {
        what: "CUDA driver",
        override_var: DRIVER_OVERRIDE_VAR,
        candidates: &DRIVER_CANDIDATES,
        device_type: kDLCUDA,
        host_device_type: kDLCUDAHost,
        name: "cuda",
        host_name: "cuda_host",
    };

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
