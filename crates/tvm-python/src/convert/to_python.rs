//! Runtime values as Python objects: numbers, strings and bytes as the built-in types, data
//! types and devices as their classes, opaque objects as the Python object they hold, errors as
//! exceptions, and objects in their registered class.

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes};
use tvm_ffi::abi;
use tvm_ffi::{Any, Function, OpaqueObj};

use crate::device::PyDevice;
use crate::errors::raise_error;
use crate::objects::wrap_object;

/// Converts a returned value into a Python object: None, ints and floats inline, the rest out
/// of line.
#[inline]
pub(crate) fn any_to_py(py: Python<'_>, value: Any) -> PyResult<Py<PyAny>> {
    let raw = *value.as_raw();
    // SAFETY: each arm reads the payload member its type index selects.
    unsafe {
        match raw.type_index {
            abi::kTVMFFINone => Ok(py.None()),
            abi::kTVMFFIInt => Ok(raw.payload.v_int64.into_pyobject(py)?.into_any().unbind()),
            abi::kTVMFFIFloat => Ok(raw.payload.v_float64.into_pyobject(py)?.into_any().unbind()),
            _ => any_to_py_other(py, value),
        }
    }
}

/// [`any_to_py`] for the other types.
fn any_to_py_other(py: Python<'_>, value: Any) -> PyResult<Py<PyAny>> {
    let raw = *value.as_raw();
    // SAFETY: each arm reads the payload member its type index selects.
    unsafe {
        match raw.type_index {
            abi::kTVMFFINone => Ok(py.None()),
            abi::kTVMFFIInt => Ok(raw.payload.v_int64.into_pyobject(py)?.into_any().unbind()),
            abi::kTVMFFIBool => Ok(PyBool::new(py, raw.payload.v_int64 != 0)
                .to_owned()
                .into_any()
                .unbind()),
            abi::kTVMFFIFloat => Ok(raw.payload.v_float64.into_pyobject(py)?.into_any().unbind()),
            abi::kTVMFFISmallStr | abi::kTVMFFIStr => {
                let bytes = tvm_ffi::string::bytes_of_any(&value).unwrap_or_default();
                // One decoding pass; bytes that are not UTF-8 survive as surrogate escapes.
                let text = ffi::PyUnicode_DecodeUTF8(
                    bytes.as_ptr().cast(),
                    bytes.len() as ffi::Py_ssize_t,
                    c"surrogateescape".as_ptr(),
                );
                Ok(Bound::from_owned_ptr_or_err(py, text)?.unbind())
            }
            abi::kTVMFFISmallBytes | abi::kTVMFFIBytes => {
                let bytes = tvm_ffi::string::bytes_of_any(&value).unwrap_or_default();
                Ok(PyBytes::new(py, bytes).into_any().unbind())
            }
            abi::kTVMFFIDataType => crate::dtype::make_dtype(py, raw.payload.v_dtype),
            abi::kTVMFFIDevice => Ok(Py::new(py, PyDevice(raw.payload.v_device))?.into_any()),
            abi::kTVMFFIDLTensorPtr if !raw.payload.v_ptr.is_null() => {
                borrowed_dltensor(py, raw.payload.v_ptr.cast())
            }
            abi::kTVMFFIOpaquePtr | abi::kTVMFFIDLTensorPtr => {
                let ctypes = py.import("ctypes")?;
                Ok(ctypes
                    .getattr("c_void_p")?
                    .call1((raw.payload.v_ptr as usize,))?
                    .unbind())
            }
            abi::kTVMFFIOpaquePyObject => match value.as_object::<OpaqueObj>() {
                Some(opaque) => Ok(crate::opaque::opaque_object(py, opaque).unbind()),
                None => Ok(py.None()),
            },
            abi::kTVMFFIFunction => {
                let f = value.cast::<Function>().map_err(|e| raise_error(py, e))?;
                crate::function_type::wrap(py, f)
            }
            abi::kTVMFFIError => {
                let err = value
                    .cast::<tvm_ffi::Error>()
                    .map_err(|e| raise_error(py, e))?;
                Ok(raise_error(py, err).into_value(py).into_any())
            }
            index if index >= abi::kTVMFFIStaticObjectBegin => {
                crate::containers::wrap_builtin(py, value)
                    .unwrap_or_else(|value| wrap_object(py, value))
            }
            other => Err(PyTypeError::new_err(format!(
                "cannot convert a value of type index {other}"
            ))),
        }
    }
}

/// A `DLTensor*` argument (what compiled code passes to a packed call) as a tensor viewing the
/// caller's memory, as Apache TVM FFI presents it: the view owns nothing, so it is valid only
/// while the call that received it runs.
///
/// # Safety
/// `tensor` points at a valid descriptor for the duration of the call.
unsafe fn borrowed_dltensor(py: Python<'_>, tensor: *const abi::DLTensor) -> PyResult<Py<PyAny>> {
    // SAFETY: per the contract.
    let descriptor = unsafe { &*tensor };
    let ndim = usize::try_from(descriptor.ndim).unwrap_or(0);
    let shape: &[i64] = if ndim == 0 || descriptor.shape.is_null() {
        &[]
    } else {
        // SAFETY: a valid descriptor has `ndim` dimensions.
        unsafe { std::slice::from_raw_parts(descriptor.shape, ndim) }
    };
    let strides: Vec<i64> = if descriptor.strides.is_null() {
        tvm_ffi::tensor::compact_strides(shape)
    } else {
        // SAFETY: as for the shape.
        unsafe { std::slice::from_raw_parts(descriptor.strides, ndim) }.to_vec()
    };
    let prototype = abi::DLTensor {
        strides: strides.as_ptr().cast_mut(),
        ..*descriptor
    };
    // SAFETY: the prototype is the caller's descriptor with explicit strides; the memory it
    // describes stays valid during the call (the view keeps nothing alive).
    let view = unsafe { tvm_ffi::Tensor::view_of(Any::none(), &prototype) }
        .map_err(|e| raise_error(py, e))?;
    any_to_py(py, Any::from(view))
}
