//! Calls of runtime functions with Python arguments: each argument becomes a view on the stack
//! (or, past a few, on the heap), kept valid by the Python objects and the call's temporaries.

use pyo3::ffi;
use pyo3::prelude::*;
use tvm_ffi::abi::TVMFFIAny;
use tvm_ffi::{Any, AnyView, Function};

use super::{Temporaries, py_to_view};
use crate::errors::raise_error;

/// Views handed to another thread while the interpreter lock is released.
struct SendViews<'a>(&'a [AnyView<'a>]);

// SAFETY: the views borrow values that stay alive (and untouched) until the call returns.
unsafe impl Send for SendViews<'_> {}

/// A stream made the calling thread's current stream of a device for one call; the stream
/// before it comes back when this is dropped.
struct StreamForCall {
    device: (i32, i32),
    previous: *mut std::ffi::c_void,
}

impl StreamForCall {
    fn set(device_type: i32, device_id: i32, stream: usize) -> StreamForCall {
        let mut previous = std::ptr::null_mut();
        // SAFETY: the thread's stream table takes any device; `previous` is writable. Setting a
        // stream only fails on a broken runtime, and the call then runs on the current one.
        unsafe {
            tvm_ffi::abi::TVMFFIEnvSetStream(device_type, device_id, stream as _, &mut previous)
        };
        StreamForCall {
            device: (device_type, device_id),
            previous,
        }
    }
}

impl Drop for StreamForCall {
    fn drop(&mut self) {
        let (device_type, device_id) = self.device;
        // SAFETY: as in `set`; the previous stream was current before.
        unsafe {
            tvm_ffi::abi::TVMFFIEnvSetStream(
                device_type,
                device_id,
                self.previous,
                std::ptr::null_mut(),
            )
        };
    }
}

/// Calls `function` with (borrowed, live) Python arguments, releasing the interpreter lock
/// during the call if `release_gil`.
pub(crate) fn call_function(
    py: Python<'_>,
    function: &Function,
    args: &[*mut ffi::PyObject],
    release_gil: bool,
) -> PyResult<Any> {
    const STACK: usize = 8;
    let n = args.len();
    let mut temps = Temporaries::default();
    let mut stack = [TVMFFIAny::NONE; STACK];
    let mut heap = Vec::new();
    let slots: &mut [TVMFFIAny] = if n <= STACK {
        &mut stack[..n]
    } else {
        heap.resize(n, TVMFFIAny::NONE);
        &mut heap[..]
    };
    for (slot, item) in slots.iter_mut().zip(args) {
        // SAFETY: the caller lends live argument objects for the call.
        let item = unsafe { Bound::from_borrowed_ptr(py, *item) };
        *slot = py_to_view(&item, &mut temps)?;
    }
    // SAFETY: `AnyView` is a transparent `TVMFFIAny`; the views borrow `args` (raw strings point
    // at the NUL-terminated UTF-8 cache of a `str`) and `temps`, both alive for the call.
    let views: &[AnyView<'_>] =
        unsafe { std::slice::from_raw_parts(slots.as_ptr().cast::<AnyView<'_>>(), n) };
    // A producer's stream is current for the call, the stream before it after.
    let _stream = temps
        .producer_stream()
        .map(|(t, i, s)| StreamForCall::set(t, i, s));
    let result = if release_gil {
        let views = SendViews(views);
        crate::exit_gate::detach(py, move || {
            let views = views;
            function.call_packed(views.0)
        })
    } else {
        let _holding = crate::gil_holder::Holding::enter();
        function.call_packed(views)
    };
    temps.release(py);
    result.map_err(|e| raise_error(py, e))
}
