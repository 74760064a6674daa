//! The native stack as a limit of its own: with a raised recursion limit, deep nesting (a list
//! in a list ...) or recursion through callbacks can exhaust the thread's native stack long
//! before the interpreter's counter says so. The places where the glue can recurse check the
//! room left ([`tvm_ffi::stack`]) and raise `RecursionError` instead of crashing: a Python
//! callback entered from native code (every cycle between Python and native calls passes one),
//! the general call path (its conversions may run Python code) and nested conversions.

use pyo3::exceptions::PyRecursionError;
use pyo3::prelude::*;

/// A `RecursionError` naming `what` if the native stack is nearly exhausted.
#[inline]
pub(crate) fn check(what: &str) -> PyResult<()> {
    if tvm_ffi::stack::nearly_full() {
        Err(exhausted(what))
    } else {
        Ok(())
    }
}

/// Room a callback needs below itself: half of what native recursive walks keep free for the
/// callbacks and errors below them ([`tvm_ffi::stack::RESERVE`]), so that a walk calling back
/// into Python meets its own, clearer limit ("nested too deeply") first.
const CALLBACK_RESERVE: usize = tvm_ffi::stack::RESERVE / 2;

/// [`check`] for a callback, whose native caller gets a runtime error (raised in Python as
/// `RecursionError`).
#[inline]
pub(crate) fn check_in_callback(what: &str) -> tvm_ffi::Result<()> {
    if tvm_ffi::stack::remaining().is_some_and(|left| left < CALLBACK_RESERVE) {
        Err(exhausted_error(what))
    } else {
        Ok(())
    }
}

/// The error of [`check`], out of line so that the check itself stays small.
#[cold]
#[inline(never)]
fn exhausted(what: &str) -> PyErr {
    PyRecursionError::new_err(exhausted_message(what))
}

/// The error of [`check_in_callback`].
#[cold]
#[inline(never)]
fn exhausted_error(what: &str) -> tvm_ffi::Error {
    tvm_ffi::Error::new("RecursionError", exhausted_message(what))
}

fn exhausted_message(what: &str) -> String {
    format!("maximum native recursion depth exceeded {what} (the thread's stack is nearly full)")
}
