//! `tvm.ffi.Tensor`: shape, dtype, device and data, shared with other frameworks through DLPack
//! (`Tensor.__dlpack__` and the `tvm.ffi.from_dlpack` builtin, over `dlpack/`) and copied
//! between devices through the runtime's device registry.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tvm_ffi::{DataType, Device, Tensor};

use crate::device::PyDevice;
use crate::dlpack::{export_capsule, from_dlpack_arguments, from_dlpack_object};
use crate::errors::{python_entry, raise_error};
use crate::exit_gate;
use crate::objects::{Borrowed, PyObjectRef, new_wrapped};
use crate::runtime_calls;

/// A tensor: shape, dtype, device and data shared with other frameworks through DLPack.
#[pyclass(extends = PyObjectRef, frozen, module = "tvm.ffi", name = "Tensor")]
pub struct PyTensor(pub(crate) Borrowed<Tensor>);

/// Wraps a tensor as its Python class.
pub(crate) fn wrap(py: Python<'_>, tensor: Tensor) -> PyResult<Py<PyAny>> {
    new_wrapped(py, tensor, PyTensor)
}

/// The device a Python argument names: a `Device`, a string such as `"cuda:1"`, or None (CPU).
fn device_arg(value: Option<&Bound<'_, PyAny>>) -> PyResult<Device> {
    match value {
        None => Ok(Device::cpu(0)),
        Some(v) if v.is_none() => Ok(Device::cpu(0)),
        Some(v) => match v.cast::<PyDevice>() {
            Ok(device) => Ok(Device(device.get().0)),
            Err(_) => Ok(Device(PyDevice::from_py(v)?.0)),
        },
    }
}

/// `tvm.runtime.empty(shape, dtype="float32", device=None)`: an uninitialized compact tensor
/// allocated by the device's backend.
#[pyfunction]
#[pyo3(signature = (shape, dtype = None, device = None))]
pub(crate) fn empty(
    py: Python<'_>,
    shape: Vec<i64>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let dtype = match dtype.filter(|d| !d.is_none()) {
        None => DataType::float(32),
        Some(d) => crate::dtype::dtype_arg(d)?,
    };
    let device = device_arg(device)?;
    let tensor = exit_gate::detach(py, || runtime_calls::empty(&shape, dtype, device))
        .map_err(|err| raise_error(py, err))?;
    wrap(py, tensor)
}

#[pymethods]
impl PyTensor {
    /// The dimensions.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.0.shape())
    }

    /// The strides, in elements.
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.0.strides().iter())
    }

    /// Number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.0.ndim()
    }

    /// The element data type.
    #[getter]
    fn dtype(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        crate::dtype::make_dtype(py, self.0.dtype().0)
    }

    /// The device holding the data.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice(self.0.device().0)
    }

    /// Address of the first element (an opaque handle on devices the host cannot address).
    #[getter]
    fn data_ptr(&self) -> usize {
        self.0.data_ptr() as usize
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        let d = self.0.device();
        (d.device_type(), d.device_id())
    }

    /// Exports a DLPack capsule: versioned when the consumer asks for version 1 or later,
    /// legacy otherwise. A device tensor's pending work finishes first unless `stream` is -1.
    /// (At module load a vectorcall method with the same behaviour replaces this one; see
    /// `install_fast_dlpack`.)
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<&Bound<'_, PyAny>>,
        dl_device: Option<&Bound<'_, PyAny>>,
        copy: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        export_capsule(py, &self.0, stream, max_version, dl_device, copy)
    }

    /// Copies this tensor to a device (a new tensor), or into another tensor of the same shape
    /// and dtype (returned).
    fn copyto(&self, py: Python<'_>, target: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        if let Ok(tensor) = target.cast::<PyTensor>() {
            let destination = Tensor::clone(&tensor.get().0);
            exit_gate::detach(py, || runtime_calls::copy(&self.0, &destination))
                .map_err(|err| raise_error(py, err))?;
            return Ok(target.clone().unbind());
        }
        if target.is_none() {
            return Err(PyTypeError::new_err(
                "copyto needs a target: a Device, a device string or a Tensor, got None",
            ));
        }
        let device = device_arg(Some(target))?;
        let copy = exit_gate::detach(py, || runtime_calls::copy_to(&self.0, device))
            .map_err(|err| raise_error(py, err))?;
        wrap(py, copy)
    }

    /// Copies the elements of `source` (a tensor or any DLPack producer or buffer, such as a
    /// numpy array, of the same shape and dtype) into this tensor; returns this tensor. A
    /// read-only tensor (from read-only memory) refuses with a `ValueError`.
    fn copyfrom(slf: &Bound<'_, Self>, source: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let source = from_dlpack_object(source)?;
        let this = Tensor::clone(&slf.get().0);
        exit_gate::detach(py, || runtime_calls::copy(&source, &this))
            .map_err(|err| raise_error(py, err))?;
        Ok(slf.clone().into_any().unbind())
    }

    /// A numpy array of the data: sharing this tensor's memory on the CPU, a host copy for a
    /// tensor on any other device.
    fn numpy(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let numpy = py.import("numpy")?;
        let on_host = slf.get().0.device() == Device::cpu(0);
        let host = if on_host {
            Tensor::clone(&slf.get().0)
        } else {
            let this = Tensor::clone(&slf.get().0);
            exit_gate::detach(py, || runtime_calls::copy_to(&this, Device::cpu(0)))
                .map_err(|err| raise_error(py, err))?
        };
        if crate::ml_dtypes::needs_ml_dtypes(host.dtype()) {
            return crate::ml_dtypes::export_array(py, &host, |bits| {
                numpy.call_method1("from_dlpack", (wrap(py, bits)?,))
            });
        }
        if on_host {
            return Ok(numpy.call_method1("from_dlpack", (slf,))?.unbind());
        }
        Ok(numpy
            .call_method1("from_dlpack", (wrap(py, host)?,))?
            .unbind())
    }

    /// The numpy array protocol (`np.asarray(tensor)`): the data as [`numpy`](Self::numpy) gives
    /// it, converted to `dtype` if given; `copy=False` is refused when a copy is needed.
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__(
        slf: &Bound<'_, Self>,
        dtype: Option<&Bound<'_, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let on_host = slf.get().0.device() == Device::cpu(0);
        if copy == Some(false) && !on_host {
            return Err(PyValueError::new_err(format!(
                "a tensor on {} cannot become a numpy array without a copy (copy=False)",
                slf.get().0.device()
            )));
        }
        let mut array = Self::numpy(slf)?.into_bound(py);
        if let Some(dtype) = dtype.filter(|d| !d.is_none()) {
            array = array.call_method1("astype", (dtype,))?;
        } else if copy == Some(true) && on_host {
            array = array.call_method0("copy")?;
        }
        Ok(array.unbind())
    }

    fn __repr__(&self) -> String {
        format!(
            "Tensor(shape={:?}, dtype={}, device={})",
            self.0.shape(),
            self.0.dtype(),
            self.0.device()
        )
    }
}

/// `tvm.ffi.from_dlpack(x, /, *, require_alignment=0, require_contiguous=False)` as a
/// vectorcall builtin: the import is a few hundred instructions, and PyO3's argument extraction
/// would add a tenth to it.
unsafe extern "C" fn from_dlpack_vectorcall(
    _module: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: the interpreter calls builtins with the GIL held.
    let py = unsafe { Python::assume_attached() };
    python_entry(py, "tvm.ffi.from_dlpack", || {
        // SAFETY: the interpreter's vectorcall arguments.
        let tensor = unsafe { from_dlpack_arguments(py, args, nargs, kwnames)? };
        wrap(py, tensor).map(Py::into_ptr)
    })
}

/// Adds `from_dlpack` ([`from_dlpack_vectorcall`]) to module `m`.
pub(crate) fn add_from_dlpack(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let def = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: c"from_dlpack".as_ptr(),
        ml_meth: ffi::PyMethodDefPointer {
            PyCFunctionFastWithKeywords: from_dlpack_vectorcall,
        },
        ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
        ml_doc: c"from_dlpack(x, /, *, require_alignment=0, require_contiguous=False)\n--\n\nA tensor sharing memory with DLPack producer `x` (a numpy array, a torch tensor, a tvm Tensor, any object with `__dlpack__`, or an unconsumed DLPack capsule). `require_alignment` (bytes: 0 for none, or a power of two) and `require_contiguous` are checked before the producer's capsule is consumed; a tensor that falls short raises ValueError.".as_ptr(),
    }));
    let name = m.name()?;
    // SAFETY: a method definition that lives for the process, the module as `self` and its
    // name as `__module__`.
    let function = unsafe { ffi::PyCFunction_NewEx(def, m.as_ptr(), name.as_ptr()) };
    // SAFETY: a new reference or NULL with the error set.
    let function = unsafe { Bound::from_owned_ptr_or_err(m.py(), function)? };
    m.add("from_dlpack", function)
}
