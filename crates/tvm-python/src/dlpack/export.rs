//! DLPack export: `Tensor.__dlpack__` and the capsules it hands out, with the stream hand-off
//! of device tensors.

use std::ffi::c_void;

use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tvm_ffi::Tensor;
use tvm_ffi::abi::{self, DLManagedTensor, DLManagedTensorVersioned};

use super::keywords::keyword_arguments;
use super::{LEGACY, VERSIONED};
use crate::errors::{python_entry, raise_error};
use crate::tensor::PyTensor;

unsafe extern "C" fn release_versioned_capsule(capsule: *mut ffi::PyObject) {
    // SAFETY: the interpreter destroys capsules with the GIL held.
    let py = unsafe { Python::assume_attached() };
    python_entry(py, "the destructor of a dltensor_versioned capsule", || {
        // SAFETY: a capsule we made; only an unconsumed capsule still owns its managed tensor.
        unsafe {
            if ffi::PyCapsule_IsValid(capsule, VERSIONED.as_ptr()) == 1 {
                let managed = ffi::PyCapsule_GetPointer(capsule, VERSIONED.as_ptr())
                    .cast::<DLManagedTensorVersioned>();
                if let Some(deleter) = (*managed).deleter {
                    deleter(managed);
                }
            }
        }
        Ok(())
    })
}

unsafe extern "C" fn release_legacy_capsule(capsule: *mut ffi::PyObject) {
    // SAFETY: the interpreter destroys capsules with the GIL held.
    let py = unsafe { Python::assume_attached() };
    python_entry(py, "the destructor of a dltensor capsule", || {
        // SAFETY: as above, legacy form.
        unsafe {
            if ffi::PyCapsule_IsValid(capsule, LEGACY.as_ptr()) == 1 {
                let managed =
                    ffi::PyCapsule_GetPointer(capsule, LEGACY.as_ptr()).cast::<DLManagedTensor>();
                if let Some(deleter) = (*managed).deleter {
                    deleter(managed);
                }
            }
        }
        Ok(())
    })
}

/// Makes a device tensor's data safe to use on the consumer's `stream` (the `__dlpack__`
/// keyword), the DLPack stream hand-off: the consumer's stream waits for the work queued so far
/// on the producer's current stream (through an event where the backend has them; the host does
/// not wait). Without a stream, the producer's stream is synchronized. `-1` asks for no
/// ordering; CPU tensors have nothing to order.
fn order_for_consumer(
    py: Python<'_>,
    tensor: &Tensor,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let device = tensor.device();
    if device.device_type() == abi::kDLCPU {
        return Ok(());
    }
    if let Some(stream) = present(stream) {
        let stream: i64 = stream.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "__dlpack__ stream must be an int or None, got {}",
                stream.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        })?;
        if stream == -1 {
            return Ok(());
        }
        return crate::runtime_calls::sync_current_stream_to(device, stream as usize)
            .map_err(|err| raise_error(py, err));
    }
    crate::runtime_calls::sync_stream(device, None).map_err(|err| raise_error(py, err))
}

/// The DLPack capsule of `tensor` for a consumer's `__dlpack__` keywords.
pub(crate) fn export_capsule(
    py: Python<'_>,
    tensor: &Tensor,
    stream: Option<&Bound<'_, PyAny>>,
    max_version: Option<&Bound<'_, PyAny>>,
    dl_device: Option<&Bound<'_, PyAny>>,
    copy: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let max_version = present(max_version).map(major_version).transpose()?;
    let dl_device: Option<(i32, i32)> = present(dl_device).map(|v| v.extract()).transpose()?;
    let copy: Option<bool> = present(copy).map(|v| v.is_truthy()).transpose()?;
    if copy == Some(true) {
        return Err(PyBufferError::new_err(
            "this tensor can only be shared, not copied (copy=True)",
        ));
    }
    order_for_consumer(py, tensor, stream)?;
    if let Some(target) = dl_device {
        let device = tensor.device();
        let own = (device.device_type(), device.device_id());
        if target != own {
            return Err(PyBufferError::new_err(format!(
                "tensor lives on device {own:?}, cannot export to {target:?}"
            )));
        }
    }
    let versioned = max_version.is_some_and(|major| major >= 1);
    // SAFETY: a fresh export owned by the capsule until a consumer renames it.
    let capsule = unsafe {
        if versioned {
            let managed = tensor.to_dlpack_versioned();
            ffi::PyCapsule_New(
                managed.cast::<c_void>(),
                VERSIONED.as_ptr(),
                Some(release_versioned_capsule),
            )
        } else {
            if tensor.is_read_only() {
                return Err(PyBufferError::new_err(
                    "a read-only tensor needs a consumer that speaks DLPack 1.0 or later",
                ));
            }
            let managed = tensor.to_dlpack();
            ffi::PyCapsule_New(
                managed.cast::<c_void>(),
                LEGACY.as_ptr(),
                Some(release_legacy_capsule),
            )
        }
    };
    // SAFETY: a new reference, or NULL with the error set.
    Ok(unsafe { Bound::from_owned_ptr_or_err(py, capsule)? }.unbind())
}

/// The major version of a `max_version=(major, minor)` keyword, or a `TypeError`.
fn major_version(value: &Bound<'_, PyAny>) -> PyResult<i64> {
    let pair = value
        .cast::<PyTuple>()
        .ok()
        .filter(|t| t.len() == 2)
        .ok_or_else(|| {
            PyTypeError::new_err(format!(
                "max_version must be a (major, minor) tuple, got {value}"
            ))
        })?;
    pair.get_item(0)?.extract()
}

/// `Tensor.__dlpack__` as a vectorcall method: consumers pass three or four keywords on every
/// export, and PyO3's keyword matching costs more than the export itself.
unsafe extern "C" fn dlpack_vectorcall(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: the interpreter calls methods with the GIL held.
    let py = unsafe { Python::assume_attached() };
    python_entry(py, "Tensor.__dlpack__", || {
        if nargs > 0 {
            return Err(PyTypeError::new_err(
                "__dlpack__() takes keyword arguments only",
            ));
        }
        // SAFETY: `slf` is the live instance the method was called on.
        let slf = unsafe { Bound::from_borrowed_ptr(py, slf) };
        let this = slf.cast::<PyTensor>()?;
        let names = [
            pyo3::intern!(py, "max_version"),
            pyo3::intern!(py, "dl_device"),
            pyo3::intern!(py, "copy"),
            pyo3::intern!(py, "stream"),
        ];
        // SAFETY: the values follow the (no) positional ones, as the interpreter passes them.
        let [max_version, dl_device, copy, stream] =
            unsafe { keyword_arguments(py, "__dlpack__", args, nargs, kwnames, names)? };
        export_capsule(
            py,
            &this.get().0,
            stream.as_deref(),
            max_version.as_deref(),
            dl_device.as_deref(),
            copy.as_deref(),
        )
        .map(Py::into_ptr)
    })
}

/// Replaces `Tensor.__dlpack__` with [`dlpack_vectorcall`] (same behaviour, faster keywords).
pub(crate) fn install_fast_dlpack(tensor_type: &Bound<'_, pyo3::types::PyType>) -> PyResult<()> {
    let def = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: c"__dlpack__".as_ptr(),
        ml_meth: ffi::PyMethodDefPointer { PyCFunctionFastWithKeywords: dlpack_vectorcall },
        ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
        ml_doc: c"__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\nExports a DLPack capsule: versioned when the consumer asks for version 1 or later, legacy otherwise.".as_ptr(),
    }));
    // SAFETY: a live type and a method definition that lives for the process.
    let descr = unsafe { ffi::PyDescr_NewMethod(tensor_type.as_type_ptr(), def) };
    // SAFETY: a new reference or NULL with the error set.
    let descr = unsafe { Bound::from_owned_ptr_or_err(tensor_type.py(), descr)? };
    tensor_type.setattr("__dlpack__", descr)
}

/// A keyword argument that was given and is not None.
fn present<'a, 'py>(value: Option<&'a Bound<'py, PyAny>>) -> Option<&'a Bound<'py, PyAny>> {
    value.filter(|v| !v.is_none())
}
