//! What the kit does for every [`GpuRuntime`] through the entry points both vendors share
//! ([`SharedCalls`](crate::driver::shared_calls::SharedCalls)): streams and the event that
//! orders two of them, device queries, and kernels of loaded code.

use std::ffi::{CStr, CString, c_char};

use tvm_ffi::{Device, ErrorKind, Result};
use tvm_runtime::device::StreamHandle;

use crate::driver::runtime::GpuRuntime;
use crate::driver::shared_calls::{EVENT_DISABLE_TIMING, Kernel, LoadedCode, STREAM_NON_BLOCKING};

/// What the kit does through [`GpuRuntime::calls`], for every [`GpuRuntime`]: streams and the event
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
