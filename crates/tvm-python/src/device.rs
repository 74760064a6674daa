//! `tvm.ffi.Device`: a device type and index.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tvm_ffi::abi::DLDevice;
use tvm_ffi::device::Device;

/// A device (DLPack device type and index).
#[pyclass(frozen, eq, hash, module = "tvm.ffi", name = "Device")]
#[derive(PartialEq, Eq, Hash, Clone, Copy)]
pub struct PyDevice(pub DLDevice);

#[pymethods]
impl PyDevice {
    /// `Device("cuda", 1)`, `Device("cuda:1")` or `Device(2, 1)`.
    #[new]
    #[pyo3(signature = (device_type, device_id = None))]
    fn py_new(device_type: &Bound<'_, PyAny>, device_id: Option<i32>) -> PyResult<PyDevice> {
        if let Some(id) = device_id.filter(|id| *id < 0) {
            return Err(PyValueError::new_err(format!(
                "device index must be non-negative, got {id}"
            )));
        }
        if device_type.is_instance_of::<pyo3::types::PyInt>() {
            let code: i32 = device_type.extract()?;
            return Ok(PyDevice(Device::new(code, device_id.unwrap_or(0)).0));
        }
        let text: String = device_type.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "device type must be a str or int, got {}",
                device_type
                    .repr()
                    .map(|r| r.to_string())
                    .unwrap_or_default()
            ))
        })?;
        let mut device: Device = text.parse().map_err(PyValueError::new_err)?;
        if let Some(id) = device_id {
            if text.contains(':') {
                return Err(PyValueError::new_err(format!(
                    "device `{text}` already names an index; got device_id={id} too"
                )));
            }
            device = Device::new(device.device_type(), id);
        }
        Ok(PyDevice(device.0))
    }

    /// The DLPack device type code.
    #[getter]
    fn device_type(&self) -> i32 {
        self.0.device_type
    }

    /// The device index.
    #[getter]
    fn device_id(&self) -> i32 {
        self.0.device_id
    }

    /// The device type's name, such as "cuda".
    #[getter]
    fn type_name(&self) -> String {
        tvm_ffi::device::device_type_name(self.0.device_type)
            .map_or_else(|| format!("device({})", self.0.device_type), str::to_owned)
    }

    fn __dlpack_device__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, [self.0.device_type, self.0.device_id])
    }

    fn __repr__(&self) -> String {
        format!(
            "device(type='{}', index={})",
            self.type_name(),
            self.0.device_id
        )
    }

    fn __str__(&self) -> String {
        Device(self.0).to_string()
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (i32, i32))> {
        let this = slf.get();
        Ok((
            slf.get_type().into_any(),
            (this.0.device_type, this.0.device_id),
        ))
    }
}
