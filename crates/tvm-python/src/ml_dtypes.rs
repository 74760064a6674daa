//! numpy arrays of the `ml_dtypes` element types (bfloat16, the float8 family): numpy cannot
//! pass them through DLPack or the buffer protocol, so they cross as unsigned integers of the
//! same size and the tensor is retagged with its real type (no copy either way).

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use tvm_ffi::abi::{kDLBool, kDLComplex, kDLFloat, kDLInt, kDLOpaqueHandle, kDLUInt};
use tvm_ffi::{DataType, Tensor};

use crate::errors::raise_error;

/// The tensor of numpy array `obj` if its element type comes from `ml_dtypes`; None otherwise.
pub(crate) fn import_array(
    obj: &Bound<'_, PyAny>,
    import_bits: impl FnOnce(&Bound<'_, PyAny>) -> PyResult<Tensor>,
) -> PyResult<Option<Tensor>> {
    let py = obj.py();
    let dtype = obj.getattr(pyo3::intern!(py, "dtype"))?;
    let scalar_type = dtype.getattr(pyo3::intern!(py, "type"))?;
    let module = scalar_type.getattr(pyo3::intern!(py, "__module__"))?;
    if module.extract::<&str>().ok() != Some("ml_dtypes") {
        return Ok(None);
    }
    let name: String = dtype.getattr(pyo3::intern!(py, "name"))?.extract()?;
    let itemsize: usize = dtype.getattr(pyo3::intern!(py, "itemsize"))?.extract()?;
    let target: DataType = name.parse().map_err(|_| {
        PyTypeError::new_err(format!(
            "numpy dtype {name} (ml_dtypes) has no tensor dtype"
        ))
    })?;
    if usize::from(target.bits()) != itemsize * 8 {
        return Err(PyTypeError::new_err(format!(
            "numpy dtype {name} (ml_dtypes) stores {}-bit values in {itemsize}-byte elements, \
             which a tensor cannot share",
            target.bits()
        )));
    }
    let bits = obj.call_method1(
        pyo3::intern!(py, "view"),
        (format!("uint{}", itemsize * 8),),
    )?;
    let tensor = import_bits(&bits)?;
    tensor
        .with_dtype(target)
        .map(Some)
        .map_err(|err| raise_error(py, err))
}

/// Whether numpy needs `ml_dtypes` for elements of `dtype` (a bfloat16 or float8 tensor).
pub(crate) fn needs_ml_dtypes(dtype: DataType) -> bool {
    let native = [
        kDLInt,
        kDLUInt,
        kDLFloat,
        kDLOpaqueHandle,
        kDLComplex,
        kDLBool,
    ];
    dtype.lanes() == 1 && !native.contains(&dtype.code())
}

/// `tensor` (on the CPU) as a numpy array of its `ml_dtypes` element type, sharing memory.
pub(crate) fn export_array<'py>(
    py: Python<'py>,
    tensor: &Tensor,
    export_bits: impl FnOnce(Tensor) -> PyResult<Bound<'py, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let dtype = tensor.dtype();
    let name = dtype.to_string();
    let element = py
        .import("ml_dtypes")
        .and_then(|module| module.getattr(name.as_str()))
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "a {name} tensor becomes a numpy array through ml_dtypes, which is not \
                 installed or has no {name} (pip install ml_dtypes)"
            ))
        })?;
    let bits = tensor
        .with_dtype(DataType::uint(dtype.bits()))
        .map_err(|err| raise_error(py, err))?;
    Ok(export_bits(bits)?
        .call_method1(pyo3::intern!(py, "view"), (element,))?
        .unbind())
}
