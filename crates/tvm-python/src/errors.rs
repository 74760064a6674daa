//! Errors across the Python boundary: a runtime error becomes the Python exception registered for
//! its kind (with the native frames in its traceback), and a Python exception raised in a
//! callback becomes a runtime error that carries the original exception, so that it comes back
//! out of native frames as the same object.

use std::ffi::c_int;

use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;
use tvm_ffi::boundary::{FailureValue, ffi_boundary};
use tvm_ffi::{Error, ErrorKind, OpaqueObj};

/// Python helpers installed by `tvm.error`: `(to_python, from_python)`.
static HOOKS: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

/// Installs the Python side of error conversion.
///
/// `to_python(kind, message, backtrace, original)` returns the exception to raise;
/// `from_python(exc)` returns `(kind, message)` for a Python exception.
#[pyfunction]
pub(crate) fn _set_error_hooks(
    py: Python<'_>,
    to_python: Py<PyAny>,
    from_python: Py<PyAny>,
) -> PyResult<()> {
    HOOKS
        .set(py, (to_python, from_python))
        .map_err(|_| PyRuntimeError::new_err("error hooks are already installed"))
}

/// The return value of a raw CPython entry point (a slot, a vectorcall, a capsule destructor:
/// functions the interpreter calls with the GIL held), as a [`FailureValue`] of the one panic
/// boundary: after a failure the error is handed to the interpreter the way `T` reports it.
pub(crate) struct PyReturn<T>(pub(crate) T);

/// The raw return kinds of CPython entry points.
pub(crate) trait PyFailure: Sized {
    /// The value that signals failure.
    const FAILED: Self;
    /// Hands `err` to the interpreter: the error indicator for a function that returns a
    /// failure value, `sys.unraisablehook` for one that cannot (a destructor).
    fn hand_over(py: Python<'_>, err: PyErr);
}

/// An object: NULL with the error set.
impl PyFailure for *mut ffi::PyObject {
    const FAILED: Self = std::ptr::null_mut();
    fn hand_over(py: Python<'_>, err: PyErr) {
        err.restore(py);
    }
}

/// A status: `-1` with the error set.
impl PyFailure for c_int {
    const FAILED: Self = -1;
    fn hand_over(py: Python<'_>, err: PyErr) {
        err.restore(py);
    }
}

/// Nothing (a destructor): the error goes to `sys.unraisablehook`.
impl PyFailure for () {
    const FAILED: Self = ();
    fn hand_over(py: Python<'_>, err: PyErr) {
        err.write_unraisable(py, None);
    }
}

/// After a panic: the runtime's `InternalError` (a `RuntimeError`) naming the entry point.
impl<T: PyFailure> FailureValue for PyReturn<T> {
    fn failure() -> Self {
        PyReturn(T::FAILED)
    }

    fn report(error: Error) -> Self {
        Python::attach(|py| T::hand_over(py, raise_error(py, error)));
        Self::failure()
    }
}

/// Runs the whole body of a raw CPython entry point through the one panic boundary
/// ([`ffi_boundary`]): its value, or `R`'s failure value with the error handed to the
/// interpreter; a panic becomes an `InternalError` naming `what` instead of unwinding into the
/// interpreter.
#[inline]
pub(crate) fn python_entry<R: PyFailure>(
    py: Python<'_>,
    what: &'static str,
    body: impl FnOnce() -> PyResult<R>,
) -> R {
    ffi_boundary(what, || match body() {
        Ok(value) => PyReturn(value),
        Err(err) => {
            R::hand_over(py, err);
            PyReturn(R::FAILED)
        }
    })
    .0
}

/// The name of `obj`'s type, for messages (empty if it cannot be read).
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|name| name.to_string())
        .unwrap_or_default()
}

/// The Python exception carried in an error's extra context, if any.
fn original_exception<'py>(py: Python<'py>, err: &Error) -> Option<Bound<'py, PyAny>> {
    let context = err.extra_context()?;
    let obj = crate::opaque::opaque_object(py, context.as_object::<OpaqueObj>()?);
    obj.is_instance_of::<pyo3::exceptions::PyBaseException>()
        .then_some(obj)
}

/// The Python exception for a runtime error.
pub(crate) fn raise_error(py: Python<'_>, err: Error) -> PyErr {
    if err.is_kind("EnvErrorAlreadySet")
        && let Some(pending) = PyErr::take(py)
    {
        return pending;
    }
    let original = original_exception(py, &err);
    let Some((to_python, _)) = HOOKS.get(py) else {
        return PyRuntimeError::new_err(format!("{}: {}", err.kind(), err.message()));
    };
    let args = (
        err.kind().into_owned(),
        err.message().into_owned(),
        err.backtrace().into_owned(),
        original,
    );
    // The hook is Python code run from a native frame (the call that failed), as a callback is.
    let _counted = crate::exit_gate::enter_callback();
    match to_python.bind(py).call1(args) {
        Ok(exc) => PyErr::from_value(exc),
        Err(hook_error) => hook_error,
    }
}

/// A runtime error for a Python exception, carrying the exception itself.
pub(crate) fn error_from_py(py: Python<'_>, err: PyErr) -> Error {
    let exc = err.into_value(py).into_bound(py).into_any();
    let described = HOOKS.get(py).and_then(|(_, from_python)| {
        let _counted = crate::exit_gate::enter_callback();
        let parts = from_python.bind(py).call1((exc.clone(),)).ok()?;
        let parts = parts.cast::<PyTuple>().ok()?;
        parts.extract::<(String, String)>().ok()
    });
    let (kind, message) = described.unwrap_or_else(|| {
        let message = exc.str().map(|s| s.to_string()).unwrap_or_default();
        (ErrorKind::RuntimeError.as_str().to_owned(), message)
    });
    // The native frames between this callback and the Python caller further up.
    let backtrace = tvm_ffi::error::current_backtrace();
    let context = crate::opaque::opaque(&exc).unwrap_or_default();
    Error::with_extra_context(kind, message, &backtrace, context)
}
