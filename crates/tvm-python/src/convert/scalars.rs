//! Python numbers, strings, bytes, dtypes and devices as runtime values: views of the Python
//! object wherever it outlives the call, inline values where they fit.

use pyo3::exceptions::PyOverflowError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyFloat, PyInt, PyString};
use tvm_ffi::abi::{self, TVMFFIAny, TVMFFIAnyPayload, TVMFFIByteArray};
use tvm_ffi::string::MAX_SMALL_LEN;

use super::{Temporaries, keep};
use crate::device::PyDevice;
use crate::errors::raise_error;

/// A value that owns nothing: a type index and its payload.
#[inline]
fn pod(type_index: i32, payload: TVMFFIAnyPayload) -> TVMFFIAny {
    TVMFFIAny {
        type_index,
        small_str_len: 0,
        payload,
    }
}

/// An `OverflowError` naming an int that does not fit in 64 bits.
fn overflow(obj: &Bound<'_, PyAny>) -> PyErr {
    let text = obj
        .str()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "?".into());
    PyOverflowError::new_err(format!("int {text} does not fit in 64 bits"))
}

/// An int value.
#[inline]
pub(super) fn int_value(value: i64) -> TVMFFIAny {
    pod(abi::kTVMFFIInt, TVMFFIAnyPayload { v_int64: value })
}

/// A float value.
#[inline]
pub(super) fn float_value(value: f64) -> TVMFFIAny {
    pod(abi::kTVMFFIFloat, TVMFFIAnyPayload { v_float64: value })
}

/// Reads an int (or any object with `__index__`) as i64, or an `OverflowError` naming the value.
#[inline]
fn i64_of(obj: &Bound<'_, PyAny>) -> PyResult<i64> {
    obj.extract::<i64>().map_err(|err| {
        if err.is_instance_of::<PyOverflowError>(obj.py()) {
            overflow(obj)
        } else {
            err
        }
    })
}

/// An `int` (or a subclass) as an int value.
#[inline]
pub(super) fn int(obj: &Bound<'_, PyInt>) -> PyResult<TVMFFIAny> {
    i64_of(obj.as_any()).map(int_value)
}

/// A `float` (or a subclass) as a float value.
#[inline]
pub(super) fn float(obj: &Bound<'_, PyFloat>) -> TVMFFIAny {
    float_value(obj.value())
}

/// A bool value.
#[inline]
pub(super) fn bool(value: bool) -> TVMFFIAny {
    pod(
        abi::kTVMFFIBool,
        TVMFFIAnyPayload {
            v_int64: i64::from(value),
        },
    )
}

/// A `str` (or a subclass) as a string value, as apache-tvm-ffi's binding passes it: inline up to
/// 7 bytes (`kTVMFFISmallStr`), a `String` object beyond (`kTVMFFIStr`), never a raw C string,
/// which a kernel written for apache-tvm-ffi rejects.
#[inline(always)]
pub(super) fn str(obj: &Bound<'_, PyString>, temps: &mut Temporaries) -> PyResult<TVMFFIAny> {
    let text = match obj.to_str() {
        Ok(text) => text,
        Err(err) => return escaped_str(obj, temps, err),
    };
    let value = tvm_ffi::String::try_new(text).map_err(|err| raise_error(obj.py(), err))?;
    Ok(keep(temps, value.into_any()))
}

/// A `str` that is not valid UTF-8: text that native code returned as bytes that are not UTF-8
/// arrives in Python with surrogate escapes, and goes back as those same bytes. Any other lone
/// surrogate keeps its `UnicodeEncodeError`.
#[cold]
fn escaped_str(
    obj: &Bound<'_, PyString>,
    temps: &mut Temporaries,
    err: PyErr,
) -> PyResult<TVMFFIAny> {
    let py = obj.py();
    let escape = pyo3::intern!(py, "surrogateescape");
    let Ok(encoded) = obj.call_method1(pyo3::intern!(py, "encode"), ("utf-8", escape)) else {
        return Err(err);
    };
    let bytes = encoded.cast::<PyBytes>()?;
    // Only escapes of bytes that are not UTF-8 come back as the same text: escapes that spell
    // valid UTF-8 ("\udcc3\udca9" is "é") would change the string, so they are refused.
    let decoded = bytes.call_method1(pyo3::intern!(py, "decode"), ("utf-8", escape))?;
    if !decoded.eq(obj)? {
        return Err(err);
    }
    let value =
        tvm_ffi::String::try_from_bytes(content(bytes)).map_err(|err| raise_error(py, err))?;
    Ok(keep(temps, value.into_any()))
}

/// The content of a `bytes` object, borrowed from it: one call into the interpreter, where
/// PyO3's `as_bytes` makes two under the limited API.
#[inline]
pub(super) fn content<'a>(obj: &'a Bound<'_, PyBytes>) -> &'a [u8] {
    let mut data = std::ptr::null_mut();
    let mut size: ffi::Py_ssize_t = 0;
    // SAFETY: a bytes object always yields its buffer (`size` bytes), which lives as long as the
    // object does.
    unsafe {
        ffi::PyBytes_AsStringAndSize(obj.as_ptr(), &mut data, &mut size);
        std::slice::from_raw_parts(data.cast::<u8>(), size as usize)
    }
}

/// The content of a `bytes` (or a subclass) as an inline small value, or as a view of the
/// object's buffer.
#[inline(always)]
pub(super) fn bytes(data: &[u8], temps: &mut Temporaries) -> TVMFFIAny {
    if data.len() <= MAX_SMALL_LEN {
        return keep(temps, tvm_ffi::Bytes::from_bytes(data).into_any());
    }
    bytes_view(data, temps)
}

/// Longer bytes as a view of the Python object's buffer, through a byte array kept in `temps`.
fn bytes_view(data: &[u8], temps: &mut Temporaries) -> TVMFFIAny {
    let array = Box::new(TVMFFIByteArray::from_bytes(data));
    let raw = pod(
        abi::kTVMFFIByteArrayPtr,
        TVMFFIAnyPayload {
            v_ptr: std::ptr::from_ref::<TVMFFIByteArray>(&array)
                .cast_mut()
                .cast(),
        },
    );
    temps.keep_byte_array(array);
    raw
}

/// A `bytearray`, copied (it may change while the call runs); a `MemoryError` when the copy
/// does not fit.
pub(super) fn byte_array(obj: &Bound<'_, PyAny>, temps: &mut Temporaries) -> PyResult<TVMFFIAny> {
    let array = obj.cast::<PyByteArray>()?;
    // SAFETY: the content is copied at once, with the interpreter lock held, so no Python code
    // runs that could resize the array meanwhile.
    let copy = tvm_ffi::Bytes::try_from_bytes(unsafe { array.as_bytes() })
        .map_err(|err| raise_error(obj.py(), err))?;
    Ok(keep(temps, copy.into()))
}

/// A `tvm.DataType` (or anything `dtype_of` recognizes) as a data type value.
pub(super) fn dtype(obj: &Bound<'_, PyAny>) -> PyResult<TVMFFIAny> {
    let dl = crate::dtype::dtype_of(obj)?.expect("classified as dtype");
    let mut payload = TVMFFIAnyPayload { v_uint64: 0 };
    payload.v_dtype = dl;
    Ok(pod(abi::kTVMFFIDataType, payload))
}

/// A `tvm.Device` as a device value.
pub(super) fn device(obj: &Bound<'_, PyDevice>) -> TVMFFIAny {
    pod(
        abi::kTVMFFIDevice,
        TVMFFIAnyPayload {
            v_device: obj.get().0,
        },
    )
}

/// An object with `__index__` as an int value.
pub(super) fn index(obj: &Bound<'_, PyAny>) -> PyResult<TVMFFIAny> {
    let index = obj.call_method0(pyo3::intern!(obj.py(), "__index__"))?;
    i64_of(&index).map(int_value)
}

/// A numpy bool scalar as a bool value.
pub(super) fn numpy_bool(obj: &Bound<'_, PyAny>) -> PyResult<TVMFFIAny> {
    Ok(bool(obj.is_truthy()?))
}

/// A numpy floating-point scalar as a float value.
pub(super) fn numpy_float(obj: &Bound<'_, PyAny>) -> PyResult<TVMFFIAny> {
    let value = obj.call_method0(pyo3::intern!(obj.py(), "__float__"))?;
    Ok(float_value(value.extract()?))
}
