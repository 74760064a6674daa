//! The one panic boundary of the runtime: every function that foreign code calls (the exported
//! `TVMFFI*` C functions, safe-call trampolines, deleters, raw interpreter entry points) runs its
//! body through [`ffi_boundary`], so that no panic unwinds into C.
//!
//! What a caller sees after a panic depends on the return type, through [`FailureValue`]: a C
//! status code is `-1`, a pointer is NULL, and so on, with an `InternalError` naming the
//! boundary and the panic message raised in the calling thread's error slot. A language binding
//! implements the trait for its own return kinds (on a local newtype) to report the failure its
//! own way, such as a Python exception.
//!
//! The success path costs nothing measurable: no allocation and no thread-local access, only
//! the unwinding tables of `catch_unwind`. All failure handling is out of line. (The test-only
//! `panic-injection` feature adds one thread-local read per call, for `inject_panic`.)

use std::any::Any as PanicPayload;
use std::cell::Cell;
use std::ffi::c_int;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::abi::TVMFFIByteArray;
use crate::error::{Error, ErrorKind, Result};

/// A return type of a function called from foreign code, with the value that tells the caller
/// the call failed.
pub trait FailureValue: Sized {
    /// The value that signals failure, reporting nothing. It must not panic.
    fn failure() -> Self;

    /// Reports `error` through this return kind's error channel and returns [`failure`]. The
    /// default raises it in the calling thread's error slot (`TVMFFIErrorSetRaised`), which is
    /// where C callers of the ABI look for it.
    ///
    /// [`failure`]: FailureValue::failure
    #[cold]
    fn report(error: Error) -> Self {
        error.set_raised();
        Self::failure()
    }
}

/// A C status code: `-1` (the ABI's non-zero failure code), the error raised.
impl FailureValue for c_int {
    #[inline]
    fn failure() -> c_int {
        -1
    }
}

/// No value: only the raised error tells the caller.
impl FailureValue for () {
    #[inline]
    fn failure() {}
}

/// NULL, the error raised.
impl<T> FailureValue for *const T {
    #[inline]
    fn failure() -> *const T {
        std::ptr::null()
    }
}

/// NULL, the error raised.
impl<T> FailureValue for *mut T {
    #[inline]
    fn failure() -> *mut T {
        std::ptr::null_mut()
    }
}

/// `None` (such as a NULL function pointer), the error raised.
impl<T> FailureValue for Option<T> {
    #[inline]
    fn failure() -> Option<T> {
        None
    }
}

/// An empty array with NULL data, the error raised.
impl FailureValue for TVMFFIByteArray {
    #[inline]
    fn failure() -> TVMFFIByteArray {
        TVMFFIByteArray::EMPTY
    }
}

/// Runs `body`, the whole of a function that foreign code calls: its value, or after a panic
/// `R`'s failure value with an `InternalError` naming `name` and the panic message reported
/// through [`FailureValue::report`].
///
/// Never unwinds and never panics: a panic while reporting still yields the failure value (the
/// report is then skipped), and only a failure value that itself panics aborts the process.
/// `name` is the exported symbol or a description of the callback, such as
/// `"TVMFFIObjectIncRef"`.
#[inline]
pub fn ffi_boundary<R: FailureValue>(name: &'static str, body: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(|| {
        #[cfg(feature = "panic-injection")]
        injection::fire(name);
        body()
    })) {
        Ok(value) => value,
        Err(payload) => on_panic(name, payload),
    }
}

/// [`ffi_boundary`] for a body that reports errors as values: `Ok` is returned as is, `Err` is
/// reported through [`FailureValue::report`] (for C returns, raised in the error slot).
#[inline]
pub fn ffi_boundary_result<R: FailureValue>(
    name: &'static str,
    body: impl FnOnce() -> Result<R>,
) -> R {
    ffi_boundary(name, || match body() {
        Ok(value) => value,
        Err(error) => report(error),
    })
}

/// The error path of [`ffi_boundary_result`], out of line so that the success path keeps no
/// state for it.
#[cold]
#[inline(never)]
fn report<R: FailureValue>(error: Error) -> R {
    R::report(error)
}

/// [`ffi_boundary_result`] for the common C status convention: `0` on success, `-1` with the
/// error raised on error or panic.
#[inline]
pub fn ffi_status(name: &'static str, body: impl FnOnce() -> Result<()>) -> c_int {
    ffi_boundary_result(name, || body().map(|()| 0))
}

thread_local! {
    /// Whether this thread is reporting a panic: a panic inside the report (which calls back
    /// into boundaries) is then not reported again, so the failure handling cannot recurse.
    static REPORTING: Cell<bool> = const { Cell::new(false) };
}

/// The failure path of [`ffi_boundary`].
#[cold]
#[inline(never)]
fn on_panic<R: FailureValue>(name: &'static str, payload: Box<dyn PanicPayload + Send>) -> R {
    let nested = REPORTING
        .try_with(|flag| flag.replace(true))
        .unwrap_or(true);
    let reported = if nested {
        None
    } else {
        let report = catch_unwind(AssertUnwindSafe(|| {
            let error = Error::new(
                ErrorKind::InternalError,
                format!("panic in {name}: {}", panic_message(payload.as_ref())),
            );
            R::report(error)
        }));
        let _ = REPORTING.try_with(|flag| flag.set(false));
        report.map_err(drop_payload).ok()
    };
    drop_payload(payload);
    reported.unwrap_or_else(|| {
        catch_unwind(R::failure).unwrap_or_else(|payload| {
            std::mem::forget(payload);
            std::process::abort()
        })
    })
}

/// The text of a panic payload (`panic!` with a literal or a formatted message).
fn panic_message(payload: &(dyn PanicPayload + Send)) -> &str {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text
    } else {
        "panic with a non-string payload"
    }
}

/// Drops a panic payload, whose own destructor may panic: that second payload is leaked.
fn drop_payload(payload: Box<dyn PanicPayload + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}

#[cfg(feature = "panic-injection")]
pub use injection::{inject_panic, take_injected_panic};

/// Test support: a panic at the entry of a chosen boundary.
#[cfg(feature = "panic-injection")]
mod injection {
    use std::cell::Cell;

    thread_local! {
        static ARMED: Cell<Option<&'static str>> = const { Cell::new(None) };
    }

    /// Makes the next [`ffi_boundary`](super::ffi_boundary) named `name` on the calling thread
    /// panic as soon as it is entered (once), with the message `injected panic in <name>`.
    pub fn inject_panic(name: &'static str) {
        ARMED.with(|armed| armed.set(Some(name)));
    }

    /// Disarms the calling thread: the name of a boundary armed by [`inject_panic`] that has
    /// not been entered since, if any.
    pub fn take_injected_panic() -> Option<&'static str> {
        ARMED.with(Cell::take)
    }

    /// Panics if `name` is armed on this thread, disarming it first.
    pub(super) fn fire(name: &'static str) {
        if ARMED.with(Cell::get) == Some(name) {
            ARMED.with(|armed| armed.set(None));
            panic!("injected panic in {name}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_passes_the_value_through() {
        assert_eq!(ffi_boundary("test.value", || 7), 7);
        assert_eq!(ffi_status("test.status", || Ok(())), 0);
        assert!(Error::take_raised().is_none());
    }

    #[test]
    fn errors_are_raised_with_the_failure_value() {
        let rc = ffi_status("test.error", || {
            Err(Error::new(ErrorKind::KeyError, "no such key"))
        });
        assert_eq!(rc, -1);
        let err = Error::take_raised().expect("raised");
        assert_eq!(err.kind(), "KeyError");
    }

    #[test]
    fn panics_become_internal_errors_naming_the_boundary() {
        let ptr: *const u8 = ffi_boundary("test.pointer", || panic!("boom {}", 42));
        assert!(ptr.is_null());
        let err = Error::take_raised().expect("raised");
        assert_eq!(err.kind(), "InternalError");
        assert_eq!(err.message(), "panic in test.pointer: boom 42");

        let none: Option<fn()> = ffi_boundary("test.option", || panic!("static text"));
        assert!(none.is_none());
        let err = Error::take_raised().expect("raised");
        assert_eq!(err.message(), "panic in test.option: static text");
    }

    #[test]
    fn a_panicking_payload_destructor_is_contained() {
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("payload destructor");
            }
        }
        let rc: c_int = ffi_boundary("test.bomb", || std::panic::panic_any(Bomb));
        assert_eq!(rc, -1);
        let err = Error::take_raised().expect("raised");
        assert_eq!(
            err.message(),
            "panic in test.bomb: panic with a non-string payload"
        );
    }

    #[test]
    fn a_panicking_report_still_returns_the_failure_value() {
        struct Noisy(u8);
        impl FailureValue for Noisy {
            fn failure() -> Noisy {
                Noisy(1)
            }
            fn report(_: Error) -> Noisy {
                panic!("report failed");
            }
        }
        let value = ffi_boundary("test.noisy", || -> Noisy { panic!("first") });
        assert_eq!(value.0, 1);
    }
}
