//! The DLPack protocol both ways, without copies: `from_dlpack` (whose builtin `tensor.rs`
//! defines, with the tensor class it returns) and the argument conversion import here (numpy
//! arrays through [`numpy`]), `Tensor.__dlpack__` exports in [`export`].

use std::ffi::CStr;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;
use tvm_ffi::Tensor;
use tvm_ffi::abi::{self, DLManagedTensor, DLManagedTensorVersioned};

use crate::errors::raise_error;
use crate::objects::PyObjectRef;

mod exchange;
mod export;
mod keywords;
mod numpy;

pub(crate) use exchange::{CAPSULE_NAME as EXCHANGE_API_CAPSULE_NAME, producer_stream};
pub(crate) use export::{export_capsule, install_fast_dlpack};
pub(crate) use numpy::{_numpy_arrays_read_directly, from_numpy_array, is_numpy_array};

const VERSIONED: &CStr = c"dltensor_versioned";
const LEGACY: &CStr = c"dltensor";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";
const USED_LEGACY: &CStr = c"used_dltensor";

/// What a `from_dlpack` caller requires of the tensor (its keyword arguments).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Requirements {
    /// The byte alignment of the data (0: any).
    alignment: i32,
    /// Whether the layout must be compact row-major.
    contiguous: bool,
}

impl Requirements {
    /// No requirement: what argument conversion imports.
    pub(crate) const NONE: Self = Self {
        alignment: 0,
        contiguous: false,
    };

    /// `tensor` if it meets the requirements, else a `ValueError`.
    fn check(self, py: Python<'_>, tensor: Tensor) -> PyResult<Tensor> {
        if self != Self::NONE {
            tensor
                .check_import_requirements(self.alignment, self.contiguous)
                .map_err(|err| raise_error(py, err))?;
        }
        Ok(tensor)
    }
}

/// Imports a DLPack capsule that meets `requirements`, marking it consumed on success (a
/// capsule that fails a check stays unconsumed, its owner in charge).
fn from_capsule(capsule: &Bound<'_, PyAny>, requirements: Requirements) -> PyResult<Tensor> {
    let py = capsule.py();
    let ptr = capsule.as_ptr();
    let Requirements {
        alignment,
        contiguous,
    } = requirements;
    // SAFETY: capsule calls on a live object; names are static NUL-terminated strings; the
    // imported tensor owns the managed struct only when the import succeeds.
    unsafe {
        if ffi::PyCapsule_IsValid(ptr, VERSIONED.as_ptr()) == 1 {
            let managed = ffi::PyCapsule_GetPointer(ptr, VERSIONED.as_ptr())
                .cast::<DLManagedTensorVersioned>();
            let tensor = Tensor::from_dlpack_versioned(managed, alignment, contiguous)
                .map_err(|e| raise_error(py, e))?;
            ffi::PyCapsule_SetName(ptr, USED_VERSIONED.as_ptr());
            return Ok(tensor);
        }
        if ffi::PyCapsule_IsValid(ptr, LEGACY.as_ptr()) == 1 {
            let managed = ffi::PyCapsule_GetPointer(ptr, LEGACY.as_ptr()).cast::<DLManagedTensor>();
            let tensor = Tensor::from_dlpack(managed, alignment, contiguous)
                .map_err(|e| raise_error(py, e))?;
            ffi::PyCapsule_SetName(ptr, USED_LEGACY.as_ptr());
            return Ok(tensor);
        }
    }
    Err(PyTypeError::new_err(format!(
        "expected an unconsumed DLPack capsule, got {}",
        capsule.repr()?
    )))
}

/// Imports any DLPack producer (an object with `__dlpack__`, or a capsule) without a copy.
pub(crate) fn from_dlpack_object(obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    import(obj, Requirements::NONE)
}

/// [`from_dlpack_object`] of a tensor that meets `requirements`.
fn import(obj: &Bound<'_, PyAny>, requirements: Requirements) -> PyResult<Tensor> {
    let py = obj.py();
    if is_numpy_array(obj) {
        if let Some(tensor) = from_numpy_array(obj) {
            return requirements.check(py, tensor);
        }
        if let Some(tensor) = crate::ml_dtypes::import_array(obj, from_dlpack_object)? {
            return requirements.check(py, tensor);
        }
    }
    // A tensor of this runtime already (`tvm.ffi.Tensor`, or a subclass).
    if let Ok(wrapped) = obj.cast::<PyObjectRef>()
        && let Some(tensor) = wrapped.get().any().try_as::<Tensor>()
    {
        return requirements.check(py, tensor);
    }
    from_producer(obj, requirements)
}

/// Imports a DLPack producer through its `__dlpack__` method (or a capsule) without a copy,
/// for a caller that already knows it is neither a numpy array nor a wrapped tensor.
pub(crate) fn from_producer(
    obj: &Bound<'_, PyAny>,
    requirements: Requirements,
) -> PyResult<Tensor> {
    let py = obj.py();
    if let Some(api) = exchange::api_of(obj) {
        return exchange::import(api, obj, requirements);
    }
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
        return from_capsule(obj, requirements);
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
    from_capsule(&capsule, requirements)
}

/// The requirements of `from_dlpack`'s keyword arguments.
///
/// # Safety
/// As for [`keywords::keyword_arguments`].
unsafe fn requirements_of(
    py: Python<'_>,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> PyResult<Requirements> {
    let names = [
        pyo3::intern!(py, "require_alignment"),
        pyo3::intern!(py, "require_contiguous"),
    ];
    // SAFETY: per the contract.
    let [alignment, contiguous] =
        unsafe { keywords::keyword_arguments(py, "from_dlpack", args, nargs, kwnames, names)? };
    let alignment = match alignment {
        None => 0,
        Some(value) => byte_alignment(&value)?,
    };
    let contiguous = contiguous.map(|v| v.is_truthy()).transpose()?;
    Ok(Requirements {
        alignment,
        contiguous: contiguous.unwrap_or(false),
    })
}

/// The `require_alignment` keyword as a byte count: 0 (none) or a power of two up to `2**30`,
/// any integer (`operator.index`); a `TypeError` for a non-integer, a `ValueError` out of range, other errors of
/// the value's `__index__` as they are.
fn byte_alignment(value: &Bound<'_, PyAny>) -> PyResult<i32> {
    let py = value.py();
    let repr = || value.repr().map(|r| r.to_string()).unwrap_or_default();
    // SAFETY: a live object; a new reference or NULL with the error set.
    let index = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyNumber_Index(value.as_ptr())) };
    let index = match index {
        Ok(index) => index,
        Err(err) if err.is_instance_of::<PyTypeError>(py) => {
            return Err(PyTypeError::new_err(format!(
                "from_dlpack: require_alignment must be an int, got {}",
                repr()
            )));
        }
        Err(err) => return Err(err),
    };
    index
        .extract::<i32>()
        .ok()
        .filter(|&bytes| bytes == 0 || (bytes > 0 && (bytes as u32).is_power_of_two()))
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "from_dlpack: require_alignment must be 0 (none) or a power of two up to 2**30, got {}",
                repr()
            ))
        })
}

/// The tensor `tvm.ffi.from_dlpack(x, /, *, require_alignment=0, require_contiguous=False)`
/// returns, from its arguments as a vectorcall passes them (one positional, then the keyword
/// values `kwnames` names).
///
/// # Safety
/// As for [`keywords::keyword_arguments`].
pub(crate) unsafe fn from_dlpack_arguments(
    py: Python<'_>,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> PyResult<Tensor> {
    if nargs != 1 {
        return Err(PyTypeError::new_err(format!(
            "from_dlpack() takes 1 positional argument (the DLPack producer, positional-only) \
             but {nargs} were given"
        )));
    }
    // SAFETY: one positional argument, then the keyword values `kwnames` names.
    let (obj, requirements) = unsafe {
        let obj = Bound::from_borrowed_ptr(py, *args);
        let requirements = if kwnames.is_null() {
            Requirements::NONE
        } else {
            requirements_of(py, args, nargs, kwnames)?
        };
        (obj, requirements)
    };
    import(&obj, requirements)
}
