//! Other frameworks' DLPack C exchange API (DLPack 1.3's `DLPackExchangeAPI`): a table of C
//! entry points found on a tensor's type as `__dlpack_c_exchange_api__` (a capsule named
//! `"dlpack_exchange_api"`; the integer address in PyTorch's earlier
//! `__c_dlpack_exchange_api__` is taken too, from torch's types only). With it a tensor is
//! imported by one C call, instead of a `__dlpack__` method call and a capsule.
//! `TVM_FFI_SKIP_DLPACK_C_EXCHANGE_API=1` turns it off.

use std::ffi::{CStr, c_void};
use std::sync::{Mutex, OnceLock};

use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi;
use pyo3::prelude::*;
use tvm_ffi::Tensor;
use tvm_ffi::abi::{DLManagedTensorVersioned, DLPackExchangeAPI};

use super::Requirements;
use crate::errors::raise_error;

/// The capsule name of a table.
pub(crate) const CAPSULE_NAME: &CStr = c"dlpack_exchange_api";

/// What a producer type offers: its table's address (0: none usable), and the object that keeps
/// the table alive (the capsule or the integer it was read from), held with the type.
struct Found {
    ty: Py<PyAny>,
    _holder: Option<Py<PyAny>>,
    api: usize,
}

/// The table of the last producer type seen (imports come in runs of one type).
static LAST: Mutex<Option<Found>> = Mutex::new(None);

fn disabled() -> bool {
    static DISABLED: OnceLock<bool> = OnceLock::new();
    *DISABLED.get_or_init(|| {
        std::env::var_os("TVM_FFI_SKIP_DLPACK_C_EXCHANGE_API").is_some_and(|v| v == "1")
    })
}

/// The exchange table of `obj`'s type, if it offers a usable one (DLPack major version 1, with
/// the import entry point).
pub(super) fn api_of(obj: &Bound<'_, PyAny>) -> Option<&'static DLPackExchangeAPI> {
    if disabled() {
        return None;
    }
    let ty = obj.get_type().into_any();
    {
        let last = LAST.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(found) = last.as_ref()
            && found.ty.as_ptr() == ty.as_ptr()
        {
            // SAFETY: checked when found; the holder keeps the table alive.
            return (found.api != 0).then(|| unsafe { &*(found.api as *const DLPackExchangeAPI) });
        }
    }
    // Looked up without the lock: the attribute may run Python code.
    let (holder, api) = match lookup(&ty) {
        // SAFETY: a non-NULL table address its producer published; read-only.
        Some((holder, api)) if usable(unsafe { &*(api as *const DLPackExchangeAPI) }) => {
            (Some(holder), api)
        }
        _ => (None, 0),
    };
    // The replaced entry (another type's) is dropped with the lock released: dropping a
    // reference may run Python code.
    let replaced = LAST
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .replace(Found {
            ty: ty.unbind(),
            _holder: holder,
            api,
        });
    drop(replaced);
    // SAFETY: as above.
    (api != 0).then(|| unsafe { &*(api as *const DLPackExchangeAPI) })
}

/// Whether this consumer can use `table`: DLPack major version 1, with the import entry point.
fn usable(table: &DLPackExchangeAPI) -> bool {
    table.header.version.major == 1 && table.managed_tensor_from_py_object_no_sync.is_some()
}

/// The table's holder and address on type `ty`, if it has one.
fn lookup(ty: &Bound<'_, PyAny>) -> Option<(Py<PyAny>, usize)> {
    let py = ty.py();
    if let Ok(capsule) = ty.getattr(pyo3::intern!(py, "__dlpack_c_exchange_api__")) {
        // SAFETY: capsule calls on a live object with a static NUL-terminated name.
        let address = unsafe {
            if ffi::PyCapsule_IsValid(capsule.as_ptr(), CAPSULE_NAME.as_ptr()) != 1 {
                return None;
            }
            ffi::PyCapsule_GetPointer(capsule.as_ptr(), CAPSULE_NAME.as_ptr())
        };
        return (!address.is_null()).then(|| (capsule.unbind(), address as usize));
    }
    // The integer form is an address the runtime would read: trusted from PyTorch only (its
    // earlier releases published the table this way), never from an arbitrary class.
    let module: std::string::String = ty
        .getattr(pyo3::intern!(py, "__module__"))
        .ok()?
        .extract()
        .ok()?;
    if module != "torch" && !module.starts_with("torch.") {
        return None;
    }
    let address = ty
        .getattr(pyo3::intern!(py, "__c_dlpack_exchange_api__"))
        .ok()?;
    if address.is_instance_of::<pyo3::types::PyBool>() {
        return None;
    }
    let value: usize = address.extract().ok()?;
    (value != 0).then(|| (address.unbind(), value))
}

/// The current stream `obj`'s producer names for a device through its exchange table (None
/// without a table or its stream entry point); 0 is the default stream.
pub(crate) fn producer_stream(
    obj: &Bound<'_, PyAny>,
    device_type: i32,
    device_id: i32,
) -> PyResult<Option<usize>> {
    let Some(current) = api_of(obj).and_then(|api| api.current_work_stream) else {
        return Ok(None);
    };
    let mut stream = std::ptr::null_mut();
    // SAFETY: the producer's entry point, with the GIL held; `stream` is writable.
    let status = unsafe { current(device_type, device_id, &mut stream) };
    if status != 0 {
        return Err(PyErr::take(obj.py()).unwrap_or_else(|| {
            PyRuntimeError::new_err(format!(
                "the DLPack exchange API of {} gave no current stream for device type \
                 {device_type}, index {device_id} (status {status})",
                crate::errors::type_name(obj)
            ))
        }));
    }
    Ok(Some(stream as usize))
}

/// Imports `obj` through `api` without a copy, meeting `requirements`; the managed tensor is
/// released if a requirement fails.
pub(super) fn import(
    api: &DLPackExchangeAPI,
    obj: &Bound<'_, PyAny>,
    requirements: Requirements,
) -> PyResult<Tensor> {
    let py = obj.py();
    let export = api
        .managed_tensor_from_py_object_no_sync
        .expect("checked by api_of");
    let mut managed: *mut DLManagedTensorVersioned = std::ptr::null_mut();
    // SAFETY: the producer's entry point, called with the GIL held on a live object of its type.
    let status = unsafe { export(obj.as_ptr().cast::<c_void>(), &mut managed) };
    if status != 0 || managed.is_null() {
        return Err(PyErr::take(py).unwrap_or_else(|| {
            let type_name = crate::errors::type_name(obj);
            PyRuntimeError::new_err(format!(
                "the DLPack exchange API of {type_name} did not export a tensor (status {status})"
            ))
        }));
    }
    let Requirements {
        alignment,
        contiguous,
    } = requirements;
    // SAFETY: a managed tensor the producer handed over; on success the tensor owns it.
    match unsafe { Tensor::from_dlpack_versioned(managed, alignment, contiguous) } {
        Ok(tensor) => Ok(tensor),
        Err(err) => {
            // SAFETY: still ours on failure; released once through its own deleter.
            unsafe {
                if let Some(deleter) = (*managed).deleter {
                    deleter(managed);
                }
            }
            Err(raise_error(py, err))
        }
    }
}
