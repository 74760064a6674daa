//! Streams and the event that hands work from one stream to another.

use tvm_ffi::{Device, Result};
use tvm_runtime::device::StreamHandle;

use crate::context::CudaRuntime;
use crate::driver::CuEvent;

/// `CU_STREAM_NON_BLOCKING`: the stream does not wait for the legacy default stream.
const STREAM_NON_BLOCKING: u32 = 1;
/// `CU_EVENT_DISABLE_TIMING`: the cheapest event, for ordering only.
const EVENT_DISABLE_TIMING: u32 = 2;

impl CudaRuntime {
    /// A new non-blocking stream on `device`.
    pub fn create_stream(&self, device: Device) -> Result<StreamHandle> {
        self.bind(device)?;
        let mut stream = std::ptr::null_mut();
        // SAFETY: an out-parameter; the context of `device` is current.
        let rc = unsafe { (self.driver.api.stream_create)(&mut stream, STREAM_NON_BLOCKING) };
        self.driver
            .check(rc, &format!("creating a stream on {device}"))?;
        Ok(StreamHandle(stream))
    }

    /// Destroys a stream from [`CudaRuntime::create_stream`] (its work completes first).
    ///
    /// # Safety
    /// `stream` came from `create_stream` on `device` and is destroyed once.
    pub unsafe fn destroy_stream(&self, device: Device, stream: StreamHandle) -> Result<()> {
        self.bind(device)?;
        // SAFETY: guaranteed by the caller.
        let rc = unsafe { (self.driver.api.stream_destroy)(stream.0) };
        self.driver
            .check(rc, &format!("destroying stream {stream:p} of {device}"))
    }

    /// Waits for the work queued on `stream`; errors of kernels that ran show here.
    pub fn synchronize(&self, device: Device, stream: StreamHandle) -> Result<()> {
        self.bind(device)?;
        // SAFETY: a stream of this device (or NULL, the default stream).
        let rc = unsafe { (self.driver.api.stream_synchronize)(stream.0) };
        self.driver
            .check(rc, &format!("synchronizing stream {stream:p} of {device}"))
    }

    /// Makes the work queued on `to` from now on wait for the work queued on `from` so far,
    /// through an event; the host does not wait.
    pub fn stream_wait(&self, device: Device, from: StreamHandle, to: StreamHandle) -> Result<()> {
        self.bind(device)?;
        let api = &self.driver.api;
        let mut event: CuEvent = std::ptr::null_mut();
        // SAFETY: an out-parameter; the context of `device` is current.
        let rc = unsafe { (api.event_create)(&mut event, EVENT_DISABLE_TIMING) };
        self.driver
            .check(rc, &format!("creating an event on {device}"))?;
        // SAFETY: a live event and streams of this device.
        let rc = unsafe { (api.event_record)(event, from.0) };
        let result = self
            .driver
            .check(rc, &format!("recording an event on stream {from:p}"))
            .and_then(|()| {
                // SAFETY: as above.
                let rc = unsafe { (api.stream_wait_event)(to.0, event, 0) };
                self.driver.check(
                    rc,
                    &format!("making stream {to:p} wait for stream {from:p}"),
                )
            });
        // SAFETY: the event is destroyed once; the driver keeps it until the wait is done.
        unsafe { (api.event_destroy)(event) };
        result
    }
}
