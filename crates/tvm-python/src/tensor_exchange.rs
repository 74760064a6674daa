//! `tvm.ffi.Tensor.__dlpack_c_exchange_api__`: this package's DLPack C exchange table (DLPack
//! 1.3's `DLPackExchangeAPI`), so a framework or extension that consumes such tables exchanges
//! tvm tensors through C calls: export and import of managed tensors, a borrowed `DLTensor`
//! view, allocation through the runtime's device backends, and the stream kernels would see
//! (`TVMFFIEnvGetStream`). Every entry point is called with the interpreter lock held, reports
//! failure with a status (and a Python error where the table says so), and never unwinds.

use std::ffi::{CString, c_char, c_int, c_void};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;
use tvm_ffi::abi::{
    self, DLManagedTensorVersioned, DLPackExchangeAPI, DLPackExchangeAPIHeader, DLPackSetError,
    DLPackVersion, DLTensor,
};
use tvm_ffi::boundary::ffi_boundary;
use tvm_ffi::{DataType, Device, Tensor};

use crate::dlpack::EXCHANGE_API_CAPSULE_NAME;
use crate::errors::{python_entry, raise_error};
use crate::objects::PyObjectRef;
use crate::runtime_calls;

/// The table, immutable for the life of the process.
struct Table(DLPackExchangeAPI);

// SAFETY: read-only after initialization; its one pointer (`prev_api`) is NULL.
unsafe impl Sync for Table {}

static TABLE: Table = Table(DLPackExchangeAPI {
    header: DLPackExchangeAPIHeader {
        version: DLPackVersion {
            major: abi::DLPACK_MAJOR_VERSION,
            minor: abi::DLPACK_MINOR_VERSION,
        },
        prev_api: std::ptr::null_mut(),
    },
    managed_tensor_allocator: Some(allocate),
    managed_tensor_from_py_object_no_sync: Some(export_object),
    managed_tensor_to_py_object_no_sync: Some(import_managed),
    dltensor_from_py_object_no_sync: Some(view_object),
    current_work_stream: Some(current_stream),
});

/// The tensor a tvm tensor object holds; a `TypeError` naming the object's type otherwise.
fn tensor_of(obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    obj.cast::<PyObjectRef>()
        .ok()
        .and_then(|wrapped| wrapped.get().any().try_as::<Tensor>())
        .ok_or_else(|| {
            let type_name = crate::errors::type_name(obj);
            PyTypeError::new_err(format!(
                "the DLPack exchange API of tvm.ffi.Tensor takes a tvm.ffi.Tensor, got \
                 {type_name}"
            ))
        })
}

/// An entry point of the table that reads a tvm tensor object: `write` gets its tensor; a
/// `TypeError` for any other object.
///
/// # Safety
/// The table's contract: the interpreter lock is held and `py_object` is a live object.
unsafe fn with_tensor_of(
    py_object: *mut c_void,
    what: &'static str,
    write: impl FnOnce(&Tensor),
) -> c_int {
    // SAFETY: per the contract.
    let py = unsafe { Python::assume_attached() };
    python_entry(py, what, || {
        if py_object.is_null() {
            return Err(PyValueError::new_err(format!("{what}: the object is NULL")));
        }
        // SAFETY: per the contract; not NULL.
        let obj = unsafe { Bound::from_borrowed_ptr(py, py_object.cast::<ffi::PyObject>()) };
        write(&tensor_of(&obj)?);
        Ok(0)
    })
}

unsafe extern "C" fn export_object(
    py_object: *mut c_void,
    out: *mut *mut DLManagedTensorVersioned,
) -> c_int {
    let what = "Tensor DLPack exchange: managed_tensor_from_py_object_no_sync";
    if out.is_null() {
        return null_out(what);
    }
    // SAFETY: the table's contract; `out` is writable.
    unsafe {
        with_tensor_of(py_object, what, |tensor| {
            *out = tensor.to_dlpack_versioned()
        })
    }
}

unsafe extern "C" fn import_managed(
    managed: *mut DLManagedTensorVersioned,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: as in `export_object`.
    let py = unsafe { Python::assume_attached() };
    python_entry(
        py,
        "Tensor DLPack exchange: managed_tensor_to_py_object_no_sync",
        || {
            if managed.is_null() || out.is_null() {
                return Err(PyValueError::new_err(
                    "managed_tensor_to_py_object_no_sync: the tensor or the out pointer is NULL",
                ));
            }
            // SAFETY: a managed tensor the caller hands over; owned by the tensor on success.
            let tensor = unsafe { Tensor::from_dlpack_versioned(managed, 0, false) }
                .map_err(|err| raise_error(py, err))?;
            let wrapped = crate::tensor::wrap(py, tensor)?;
            // SAFETY: `out` is writable; the new reference is the caller's.
            unsafe { *out = wrapped.into_ptr().cast::<c_void>() };
            Ok(0)
        },
    )
}

unsafe extern "C" fn view_object(py_object: *mut c_void, out: *mut DLTensor) -> c_int {
    let what = "Tensor DLPack exchange: dltensor_from_py_object_no_sync";
    if out.is_null() {
        return null_out(what);
    }
    // SAFETY: the table's contract; `out` is writable. The view's shape and strides belong to
    // the tensor object, which the Python object keeps alive.
    unsafe { with_tensor_of(py_object, what, |tensor| *out = *tensor.dltensor()) }
}

unsafe extern "C" fn allocate(
    prototype: *mut DLTensor,
    out: *mut *mut DLManagedTensorVersioned,
    error_ctx: *mut c_void,
    set_error: DLPackSetError,
) -> c_int {
    ffi_boundary("Tensor DLPack exchange: managed_tensor_allocator", || {
        if prototype.is_null() || out.is_null() {
            return report(
                error_ctx,
                set_error,
                "ValueError",
                "managed_tensor_allocator: the prototype or the out pointer is NULL",
            );
        }
        // SAFETY: the caller's prototype (device, ndim, shape, dtype are read), not NULL.
        let prototype = unsafe { &*prototype };
        let Ok(ndim) = usize::try_from(prototype.ndim) else {
            let message = format!("the prototype has {} dimensions", prototype.ndim);
            return report(error_ctx, set_error, "ValueError", &message);
        };
        if ndim > 0 && prototype.shape.is_null() {
            let message = "the prototype has dimensions and a NULL shape";
            return report(error_ctx, set_error, "ValueError", message);
        }
        // SAFETY: `ndim` extents at `shape` (checked not NULL when there are any).
        let made = unsafe {
            let shape = if ndim == 0 {
                &[][..]
            } else {
                std::slice::from_raw_parts(prototype.shape, ndim)
            };
            let device = Device::new(prototype.device.device_type, prototype.device.device_id);
            runtime_calls::empty(shape, DataType(prototype.dtype), device)
        };
        match made {
            Ok(tensor) => {
                // SAFETY: `out` is writable; the managed tensor is the caller's.
                unsafe { *out = tensor.to_dlpack_versioned() };
                0
            }
            Err(err) => {
                if let Some(report) = set_error {
                    let kind = CString::new(err.kind().to_string()).unwrap_or_default();
                    let message =
                        CString::new(err.message().replace('\0', " ")).unwrap_or_default();
                    // SAFETY: the caller's callback with its context and two C strings that
                    // live across the call.
                    unsafe { report(error_ctx, kind.as_ptr(), message.as_ptr()) };
                }
                -1
            }
        }
    })
}

/// Reports an allocation failure through the caller's callback (when it gave one): -1.
fn report(error_ctx: *mut c_void, set_error: DLPackSetError, kind: &str, message: &str) -> c_int {
    if let Some(set_error) = set_error {
        let kind = CString::new(kind.replace('\0', " ")).unwrap_or_default();
        let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: the caller's callback with its context and two C strings that live across
        // the call.
        unsafe { set_error(error_ctx, kind.as_ptr(), message.as_ptr()) };
    }
    -1
}

/// The status of an entry point given a NULL out pointer: -1 with a `ValueError` set.
fn null_out(what: &str) -> c_int {
    Python::attach(|py| {
        PyValueError::new_err(format!("{what}: the out pointer is NULL")).restore(py)
    });
    -1
}

unsafe extern "C" fn current_stream(
    device_type: i32,
    device_id: i32,
    out_stream: *mut *mut c_void,
) -> c_int {
    ffi_boundary("Tensor DLPack exchange: current_work_stream", || {
        if out_stream.is_null() {
            return -1;
        }
        // SAFETY: the stream table is read for any device; `out_stream` is writable.
        unsafe { *out_stream = abi::TVMFFIEnvGetStream(device_type, device_id) };
        0
    })
}

/// Sets `__dlpack_c_exchange_api__` on the tensor class: a capsule of the table.
pub(crate) fn install(tensor_type: &Bound<'_, PyType>) -> PyResult<()> {
    let table = (&raw const TABLE.0).cast_mut().cast::<c_void>();
    let name: *const c_char = EXCHANGE_API_CAPSULE_NAME.as_ptr();
    // SAFETY: a static table and name that live for the process, no destructor.
    let capsule = unsafe { ffi::PyCapsule_New(table, name, None) };
    // SAFETY: a new reference or NULL with the error set.
    let capsule = unsafe { Bound::from_owned_ptr_or_err(tensor_type.py(), capsule)? };
    tensor_type.setattr("__dlpack_c_exchange_api__", capsule)
}
