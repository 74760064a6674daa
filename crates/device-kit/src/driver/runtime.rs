//! A vendor runtime behind one interface ([`GpuRuntime`]), opened from its library on first use
//! ([`LazyRuntime`]).

use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use tvm_ffi::{Any, Device, Error, ErrorKind, Result};
use tvm_runtime::device::{DeviceAttr, StreamHandle};

use crate::driver::DriverLibrary;
use crate::driver::copy::FlatCopy;
use crate::driver::shared_calls::SharedCalls;

/// The names of a vendor runtime and of its devices.
#[derive(Clone, Copy, Debug)]
pub struct RuntimeNames {
    /// What the library is, for messages ("CUDA driver").
    pub what: &'static str,
    /// The environment variable that names the library to use instead of the candidates.
    pub override_var: &'static str,
    /// The names the library is looked up by, in order.
    pub candidates: &'static [&'static str],
    /// The DLPack type of the devices ([`GpuRuntime::bind`] and the rest take such devices).
    pub device_type: i32,
    /// The DLPack type of its pinned host memory devices.
    pub host_device_type: i32,
    /// The backend's name ("cuda").
    pub name: &'static str,
    /// The name of its pinned host memory devices ("cuda_host").
    pub host_name: &'static str,
}

/// What a GPU backend needs from its vendor library, for one kind of device.
pub trait GpuRuntime: Send + Sync + Sized + 'static {
    /// The names of the runtime and its devices.
    const NAMES: RuntimeNames;

    /// Opens the runtime from its loaded library.
    fn load(library: DriverLibrary) -> std::result::Result<Self, String>;

    /// The entry points both vendors have in one shape, through which
    /// [`SharedOps`](crate::driver::shared_ops::SharedOps) runs streams, device queries and
    /// kernel lookup.
    fn calls(&self) -> &SharedCalls;

    /// `Ok` for the vendor's success code; otherwise the error of `what` failing with `rc`
    /// ([`call_error`]).
    fn check(&self, rc: i32, what: &str) -> Result<()>;

    /// Checks that `device` is one of the runtime's; the error says why not.
    fn check_device(&self, device: Device) -> Result<()>;

    /// Makes `device` the calling thread's current device.
    fn bind(&self, device: Device) -> Result<()>;

    /// The device that runs a kernel call whose tensors are on `tensors_on` (else the thread's
    /// current device, else device 0), made the thread's current device.
    fn launch_device(&self, tensors_on: Option<Device>) -> Result<Device>;

    /// An attribute of an existing device.
    fn attr(&self, device: Device, attr: DeviceAttr) -> Result<Option<Any>>;

    /// `nbytes` (at least one) of memory on `device`.
    fn alloc_device(&self, device: Device, nbytes: usize, alignment: usize) -> Result<u64>;

    /// Frees memory from [`GpuRuntime::alloc_device`].
    ///
    /// # Safety
    /// `ptr` came from `alloc_device` on `device` and is freed once.
    unsafe fn free_device(&self, device: Device, ptr: u64) -> Result<()>;

    /// `nbytes` of page-locked host memory, through `device`.
    fn alloc_host(&self, device: Device, nbytes: usize, alignment: usize) -> Result<*mut c_void>;

    /// Frees memory from [`GpuRuntime::alloc_host`].
    ///
    /// # Safety
    /// `ptr` came from `alloc_host` and is freed once.
    unsafe fn free_host(&self, ptr: *mut c_void) -> Result<()>;

    /// Queues `copy` on `stream` of `device` (which is bound).
    ///
    /// # Safety
    /// As for [`crate::driver::copy::RawCopies::copy`].
    unsafe fn copy(&self, device: Device, copy: FlatCopy, stream: StreamHandle) -> Result<()>;
}

/// "NAME (code): text" for a vendor result code, from the vendor's name and text for it when it
/// has them (`unknown` stands in for a missing name: "unknown CUDA error").
pub fn describe_code(rc: i32, name: Option<String>, text: Option<String>, unknown: &str) -> String {
    let name = name.unwrap_or_else(|| unknown.to_owned());
    match text {
        Some(text) => format!("{name} ({rc}): {text}"),
        None => format!("{name} ({rc})"),
    }
}

/// The error of a failed vendor call: "what: description", a `MemoryError` when `rc` is the
/// vendor's `out_of_memory` code, else a `RuntimeError`.
pub fn call_error(rc: i32, out_of_memory: i32, what: &str, description: &str) -> Error {
    let kind = if rc == out_of_memory {
        ErrorKind::MemoryError
    } else {
        ErrorKind::RuntimeError
    };
    Error::new(kind, format!("{what}: {description}"))
}

/// A vendor library's result codes: `0` is success, and the library names and explains the
/// others ([`VendorErrors::describe`]).
pub trait VendorErrors {
    /// The code of a failed allocation, which is a `MemoryError`.
    const OUT_OF_MEMORY: i32;

    /// "NAME (code): text" for a result code ([`describe_code`]).
    fn describe(&self, rc: i32) -> String;

    /// `Ok` for success (0); otherwise the error of `what` failing with `rc`.
    #[inline]
    fn check(&self, rc: i32, what: &str) -> Result<()> {
        if rc == 0 {
            return Ok(());
        }
        Err(self.error(rc, what))
    }

    /// The error of a failed call (`rc` is not 0): what failed (`what`) and how.
    #[cold]
    fn error(&self, rc: i32, what: &str) -> Error {
        call_error(rc, Self::OUT_OF_MEMORY, what, &self.describe(rc))
    }
}

/// Checks that `device`'s index is one of the `count` devices the vendor library reports
/// (`what`: "CUDA driver"); `no_device_reason` is why it reports none, when it said.
#[inline]
pub fn check_device_index(
    what: &str,
    device: Device,
    count: i32,
    no_device_reason: Option<&str>,
) -> Result<()> {
    if (0..count).contains(&device.device_id()) {
        return Ok(());
    }
    Err(device_index_error(what, device, count, no_device_reason))
}

#[cold]
fn device_index_error(
    what: &str,
    device: Device,
    count: i32,
    no_device_reason: Option<&str>,
) -> Error {
    let message = match no_device_reason {
        Some(reason) => format!("the {what} sees no device ({reason})"),
        None => format!("{device} is out of range: the {what} reports {count} device(s)"),
    };
    Error::new(ErrorKind::ValueError, message)
}

/// Checks that an allocation aligned to `alignment` bytes can be given by a vendor library
/// (`what`: "CUDA") whose allocations are aligned to `guaranteed` bytes.
pub fn check_alignment(what: &str, guaranteed: usize, alignment: usize) -> Result<()> {
    if alignment > guaranteed {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "{what} allocations are aligned to {guaranteed} bytes; an alignment of {alignment} \
             cannot be given"
        );
    }
    Ok(())
}

/// A runtime opened on first use, from the library its `override_var` ([`GpuRuntime::NAMES`])
/// names or the first candidate that loads (or from one given library).
#[derive(Debug)]
pub struct LazyRuntime<R: GpuRuntime> {
    library: Option<PathBuf>,
    runtime: OnceLock<std::result::Result<Arc<R>, String>>,
}

impl<R: GpuRuntime> LazyRuntime<R> {
    /// Opens the library of the environment variable, else the candidates, on first use.
    pub fn from_env() -> LazyRuntime<R> {
        LazyRuntime {
            library: None,
            runtime: OnceLock::new(),
        }
    }

    /// Opens `library` on first use.
    pub fn with_library(library: impl Into<PathBuf>) -> LazyRuntime<R> {
        LazyRuntime {
            library: Some(library.into()),
            runtime: OnceLock::new(),
        }
    }

    fn open(&self) -> std::result::Result<Arc<R>, String> {
        let library = match &self.library {
            Some(path) => {
                let path = path.to_string_lossy();
                DriverLibrary::open(&path)
                    .map_err(|why| format!("{} not found: {path}: {why}", R::NAMES.what))?
            }
            None => DriverLibrary::open_first(
                R::NAMES.what,
                R::NAMES.override_var,
                R::NAMES.candidates,
            )?,
        };
        R::load(library).map(Arc::new)
    }

    /// The runtime, opened the first time; a `RuntimeError` saying which library was looked
    /// for and why it did not load.
    #[inline]
    pub fn runtime(&self) -> Result<&Arc<R>> {
        self.runtime
            .get_or_init(|| self.open())
            .as_ref()
            .map_err(|why| Error::new(ErrorKind::RuntimeError, why.clone()))
    }

    /// Whether `device` exists (the library loads and has that index).
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

/// A backend object that holds a [`LazyRuntime`] (each backend crate has its own, on which it
/// also implements [`crate::driver::module::KernelBackend`]).
pub trait RuntimeSource: Send + Sync + 'static {
    /// The runtime's type.
    type Runtime: GpuRuntime;
    /// The lazily opened runtime.
    fn lazy(&self) -> &LazyRuntime<Self::Runtime>;

    /// The runtime, opening its library the first time; a `RuntimeError` saying which library
    /// was looked for and why it did not load.
    #[inline]
    fn runtime(&self) -> Result<&Arc<Self::Runtime>> {
        self.lazy().runtime()
    }
}

/// A driver-API backend type over runtime `$runtime`, in one shape for all: the runtime opened
/// on first use ([`LazyRuntime`]), `from_env()` (the library the runtime's `override_var`
/// names, else the first of its candidates that loads), `with_library(path)`, and its
/// [`RuntimeSource`]. `$title` names the backend in the docs.
#[macro_export]
macro_rules! driver_backend {
    ($backend:ident, $runtime:ty, $title:literal) => {
        #[doc = concat!("The ", $title, " backend: its vendor runtime, opened on first use.")]
        #[derive(Debug)]
        pub struct $backend {
            lazy: $crate::driver::runtime::LazyRuntime<$runtime>,
        }

        impl $backend {
            /// A backend that opens the library the runtime's override variable names, else
            /// the first of its candidates that loads, on first use.
            pub fn from_env() -> $backend {
                $backend {
                    lazy: $crate::driver::runtime::LazyRuntime::from_env(),
                }
            }

            /// A backend that opens the library at `library` on first use.
            pub fn with_library(library: impl Into<::std::path::PathBuf>) -> $backend {
                $backend {
                    lazy: $crate::driver::runtime::LazyRuntime::with_library(library),
                }
            }
        }

        impl $crate::driver::runtime::RuntimeSource for $backend {
            type Runtime = $runtime;

            fn lazy(&self) -> &$crate::driver::runtime::LazyRuntime<$runtime> {
                &self.lazy
            }
        }
    };
}
