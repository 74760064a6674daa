//! Python callables as runtime functions.

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tvm_ffi::{Any, AnyView, Function};

use crate::convert::{any_to_py, py_to_any};
use crate::errors::error_from_py;

/// Wraps a Python callable: arguments become Python objects, the result comes back owned, and an
/// exception becomes an error that carries it.
pub(crate) fn callable_to_function(callable: &Bound<'_, PyAny>) -> PyResult<Function> {
    let callable = Released(Some(callable.clone().unbind()));
    Ok(Function::from_packed(move |args: &[AnyView<'_>]| {
        crate::holder::check_callback_thread("a Python callback")
            .map_err(|message| tvm_ffi::Error::new(tvm_ffi::ErrorKind::RuntimeError, message))?;
        let outcome = Python::try_attach(|py| {
            let _python = crate::holder::Holding::run_python();
            let call = || -> PyResult<Any> {
                let mut items = Vec::with_capacity(args.len());
                for arg in args {
                    let owned = arg
                        .try_to_owned()
                        .map_err(|e| crate::errors::raise_error(py, e))?;
                    items.push(any_to_py(py, owned)?);
                }
                let args = PyTuple::new(py, items)?;
                let result = callable.get().bind(py).call1(args)?;
                py_to_any(&result)
            };
            call().map_err(|err| error_from_py(py, err))
        });
        // A callback reached while the interpreter shuts down (from a native finalizer, say)
        // cannot run; it fails quietly instead of aborting the process.
        outcome.unwrap_or_else(|| {
            Err(tvm_ffi::Error::with_backtrace(
                tvm_ffi::ErrorKind::RuntimeError,
                "a Python callback was called while the interpreter is shutting down",
                "",
            ))
        })
    }))
}

/// A Python object owned by native code, released as soon as the native owner lets go: on any
/// thread, attached for the moment of the release (a plain `Py` dropped where PyO3 does not know
/// the thread is attached would wait in PyO3's queue until its next entry).
struct Released(Option<Py<PyAny>>);

impl Released {
    fn get(&self) -> &Py<PyAny> {
        self.0.as_ref().expect("present until dropped")
    }
}

impl Drop for Released {
    fn drop(&mut self) {
        if let Some(object) = self.0.take() {
            // After the interpreter has shut down the object is gone with it.
            let _ = Python::try_attach(move |_py| drop(object));
        }
    }
}
