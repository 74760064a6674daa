//! Python objects that become runtime objects: wrapped runtime objects (borrowed as they are),
//! numpy arrays and DLPack producers (tensors sharing their memory), objects that name their
//! runtime object in `__tvm_ffi_object__`, callables (functions calling back into Python), and
//! any other object as an opaque object that gives the same Python object back.

use std::ffi::c_void;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use tvm_ffi::abi::{self, TVMFFIAny};
use tvm_ffi::containers::hash::{self, AnyHashHooks};
use tvm_ffi::{Any, AnyView, Function, OpaqueObj};

use super::{Temporaries, keep, py_to_any};
use crate::errors::raise_error;
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
    Ok(keep(
        temps,
        crate::dlpack::from_producer(obj, crate::dlpack::Requirements::NONE)?.into(),
    ))
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

/// Releases the reference an opaque object holds on its Python object.
unsafe extern "C" fn release_py_object(handle: *mut c_void) {
    tvm_ffi::boundary::ffi_boundary("the deleter of an opaque Python object", || {
        // After the interpreter has shut down the object is gone with it: nothing to release.
        let _ = Python::try_attach(|_py| {
            // SAFETY: the handle holds the strong reference taken in `opaque`.
            unsafe { ffi::Py_DecRef(handle.cast()) };
        });
    })
}

/// Wraps any Python object as an `ffi.OpaquePyObject` that gives the same object back.
pub(crate) fn opaque(obj: &Bound<'_, PyAny>) -> PyResult<Any> {
    let handle = obj.clone().into_ptr();
    // SAFETY: the object holds the strong reference taken just now, which `release_py_object`
    // gives back once (attaching to the interpreter, from whichever thread).
    let opaque = unsafe { OpaqueObj::create(handle.cast(), release_py_object) };
    opaque
        .map(Any::from)
        .map_err(|err| raise_error(obj.py(), err))
}

/// The Python object an opaque object holds (a new reference to it).
pub(crate) fn opaque_object<'py>(py: Python<'py>, opaque: &OpaqueObj) -> Bound<'py, PyAny> {
    // SAFETY: opaque objects hold a strong reference to a Python object (the handle of
    // `ffi.OpaquePyObject` is a `PyObject*` by the ABI), alive while the opaque object lives.
    unsafe { Bound::from_borrowed_ptr(py, opaque.handle().cast()) }
}

/// Map hashing and equality of opaque Python objects: by the Python object they hold, so the
/// same Python object wrapped twice is one map key and is found by `in`.
struct OpaqueHooks;

impl OpaqueHooks {
    /// The Python object held by a value of type `ffi.OpaquePyObject`, by address (NULL for
    /// any other value).
    fn handle(value: AnyView<'_>) -> *mut c_void {
        value
            .as_object::<OpaqueObj>()
            .map_or(std::ptr::null_mut(), OpaqueObj::handle)
    }
}

impl AnyHashHooks for OpaqueHooks {
    fn hash(value: AnyView<'_>) -> i64 {
        OpaqueHooks::handle(value) as i64
    }

    fn equal(a: AnyView<'_>, b: AnyView<'_>) -> bool {
        OpaqueHooks::handle(a) == OpaqueHooks::handle(b)
    }
}

/// Makes the runtime compare and hash opaque Python objects by the object they hold.
pub(crate) fn register_opaque_hooks(py: Python<'_>) -> PyResult<()> {
    hash::register_hooks::<OpaqueHooks>(abi::kTVMFFIOpaquePyObject)
        .map_err(|err| raise_error(py, err))
}
