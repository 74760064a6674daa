//! Keyword arguments of the vectorcall entries (`from_dlpack`, `Tensor.__dlpack__`), matched
//! without PyO3's argument extraction, which costs more than these calls' own work.

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyString;

/// Whether keyword `name` (from a call's keyword names) is `expected` by content.
fn same_text(name: *mut ffi::PyObject, expected: &Bound<'_, PyString>) -> bool {
    // SAFETY: `name` is a live str; the comparison sets no error.
    unsafe { ffi::PyUnicode_Compare(name, expected.as_ptr()) == 0 }
}

/// The values of a call's keyword arguments, in the order of `names`: `None` for one not given,
/// a `TypeError` naming `function` for a keyword not among `names`. The values are borrowed from
/// the call (no reference counting: the caller holds them for its duration).
///
/// # Safety
/// As the interpreter calls a `METH_FASTCALL | METH_KEYWORDS` function: `kwnames` is null or a
/// tuple of str whose values follow the `nargs` positional ones in `args`, alive for `'a`; the
/// lock is held.
pub(super) unsafe fn keyword_arguments<'a, 'py, const N: usize>(
    py: Python<'py>,
    function: &str,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
    names: [&Bound<'py, PyString>; N],
) -> PyResult<[Option<Borrowed<'a, 'py, PyAny>>; N]> {
    let mut values = [const { None }; N];
    if kwnames.is_null() {
        return Ok(values);
    }
    // SAFETY: a tuple, per the contract.
    let count = unsafe { ffi::PyTuple_Size(kwnames) };
    for i in 0..count.max(0) {
        // SAFETY: in range of both the names and the values.
        let (name, value) = unsafe {
            (
                ffi::PyTuple_GetItem(kwnames, i),
                Borrowed::from_ptr(py, *args.offset(nargs + i)),
            )
        };
        // Interned names (the usual case) match by address; others by content.
        let which = names
            .iter()
            .position(|n| n.as_ptr() == name)
            .or_else(|| names.iter().position(|n| same_text(name, n)));
        let Some(which) = which else {
            // SAFETY: a live str.
            let name = unsafe { Bound::from_borrowed_ptr(py, name) };
            return Err(PyTypeError::new_err(format!(
                "{function}() got an unexpected keyword argument {}",
                name.repr()?
            )));
        };
        values[which] = Some(value);
    }
    Ok(values)
}
