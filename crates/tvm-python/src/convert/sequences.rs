//! Python lists, tuples and dicts as runtime containers: a list or tuple becomes an `Array`, a
//! dict a `Map` (in its order), each element converted like an argument.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tvm_ffi::abi::TVMFFIAny;
use tvm_ffi::{Any, Array, Map};

use super::{Temporaries, keep, py_to_any};

/// One level of container nesting, counted against the interpreter's recursion limit: a list
/// that contains itself (or nesting deeper than the limit) is a `RecursionError`, not a crash.
struct NestingGuard(());

impl NestingGuard {
    /// Enters one more level of nesting, or the `RecursionError` of a level too deep.
    fn enter(py: Python<'_>) -> PyResult<NestingGuard> {
        crate::stack::check("while converting a nested container")?;
        // SAFETY: the GIL is held; a non-zero result comes with a RecursionError set.
        if unsafe { ffi::Py_EnterRecursiveCall(c" while converting a nested container".as_ptr()) }
            != 0
        {
            return Err(PyErr::fetch(py));
        }
        Ok(NestingGuard(()))
    }
}

impl Drop for NestingGuard {
    fn drop(&mut self) {
        // SAFETY: pairs with the successful `Py_EnterRecursiveCall` of `enter`.
        unsafe { ffi::Py_LeaveRecursiveCall() };
    }
}

/// A list or tuple (or a subclass) as an array of its converted items.
pub(super) fn array(obj: &Bound<'_, PyAny>, temps: &mut Temporaries) -> PyResult<TVMFFIAny> {
    let _nesting = NestingGuard::enter(obj.py())?;
    // `len()` is only a hint: a subclass may lie about it (and a huge reservation would abort).
    let mut values = Vec::with_capacity(obj.len().unwrap_or(0).min(1 << 12));
    for item in obj.try_iter()? {
        values.push(py_to_any(&item?)?);
    }
    Ok(keep(temps, Array::from_vec(values).into()))
}

/// A dict (or a subclass) as a map of its converted items, keeping its order.
pub(super) fn map(dict: &Bound<'_, PyDict>, temps: &mut Temporaries) -> PyResult<TVMFFIAny> {
    Ok(keep(temps, dict_to_map(dict)?))
}

/// Converts a Python dict into a `Map`, keeping its order.
fn dict_to_map(dict: &Bound<'_, PyDict>) -> PyResult<Any> {
    let _nesting = NestingGuard::enter(dict.py())?;
    // A dict's length is its number of entries: the table is sized once, nothing is rehashed.
    let mut map = Map::with_capacity(dict.len());
    for (k, v) in dict.iter() {
        map.insert(py_to_any(&k)?, py_to_any(&v)?);
    }
    Ok(map.into())
}
