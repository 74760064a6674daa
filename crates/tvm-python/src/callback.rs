//! Python callables as runtime functions.

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tvm_ffi::{Any, AnyView, Function};

use crate::convert::{any_to_py, py_to_any};
use crate::errors::error_from_py;

/// Wraps a Python callable: arguments become Python objects, the result comes back owned, and an
/// exception becomes an error that carries it.
pub(crate) fn callable_to_function(callable: &Bound<'_, PyAny>) -> PyResult<Function> {
    let callable = callable.clone().unbind();
    Ok(Function::from_packed(move |args: &[AnyView<'_>]| {
        let outcome = Python::try_attach(|py| {
            let call = || -> PyResult<Any> {
                let mut items = Vec::with_capacity(args.len());
                for arg in args {
                    let owned = arg
                        .try_to_owned()
                        .map_err(|e| crate::errors::raise_error(py, e))?;
                    items.push(any_to_py(py, owned)?);
                }
                let args = PyTuple::new(py, items)?;
                let result = callable.bind(py).call1(args)?;
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
