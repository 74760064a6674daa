//! Python objects that become runtime objects: wrapped runtime objects (borrowed as they are),
//! numpy arrays and DLPack producers (tensors sharing their memory), objects that name their
//! runtime object in `__tvm_ffi_object__`, and callables (functions calling back into Python).
//! Any other object becomes an opaque object ([`crate::opaque`]).

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use tvm_ffi::Function;
use tvm_ffi::abi::TVMFFIAny;

use super::{Temporaries, keep, py_to_any};
use crate::objects::PyObjectRef;

/// A wrapped runtime object, borrowed from its Python wrapper.
pub(super) fn wrapped(obj: &Bound<'_, PyObjectRef>) -> PyResult<TVMFFIAny> {
    let value = obj.get().any();
    if value.is_none() {
        return Err(PyTypeError::new_err(format!(
            "{} instance is not bound to a runtime object",
            obj.get_type().name()?
        )));
    }
    Ok(*value.as_raw())
}

/// A numpy array as a tensor sharing its memory: through the buffer protocol where it can
/// describe the array, through `__dlpack__` otherwise.
pub(super) fn numpy_array(obj: &Bound<'_, PyAny>, temps: &mut Temporaries) -> PyResult<TVMFFIAny> {
    let tensor = match crate::dlpack::from_numpy_array(obj) {
        Some(tensor) => tensor,
        None => crate::dlpack::from_producer(obj, crate::dlpack::Requirements::NONE)?,
    };
    Ok(keep(temps, tensor.into()))
}

/// Any other DLPack producer as a tensor sharing its memory.
pub(super) fn dlpack(obj: &Bound<'_, PyAny>, temps: &mut Temporaries) -> PyResult<TVMFFIAny> {
    let tensor = crate::dlpack::from_producer(obj, crate::dlpack::Requirements::NONE)?;
    // The first tensor off the CPU from a producer with an exchange table: kernels run on the
    // stream the producer has current for its device, as the producer's own operations would.
    let device = tensor.device();
    if temps.wants_producer_stream() && device.device_type() != tvm_ffi::abi::kDLCPU {
        let (device_type, device_id) = (device.device_type(), device.device_id());
        if let Some(stream) = crate::dlpack::producer_stream(obj, device_type, device_id)? {
            temps.note_producer_stream(device_type, device_id, stream);
        }
    }
    Ok(keep(temps, tensor.into()))
}

/// An object that names its runtime form in `__tvm_ffi_object__`, as that form (kept for the
/// call, since the attribute may be made afresh on each access).
pub(super) fn object_attr(obj: &Bound<'_, PyAny>, temps: &mut Temporaries) -> PyResult<TVMFFIAny> {
    let value = obj.getattr(pyo3::intern!(obj.py(), "__tvm_ffi_object__"))?;
    Ok(keep(temps, py_to_any(&value)?))
}

/// The function behind a Python value: a wrapped function or any callable.
pub(crate) fn function_of(obj: &Bound<'_, PyAny>) -> PyResult<Function> {
    if let Some(function) = crate::function_type::function_of(obj) {
        return Ok(function);
    }
    if !obj.is_callable() {
        return Err(PyTypeError::new_err(format!(
            "expected a function or callable, got {}",
            obj.repr()?
        )));
    }
    Ok(crate::callback::callable_to_function(obj))
}
