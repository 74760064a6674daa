//! The loaded driver with a primary context per device, opened on first use.

use device_kit::driver::PerDevice;
use device_kit::driver::runtime::{VendorErrors, check_device_index};
use tvm_ffi::abi::kDLCUDA;
use tvm_ffi::{Device, Result};

use crate::driver::{CUDA_SUCCESS, CuContext, CudaDriver};

/// The driver and the primary contexts retained so far.
#[derive(Debug)]
pub struct CudaRuntime {
    /// The driver.
    pub driver: CudaDriver,
    /// Primary contexts by device index (the `CUcontext` as an address).
    pub(crate) contexts: PerDevice<usize>,
}

impl CudaRuntime {
    /// Checks that `device` is one of the driver's.
    #[inline]
    pub fn check_device(&self, device: Device) -> Result<()> {
        check_device_index(
            "CUDA driver",
            device,
            self.driver.device_count,
            self.driver.no_device_reason.as_deref(),
        )
    }

    /// The primary context of `device` (a checked index), retained the first time.
    #[inline]
    fn primary_context(&self, device: Device) -> Result<CuContext> {
        let id = device.device_id();
        // Read first on its own (every launch comes here): the closure below is then only built
        // the first time.
        if let Some(context) = self.contexts.get(id) {
            return Ok(context as CuContext);
        }
        let context = self.contexts.get_or_try_init(id, || {
            let mut context: CuContext = std::ptr::null_mut();
            // SAFETY: an out-parameter; the index was checked against the device count.
            let rc = unsafe { (self.driver.api.primary_ctx_retain)(&mut context, id) };
            self.driver
                .check(rc, &format!("retaining the primary context of {device}"))?;
            Ok(context as usize)
        })?;
        Ok(context as CuContext)
    }

    /// Makes `context`, the primary context of `device`, current on the calling thread.
    #[inline]
    fn set_current(&self, device: Device, context: CuContext) -> Result<()> {
        // SAFETY: a context retained by `primary_context`, never released while the runtime
        // lives.
        let rc = unsafe { (self.driver.api.ctx_set_current)(context) };
        if rc == CUDA_SUCCESS {
            // Every launch binds: the message is formatted only on failure.
            return Ok(());
        }
        self.driver
            .check(rc, &format!("making the context of {device} current"))
    }

    /// Makes the primary context of `device` current on the calling thread (retaining it the
    /// first time).
    pub fn bind(&self, device: Device) -> Result<()> {
        self.check_device(device)?;
        let context = self.primary_context(device)?;
        self.set_current(device, context)
    }

    /// The context current on the calling thread (NULL when none is).
    #[inline]
    fn current_context(&self) -> CuContext {
        let mut context: CuContext = std::ptr::null_mut();
        // SAFETY: an out-parameter.
        let rc = unsafe { (self.driver.api.ctx_get_current)(&mut context) };
        if rc == CUDA_SUCCESS {
            context
        } else {
            std::ptr::null_mut()
        }
    }

    /// The device whose primary context is `context`, if one of those retained.
    #[inline]
    fn device_of(&self, context: CuContext) -> Option<i32> {
        if context.is_null() {
            return None;
        }
        self.contexts.find(&(context as usize))
    }

    /// The device whose primary context is current on the calling thread, if any.
    pub fn current_device(&self) -> Option<i32> {
        self.device_of(self.current_context())
    }

    /// The device a kernel launch runs on, made current on the calling thread: `tensors_on`
    /// (the device of the call's tensors) when given, else the device whose primary context is
    /// current, else `cuda:0`. The context is set only when it is not current already, so a
    /// launch costs one driver call besides the launch itself.
    #[inline]
    pub fn launch_device(&self, tensors_on: Option<Device>) -> Result<Device> {
        let current = self.current_context();
        let device = match tensors_on {
            Some(device) => device,
            None => Device::new(kDLCUDA, self.device_of(current).unwrap_or(0)),
        };
        self.check_device(device)?;
        let context = self.primary_context(device)?;
        if context != current {
            self.set_current(device, context)?;
        }
        Ok(device)
    }
}

impl Drop for CudaRuntime {
    fn drop(&mut self) {
        for (id, _) in self.contexts.drain() {
            // SAFETY: each was retained once by `bind`.
            unsafe { (self.driver.api.primary_ctx_release)(id) };
        }
    }
}

device_kit::driver_backend!(CudaBackend, CudaRuntime, "CUDA");
