//! The entry points CUDA's driver API and HIP have in one shape (a result code, handles as
//! pointers, out-parameters first), resolved under each vendor's names, so that the kit writes
//! streams, events, device queries and kernel lookup once for both.

use std::ffi::{CStr, CString, c_char, c_void};

use tvm_ffi::{Device, ErrorKind, Result};
use tvm_runtime::device::StreamHandle;

use crate::driver::runtime::GpuRuntime;

/// A vendor handle (`CUstream`, `hipEvent_t`, `CUmodule`, ...).
pub type Handle = *mut c_void;

macro_rules! shared_calls {
    ($($field:ident => fn($($arg:ty),*);)*) => {
        /// The vendor's symbol name of each shared entry point.
        #[derive(Clone, Copy, Debug)]
        pub struct SharedCallNames {
            $(
                #[doc = concat!("The symbol of [`SharedCalls::", stringify!($field), "`].")]
                pub $field: &'static str,
            )*
        }

        /// The shared entry points of one vendor library.
        #[derive(Clone, Copy, Debug)]
        pub struct SharedCalls {
            $(
                #[doc = concat!("The vendor's `", stringify!($field), "`.")]
                pub $field: unsafe extern "C" fn($($arg),*) -> i32,
            )*
        }

        impl SharedCalls {
            /// Resolves every entry point from `library` under `names`; the first missing one
            /// is an error naming it.
            pub fn load(
                library: &crate::driver::DriverLibrary,
                names: &SharedCallNames,
            ) -> std::result::Result<SharedCalls, String> {
                Ok(SharedCalls {
                    $(
                        // SAFETY: both vendors declare the symbol with the field's C signature.
                        $field: unsafe { library.function(names.$field)? },
                    )*
                })
            }
        }
    };
}

shared_calls! {
    device_get_attribute => fn(*mut i32, i32, i32);
    device_get_name => fn(*mut c_char, i32, i32);
    device_total_mem => fn(*mut usize, i32);
    mem_get_info => fn(*mut usize, *mut usize);
    stream_create_with_flags => fn(*mut Handle, u32);
    stream_destroy => fn(Handle);
    stream_synchronize => fn(Handle);
    stream_wait_event => fn(Handle, Handle, u32);
    event_create_with_flags => fn(*mut Handle, u32);
    event_record => fn(Handle, Handle);
    event_destroy => fn(Handle);
    module_unload => fn(Handle);
    module_get_function => fn(*mut Handle, Handle, *const c_char);
}

/// `CU_STREAM_NON_BLOCKING` and `hipStreamNonBlocking`: the stream does not wait for the
/// legacy default (null) stream.
pub const STREAM_NON_BLOCKING: u32 = 1;
/// `CU_EVENT_DISABLE_TIMING` and `hipEventDisableTiming`: the cheapest event, for ordering only.
pub const EVENT_DISABLE_TIMING: u32 = 2;

/// What the kit does through [`SharedCalls`], for every [`GpuRuntime`]: streams and the event
/// that orders two of them, device queries, and kernels of loaded code.
pub trait SharedOps: GpuRuntime {
    /// A new non-blocking stream on `device`.
    fn create_stream(&self, device: Device) -> Result<StreamHandle> {
        self.bind(device)?;
        let mut stream = std::ptr::null_mut();
        // SAFETY: an out-parameter; `device` is bound.
        let rc =
            unsafe { (self.calls().stream_create_with_flags)(&mut stream, STREAM_NON_BLOCKING) };
        self.check(rc, &format!("creating a stream on {device}"))?;
        Ok(StreamHandle(stream))
    }

    /// Destroys a stream from [`SharedOps::create_stream`] (its work completes first).
    ///
    /// # Safety
    /// `stream` came from `create_stream` on `device` and is destroyed once.
    unsafe fn destroy_stream(&self, device: Device, stream: StreamHandle) -> Result<()> {
        self.bind(device)?;
        // SAFETY: guaranteed by the caller.
        let rc = unsafe { (self.calls().stream_destroy)(stream.0) };
        self.check(rc, &format!("destroying stream {stream:p} of {device}"))
    }

    /// Waits for the work queued on `stream`; errors of kernels that ran show here.
    fn synchronize(&self, device: Device, stream: StreamHandle) -> Result<()> {
        self.bind(device)?;
        // SAFETY: a stream of this device (or NULL, the default stream).
        let rc = unsafe { (self.calls().stream_synchronize)(stream.0) };
        self.check(rc, &format!("synchronizing stream {stream:p} of {device}"))
    }

    /// Makes the work queued on `to` from now on wait for the work queued on `from` so far,
    /// through an event; the host does not wait.
    fn stream_wait(&self, device: Device, from: StreamHandle, to: StreamHandle) -> Result<()> {
        self.bind(device)?;
        let calls = self.calls();
        let mut event = std::ptr::null_mut();
        // SAFETY: an out-parameter; `device` is bound.
        let rc = unsafe { (calls.event_create_with_flags)(&mut event, EVENT_DISABLE_TIMING) };
        self.check(rc, &format!("creating an event on {device}"))?;
        // SAFETY: a live event and streams of this device.
        let rc = unsafe { (calls.event_record)(event, from.0) };
        let outcome = self
            .check(rc, &format!("recording an event on stream {from:p}"))
            .and_then(|()| {
                // SAFETY: as above.
                let rc = unsafe { (calls.stream_wait_event)(to.0, event, 0) };
                self.check(
                    rc,
                    &format!("making stream {to:p} wait for stream {from:p}"),
                )
            });
        // SAFETY: created above and destroyed once, whatever happened; the vendor keeps the
        // event until the wait is done.
        unsafe { (calls.event_destroy)(event) };
        outcome
    }

    /// Free and total bytes of `device`'s memory.
    fn memory_info(&self, device: Device) -> Result<(usize, usize)> {
        self.bind(device)?;
        let (mut free, mut total) = (0, 0);
        // SAFETY: out-parameters; `device` is bound.
        let rc = unsafe { (self.calls().mem_get_info)(&mut free, &mut total) };
        self.check(rc, &format!("querying the memory of {device}"))?;
        Ok((free, total))
    }

    /// The vendor attribute numbered `attribute` of `device`.
    fn device_attribute(&self, device: Device, attribute: i32) -> Result<i32> {
        self.check_device(device)?;
        let mut value = 0;
        // SAFETY: an out-parameter; the index was checked.
        let rc = unsafe {
            (self.calls().device_get_attribute)(&mut value, attribute, device.device_id())
        };
        self.check(rc, &format!("reading attribute {attribute} of {device}"))?;
        Ok(value)
    }

    /// The device's name.
    fn device_name(&self, device: Device) -> Result<String> {
        self.check_device(device)?;
        let mut name = [0u8; NAME_BYTES];
        // SAFETY: a buffer of the length given; the index was checked.
        let rc = unsafe {
            (self.calls().device_get_name)(
                name.as_mut_ptr().cast::<c_char>(),
                NAME_BYTES as i32,
                device.device_id(),
            )
        };
        self.check(rc, &format!("reading the name of {device}"))?;
        Ok(c_string(&name))
    }

    /// Total bytes of memory of `device`.
    fn total_memory(&self, device: Device) -> Result<usize> {
        self.check_device(device)?;
        let mut bytes = 0;
        // SAFETY: an out-parameter; the index was checked.
        let rc = unsafe { (self.calls().device_total_mem)(&mut bytes, device.device_id()) };
        self.check(rc, &format!("reading the memory size of {device}"))?;
        Ok(bytes)
    }

    /// Kernel `name` of `code`, loaded on `device`.
    fn kernel(&self, device: Device, code: LoadedCode, name: &str) -> Result<Kernel> {
        self.bind(device)?;
        let Ok(c_name) = CString::new(name) else {
            tvm_ffi::bail!(ErrorKind::ValueError, "kernel name {name:?} has a NUL");
        };
        let mut function = std::ptr::null_mut();
        // SAFETY: code loaded on this device and a NUL-terminated name.
        let rc = unsafe {
            (self.calls().module_get_function)(&mut function, code.handle(), c_name.as_ptr())
        };
        self.check(
            rc,
            &format!("kernel `{name}` is not in the module loaded on {device}"),
        )?;
        Ok(Kernel(function as usize))
    }

    /// Unloads `code` from `device`; a failure is ignored (the code is gone either way).
    fn unload(&self, device: Device, code: LoadedCode) {
        if self.bind(device).is_ok() {
            // SAFETY: loaded on this device and unloaded once (the module's contract).
            unsafe { (self.calls().module_unload)(code.handle()) };
        }
    }
}

impl<R: GpuRuntime> SharedOps for R {}

/// The room a device name is read into.
const NAME_BYTES: usize = 256;

/// The string in `bytes` up to its first NUL (or all of it).
pub fn c_string(bytes: &[u8]) -> String {
    CStr::from_bytes_until_nul(bytes)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| String::from_utf8_lossy(bytes).into_owned())
}

/// Code loaded on one device (`CUmodule`, `hipModule_t`), as an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadedCode(pub usize);

impl LoadedCode {
    /// The vendor's handle.
    pub fn handle(self) -> Handle {
        self.0 as Handle
    }
}

/// A kernel of loaded code (`CUfunction`, `hipFunction_t`), as an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kernel(pub usize);

impl Kernel {
    /// The vendor's handle.
    pub fn handle(self) -> Handle {
        self.0 as Handle
    }
}
