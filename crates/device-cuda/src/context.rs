//! The loaded driver with a primary context per device, opened on first use.

use std::path::PathBuf;
use std::sync::Arc;

use device_common::PerDevice;
use device_common::runtime::{LazyRuntime, RuntimeSource, check_device_index};
use tvm_ffi::{Device, Result};

use crate::driver::{CUDA_SUCCESS, CuContext, CudaDriver};

/// The names the driver is looked up by, in order.
pub const DRIVER_CANDIDATES: [&str; 2] = ["libcuda.so.1", "libcuda.so"];
/// The environment variable naming the driver library to use instead.
pub const DRIVER_OVERRIDE_VAR: &str = "TVM_CUDA_DRIVER";

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
    pub fn check_device(&self, device: Device) -> Result<()> {
        check_device_index(
            "CUDA driver",
            device,
            self.driver.device_count,
            self.driver.no_device_reason.as_deref(),
        )
    }

    /// Makes the primary context of `device` current on the calling thread (retaining it the
    /// first time).
    pub fn bind(&self, device: Device) -> Result<()> {
        self.check_device(device)?;
        let id = device.device_id();
        let api = &self.driver.api;
        let context = self.contexts.get_or_try_init(id, || {
            let mut context: CuContext = std::ptr::null_mut();
            // SAFETY: an out-parameter; the index was checked against the device count.
            let rc = unsafe { (api.primary_ctx_retain)(&mut context, id) };
            self.driver
                .check(rc, &format!("retaining the primary context of {device}"))?;
            Ok(context as usize)
        })?;
        // SAFETY: a context retained above and never released while the runtime lives.
        let rc = unsafe { (api.ctx_set_current)(context as CuContext) };
        if rc == CUDA_SUCCESS {
            // Every launch binds: the message is formatted only on failure.
            return Ok(());
        }
        self.driver
            .check(rc, &format!("making the context of {device} current"))
    }

    /// The device whose primary context is current on the calling thread, if any.
    pub fn current_device(&self) -> Option<i32> {
        let mut context: CuContext = std::ptr::null_mut();
        // SAFETY: an out-parameter.
        let rc = unsafe { (self.driver.api.ctx_get_current)(&mut context) };
        if rc != 0 || context.is_null() {
            return None;
        }
        (0..self.driver.device_count).find(|id| self.contexts.get(*id) == Some(context as usize))
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

/// The CUDA backend: the driver, opened on first use.
#[derive(Debug)]
pub struct CudaBackend {
    lazy: LazyRuntime<CudaRuntime>,
}

impl CudaBackend {
    /// A backend that opens `$TVM_CUDA_DRIVER`, else `libcuda.so.1`, else `libcuda.so`, on first
    /// use.
    pub fn from_environment() -> CudaBackend {
        CudaBackend {
            lazy: LazyRuntime::from_environment(),
        }
    }

    /// A backend that opens the driver at `library` on first use.
    pub fn with_library(library: impl Into<PathBuf>) -> CudaBackend {
        CudaBackend {
            lazy: LazyRuntime::with_library(library),
        }
    }

    /// The runtime, opening the driver the first time; a `RuntimeError` saying which library
    /// was looked for and why it did not load.
    pub fn runtime(&self) -> Result<&Arc<CudaRuntime>> {
        self.lazy.runtime()
    }
}

impl RuntimeSource for CudaBackend {
    type Runtime = CudaRuntime;

    fn lazy(&self) -> &LazyRuntime<CudaRuntime> {
        &self.lazy
    }
}
