//! Tensors in Python and the DLPack protocol both ways, without copies.

use std::ffi::{CStr, c_void};

use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple};
use tvm_ffi::Tensor;
use tvm_ffi::abi::{self, DLDataType, DLManagedTensor, DLManagedTensorVersioned};
use tvm_ffi::boundary::ffi_boundary;

use crate::errors::{python_entry, raise_error};
use crate::objects::new_wrapped;
use crate::tensor::PyTensor;

const VERSIONED: &CStr = c"dltensor_versioned";
const LEGACY: &CStr = c"dltensor";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";
const USED_LEGACY: &CStr = c"used_dltensor";

/// Imports a DLPack capsule, marking it consumed on success.
fn from_capsule(capsule: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let py = capsule.py();
    let ptr = capsule.as_ptr();
    // SAFETY: capsule calls on a live object; names are static NUL-terminated strings; the
    // imported tensor owns the managed struct only when the import succeeds.
    unsafe {
        if ffi::PyCapsule_IsValid(ptr, VERSIONED.as_ptr()) == 1 {
            let managed = ffi::PyCapsule_GetPointer(ptr, VERSIONED.as_ptr())
                .cast::<DLManagedTensorVersioned>();
            let tensor =
                Tensor::from_dlpack_versioned(managed, 0, false).map_err(|e| raise_error(py, e))?;
            ffi::PyCapsule_SetName(ptr, USED_VERSIONED.as_ptr());
            return Ok(tensor);
        }
        if ffi::PyCapsule_IsValid(ptr, LEGACY.as_ptr()) == 1 {
            let managed = ffi::PyCapsule_GetPointer(ptr, LEGACY.as_ptr()).cast::<DLManagedTensor>();
            let tensor = Tensor::from_dlpack(managed, 0, false).map_err(|e| raise_error(py, e))?;
            ffi::PyCapsule_SetName(ptr, USED_LEGACY.as_ptr());
            return Ok(tensor);
        }
    }
    Err(PyTypeError::new_err(format!(
        "expected an unconsumed DLPack capsule, got {}",
        capsule.repr()?
    )))
}

/// The DLPack data type of a buffer format string (native byte order only).
fn buffer_dtype(format: &[u8], itemsize: isize) -> Option<DLDataType> {
    let format = match format {
        [b'@' | b'=' | b'<', rest @ ..] if cfg!(target_endian = "little") => rest,
        [b'@' | b'=', rest @ ..] => rest,
        other => other,
    };
    let (code, bits) = match format {
        b"?" => (abi::kDLBool, 8),
        b"b" | b"h" | b"i" | b"l" | b"q" | b"n" => (abi::kDLInt, itemsize * 8),
        b"B" | b"H" | b"I" | b"L" | b"Q" | b"N" => (abi::kDLUInt, itemsize * 8),
        b"e" | b"f" | b"d" => (abi::kDLFloat, itemsize * 8),
        b"Zf" | b"Zd" => (abi::kDLComplex, itemsize * 8),
        _ => return None,
    };
    Some(DLDataType {
        code,
        bits: u8::try_from(bits).ok()?,
        lanes: 1,
    })
}

unsafe extern "C" fn release_buffer(ctx: *mut c_void) {
    ffi_boundary(
        "the buffer release of a tensor imported from Python",
        || {
            // After the interpreter has shut down the exporter is gone with it: nothing to release.
            let _ = Python::try_attach(|_py| {
                // SAFETY: `ctx` is the tensor's copy of the view filled by `PyObject_GetBuffer`,
                // released once.
                unsafe { ffi::PyBuffer_Release(ctx.cast::<ffi::Py_buffer>()) };
            });
        },
    )
}

/// Imports a numpy array through the buffer protocol: the same zero-copy view as DLPack (CPU
/// memory, shape, strides, read-only flag), without the producer's DLPack machinery. `None`
/// when the buffer does not describe a DLPack tensor (the caller then uses `__dlpack__`).
pub(crate) fn from_buffer(obj: &Bound<'_, PyAny>) -> Option<Tensor> {
    // SAFETY: a zeroed Py_buffer is what PyObject_GetBuffer expects to fill.
    let mut view: ffi::Py_buffer = unsafe { std::mem::zeroed() };
    // SAFETY: a live object and a writable view; on failure the error is cleared below.
    if unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), &mut view, ffi::PyBUF_RECORDS_RO) } != 0 {
        drop(PyErr::take(obj.py()));
        return None;
    }
    let release = |view: &mut ffi::Py_buffer| {
        // SAFETY: the view was filled above and is released once.
        unsafe { ffi::PyBuffer_Release(view) };
        None
    };
    let ndim = usize::try_from(view.ndim).unwrap_or(0);
    if ndim > MAX_BUFFER_DIMS {
        return release(&mut view);
    }
    // SAFETY: a filled view with RECORDS_RO has a format string and ndim shape/stride entries.
    let (format, shape, byte_strides) = unsafe {
        if view.format.is_null() || (ndim > 0 && (view.shape.is_null() || view.strides.is_null())) {
            return release(&mut view);
        }
        let dims = |ptr: *mut ffi::Py_ssize_t| -> &[i64] {
            if ndim == 0 {
                &[]
            } else {
                std::slice::from_raw_parts(ptr.cast::<i64>(), ndim)
            }
        };
        (
            CStr::from_ptr(view.format).to_bytes(),
            dims(view.shape),
            dims(view.strides),
        )
    };
    let Some(dtype) = buffer_dtype(format, view.itemsize) else {
        return release(&mut view);
    };
    let itemsize = view.itemsize as i64;
    if itemsize <= 0 || byte_strides.iter().any(|s| s % itemsize != 0) {
        return release(&mut view);
    }
    let mut strides = [0i64; MAX_BUFFER_DIMS];
    for (element, bytes) in strides.iter_mut().zip(byte_strides) {
        *element = bytes / itemsize;
    }
    let prototype = abi::DLTensor {
        data: view.buf,
        device: abi::DLDevice {
            device_type: abi::kDLCPU,
            device_id: 0,
        },
        ndim: ndim as i32,
        dtype,
        shape: shape.as_ptr().cast_mut(),
        strides: if ndim == 0 {
            std::ptr::null_mut()
        } else {
            strides.as_mut_ptr()
        },
        byte_offset: 0,
    };
    let read_only = view.readonly != 0;
    if releases_nothing(view.obj) {
        // Releasing such a view only drops its reference to the exporter: the tensor keeps that
        // reference alone (8 bytes instead of the 80 of the view), and the exporter keeps the
        // memory, shape and strides the view described for as long as it lives.
        let mut exporter = view.obj.cast::<c_void>();
        // SAFETY: as below; the record is the exporter's reference, dropped once.
        return unsafe {
            let record = std::slice::from_raw_parts_mut(
                (&raw mut exporter).cast::<u8>(),
                std::mem::size_of::<*mut c_void>(),
            );
            Tensor::from_foreign(&prototype, read_only, record, release_exporter).ok()
        };
    }
    // SAFETY: the view is plain data that may move (its exporter keeps its own state); the
    // tensor copies it and releases the copy once; on failure `from_foreign` releases it.
    unsafe {
        let record = std::slice::from_raw_parts_mut(
            (&raw mut view).cast::<u8>(),
            std::mem::size_of::<ffi::Py_buffer>(),
        );
        Tensor::from_foreign(&prototype, read_only, record, release_buffer).ok()
    }
}

/// Whether the exporter `obj` of a view does nothing when the view is released (its type has no
/// `bf_releasebuffer`, as numpy's `ndarray`), so that `PyBuffer_Release` is just a `Py_DECREF`.
fn releases_nothing(obj: *mut ffi::PyObject) -> bool {
    // SAFETY: `obj` is null or the live exporter a filled view holds a reference to; reading a
    // slot of a type is allowed for static types since Python 3.10.
    !obj.is_null()
        && unsafe { ffi::PyType_GetSlot(ffi::Py_TYPE(obj), ffi::Py_bf_releasebuffer) }.is_null()
}

unsafe extern "C" fn release_exporter(ctx: *mut c_void) {
    ffi_boundary(
        "the release of the exporter of a tensor imported from Python",
        || {
            // After the interpreter has shut down the exporter is gone with it: nothing to drop.
            let _ = Python::try_attach(|_py| {
                // SAFETY: `ctx` is the tensor's copy of the exporter pointer, a strong reference
                // taken from the view, dropped once.
                unsafe { ffi::Py_DecRef(*ctx.cast::<*mut ffi::PyObject>()) };
            });
        },
    )
}

/// Buffers with more dimensions go through `__dlpack__`.
const MAX_BUFFER_DIMS: usize = 16;

/// Whether `obj` is exactly a numpy array (whose buffer export matches its DLPack export).
pub(crate) fn is_numpy_array(obj: &Bound<'_, PyAny>) -> bool {
    static NDARRAY: PyOnceLock<usize> = PyOnceLock::new();
    let py = obj.py();
    let ty = obj.get_type_ptr() as usize;
    if let Some(ndarray) = NDARRAY.get(py) {
        return ty == *ndarray;
    }
    let ty_obj = obj.get_type();
    let is_ndarray =
        ty_obj.name().is_ok_and(|n| n == "ndarray") && ty_obj.module().is_ok_and(|m| m == "numpy");
    if is_ndarray {
        // The type object lives as long as numpy is loaded, which is the process.
        let _ = NDARRAY.set(py, ty);
    }
    is_ndarray
}

/// Imports any DLPack producer (an object with `__dlpack__`, or a capsule) without a copy.
pub(crate) fn from_dlpack_object(obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    if is_numpy_array(obj) {
        if let Some(tensor) = from_buffer(obj) {
            return Ok(tensor);
        }
        if let Some(tensor) = crate::ml_dtypes::import_array(obj, from_dlpack_object)? {
            return Ok(tensor);
        }
    }
    if let Ok(wrapped) = obj.cast::<PyTensor>() {
        return Ok(Tensor::clone(&wrapped.get().0));
    }
    from_producer(obj)
}

/// Imports a DLPack producer through its `__dlpack__` method (or a capsule) without a copy,
/// for a caller that already knows it is neither a numpy array nor a wrapped tensor.
pub(crate) fn from_producer(obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let py = obj.py();
    let Ok(method) = obj.getattr(pyo3::intern!(py, "__dlpack__")) else {
        // SAFETY: a type check of a live object.
        if unsafe { ffi::PyCapsule_CheckExact(obj.as_ptr()) } == 0 {
            let type_name = obj.get_type().name()?;
            return Err(PyTypeError::new_err(format!(
                "from_dlpack takes a DLPack producer (an object with __dlpack__: a numpy array, \
                 a torch tensor, a tvm Tensor...) or a DLPack capsule, got {type_name}: {}; \
                 tvm.runtime.tensor(...) copies Python data into a new tensor",
                obj.repr()?
            )));
        }
        return from_capsule(obj);
    };
    // One shared `max_version=(1, 3)` keyword dict: producers only read their keywords.
    static KWARGS: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
    let kwargs = KWARGS.get_or_try_init(py, || -> PyResult<Py<PyDict>> {
        let kwargs = PyDict::new(py);
        let version = (abi::DLPACK_MAJOR_VERSION, abi::DLPACK_MINOR_VERSION);
        kwargs.set_item("max_version", version)?;
        Ok(kwargs.unbind())
    })?;
    let capsule = match method.call((), Some(kwargs.bind(py))) {
        Ok(capsule) => capsule,
        Err(err) if err.is_instance_of::<PyTypeError>(py) => method.call0()?,
        Err(err) => return Err(err),
    };
    from_capsule(&capsule)
}

/// `tvm.ffi.from_dlpack(x)`: a tensor sharing memory with any DLPack producer.
#[pyfunction]
pub(crate) fn from_dlpack(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let tensor = from_dlpack_object(obj)?;
    new_wrapped(py, tensor, PyTensor)
}

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
        let consumer = tvm_runtime::device::StreamHandle(stream as usize as *mut std::ffi::c_void);
        return tvm_runtime::device::sync_stream_from_to(device, None, consumer)
            .map_err(|err| raise_error(py, err));
    }
    tvm_runtime::device::sync_stream(device, None).map_err(|err| raise_error(py, err))
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

/// Whether keyword `name` (from a call's keyword names) is `expected`: interned names compare
/// by address, others by content.
fn keyword_is(name: *mut ffi::PyObject, expected: &Bound<'_, PyString>) -> bool {
    // SAFETY: `name` is a live str; the comparison sets no error.
    name == expected.as_ptr() || unsafe { ffi::PyUnicode_Compare(name, expected.as_ptr()) } == 0
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
        let (mut max_version, mut dl_device, mut copy, mut stream) = (None, None, None, None);
        let count = if kwnames.is_null() {
            0
        } else {
            // SAFETY: `kwnames` is a tuple of str; the values follow the positional ones.
            unsafe { ffi::PyTuple_Size(kwnames) }
        };
        for i in 0..count.max(0) {
            // SAFETY: in range of both the names and the values.
            let (name, value) = unsafe {
                (
                    ffi::PyTuple_GetItem(kwnames, i),
                    Bound::from_borrowed_ptr(py, *args.offset(nargs + i)),
                )
            };
            let names = [
                pyo3::intern!(py, "max_version"),
                pyo3::intern!(py, "dl_device"),
                pyo3::intern!(py, "copy"),
                pyo3::intern!(py, "stream"),
            ];
            // Interned names (the usual case) match by address; others by content.
            let which = names
                .iter()
                .position(|n| n.as_ptr() == name)
                .or_else(|| names.iter().position(|n| keyword_is(name, n)));
            let slot = match which {
                Some(0) => &mut max_version,
                Some(1) => &mut dl_device,
                Some(2) => &mut copy,
                Some(_) => &mut stream,
                None => {
                    // SAFETY: a live str.
                    let name = unsafe { Bound::from_borrowed_ptr(py, name) };
                    return Err(PyTypeError::new_err(format!(
                        "__dlpack__() got an unexpected keyword argument {}",
                        name.repr()?
                    )));
                }
            };
            *slot = Some(value);
        }
        export_capsule(
            py,
            &this.get().0,
            stream.as_ref(),
            max_version.as_ref(),
            dl_device.as_ref(),
            copy.as_ref(),
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
