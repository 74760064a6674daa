//! Data types in Python: `tvm.ffi.dtype` is a `str` subclass defined in Python that caches the
//! parsed DLPack data type; this module parses, prints and recognises it.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use tvm_ffi::abi::DLDataType;
use tvm_ffi::dtype::{dtype_to_string, parse_dtype};

/// The Python `dtype` class, registered at import.
static DTYPE_CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn pack(t: DLDataType) -> u32 {
    u32::from(t.code) | (u32::from(t.bits) << 8) | (u32::from(t.lanes) << 16)
}

fn unpack(v: u32) -> DLDataType {
    DLDataType {
        code: (v & 0xFF) as u8,
        bits: ((v >> 8) & 0xFF) as u8,
        lanes: (v >> 16) as u16,
    }
}

/// Registers the Python `dtype` class.
#[pyfunction]
pub(crate) fn _register_dtype_class(py: Python<'_>, cls: Py<PyType>) -> PyResult<()> {
    DTYPE_CLASS
        .set(py, cls)
        .map_err(|_| PyValueError::new_err("dtype class already registered"))
}

/// Parses a dtype string into `(canonical text, packed code/bits/lanes)`; a `ValueError` names
/// the text.
#[pyfunction]
pub(crate) fn _parse_dtype(text: &str) -> PyResult<(String, u32)> {
    let t = parse_dtype(text).map_err(PyValueError::new_err)?;
    Ok((dtype_to_string(t), pack(t)))
}

/// The data type of a `dtype` instance, or `None` for other objects.
pub(crate) fn dtype_of(obj: &Bound<'_, PyAny>) -> PyResult<Option<DLDataType>> {
    let Some(cls) = DTYPE_CLASS.get(obj.py()) else {
        return Ok(None);
    };
    if !obj.is_instance(cls.bind(obj.py()))? {
        return Ok(None);
    }
    let packed: u32 = obj.getattr(pyo3::intern!(obj.py(), "_packed"))?.extract()?;
    Ok(Some(unpack(packed)))
}

/// A `dtype` instance for a data type (a plain `str` before the class is registered).
pub(crate) fn make_dtype(py: Python<'_>, t: DLDataType) -> PyResult<Py<PyAny>> {
    let text = dtype_to_string(t);
    match DTYPE_CLASS.get(py) {
        Some(cls) => Ok(cls
            .bind(py)
            .call_method1("_from_parsed", (text, pack(t)))?
            .unbind()),
        None => Ok(text.into_pyobject(py)?.into_any().unbind()),
    }
}

/// The data type a Python argument names: a `dtype` instance or a dtype string; a `TypeError`
/// or `ValueError` naming anything else.
pub(crate) fn dtype_arg(obj: &Bound<'_, PyAny>) -> PyResult<tvm_ffi::DataType> {
    if let Some(t) = dtype_of(obj)? {
        return Ok(tvm_ffi::DataType(t));
    }
    let text: String = obj.extract().map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "dtype must be a str or tvm.ffi.dtype, got {}",
            obj.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    })?;
    parse_dtype(&text)
        .map(tvm_ffi::DataType)
        .map_err(PyValueError::new_err)
}
