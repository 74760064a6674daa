//! The native stack as a limit of its own: with a raised recursion limit, deep nesting (a list
//! in a list ...) or recursion through callbacks can exhaust the thread's native stack long
//! before the interpreter's counter says so. Entry points that recurse check the room left
//! ([`tvm_ffi::stack::remaining`]) and raise `RecursionError` instead of crashing.

use pyo3::exceptions::PyRecursionError;
use pyo3::prelude::*;

/// Room kept free: enough for one more level of conversion or call, the interpreter frames
/// between two levels, and the error path.
const RESERVE: usize = 256 << 10;

/// A `RecursionError` naming `what` if the native stack is nearly exhausted.
#[inline]
pub(crate) fn check(what: &str) -> PyResult<()> {
    match tvm_ffi::stack::remaining() {
        Some(room) if room < RESERVE => Err(exhausted(what)),
        _ => Ok(()),
    }
}

/// The error of [`check`], out of line so that the check itself stays small.
#[cold]
#[inline(never)]
fn exhausted(what: &str) -> PyErr {
    PyRecursionError::new_err(format!(
        "maximum native recursion depth exceeded {what} (the thread's stack is nearly full)"
    ))
}
