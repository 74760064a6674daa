//! The loaded driver with a primary context per device, opened on first use.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use device_common::{DriverLibrary, PerDevice};
use tvm_ffi::{Device, Error, ErrorKind, Result};

use crate::driver::{CuContext, CudaDriver};

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
    contexts: PerDevice<usize>,
}

impl CudaRuntime {
    /// Checks that `device` is one of the driver's.
    pub fn check_device(&self, device: Device) -> Result<()> {
        let id = device.device_id();
        if !(0..self.driver.device_count).contains(&id) {
            tvm_ffi::bail!(ErrorKind::ValueError, "{}", self.out_of_range(device));
        }
        Ok(())
    }

    fn out_of_range(&self, device: Device) -> String {
        match &self.driver.no_device_reason {
            Some(reason) => format!("the CUDA driver sees no device ({reason})"),
            None => format!(
                "{device} is out of range: the CUDA driver reports {} device(s)",
                self.driver.device_count
            ),
        }
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

/// Where the driver comes from, and the runtime once it is opened.
#[derive(Debug)]
pub struct CudaBackend {
    library: Option<PathBuf>,
    runtime: OnceLock<std::result::Result<Arc<CudaRuntime>, String>>,
}

impl CudaBackend {
    /// A backend that opens `$TVM_CUDA_DRIVER`, else `libcuda.so.1`, else `libcuda.so`, on first
    /// use.
    pub fn from_environment() -> CudaBackend {
        CudaBackend {
            library: None,
            runtime: OnceLock::new(),
        }
    }

    /// A backend that opens the driver at `library` on first use.
    pub fn with_library(library: impl Into<PathBuf>) -> CudaBackend {
        CudaBackend {
            library: Some(library.into()),
            runtime: OnceLock::new(),
        }
    }

    fn open(&self) -> std::result::Result<Arc<CudaRuntime>, String> {
        let library = match &self.library {
            Some(path) => {
                let path = path.to_string_lossy();
                DriverLibrary::open(&path)
                    .map_err(|why| format!("CUDA driver not found: {path}: {why}"))?
            }
            None => {
                DriverLibrary::open_first("CUDA driver", DRIVER_OVERRIDE_VAR, &DRIVER_CANDIDATES)?
            }
        };
        Ok(Arc::new(CudaRuntime {
            driver: CudaDriver::load(library)?,
            contexts: PerDevice::default(),
        }))
    }

    /// The runtime, opening the driver the first time; a `RuntimeError` saying which library
    /// was looked for and why it did not load.
    pub fn runtime(&self) -> Result<&Arc<CudaRuntime>> {
        self.runtime
            .get_or_init(|| self.open())
            .as_ref()
            .map_err(|why| Error::new(ErrorKind::RuntimeError, why.clone()))
    }

    /// Whether `device` exists (the driver loads and has that index).
    pub fn exists(&self, device: Device) -> bool {
        self.runtime()
            .is_ok_and(|runtime| runtime.check_device(device).is_ok())
    }

    /// Why `device` does not exist, if it does not.
    pub fn unavailable_reason(&self, device: Device) -> Option<String> {
        match self.runtime() {
            Err(e) => Some(e.message().to_string()),
            Ok(runtime) => runtime
                .check_device(device)
                .err()
                .map(|e| e.message().to_string()),
        }
    }
}
