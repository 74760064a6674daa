//! `tvm.ffi.Device`: a device type and index.

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tvm_ffi::abi::DLDevice;
use tvm_ffi::device::Device;
use tvm_ffi::device::DeviceAttr;

use crate::runtime_calls as device;

use crate::errors::raise_error;
use crate::exit_gate;

/// A device (DLPack device type and index).
#[pyclass(frozen, eq, hash, module = "tvm.ffi", name = "Device")]
#[derive(PartialEq, Eq, Hash, Clone, Copy)]
pub struct PyDevice(pub DLDevice);

impl PyDevice {
    /// The device a Python value names: a `Device`, a string such as `"cuda:1"`, or a DLPack
    /// device type code (index 0).
    pub(crate) fn from_py(value: &Bound<'_, PyAny>) -> PyResult<PyDevice> {
        match value.cast::<PyDevice>() {
            Ok(device) => Ok(*device.get()),
            Err(_) => PyDevice::py_new(value, None),
        }
    }

    fn device(&self) -> Device {
        Device(self.0)
    }

    /// An attribute from the device's backend (None when the backend does not know it).
    fn attr(&self, py: Python<'_>, attr: DeviceAttr) -> PyResult<Option<Py<PyAny>>> {
        let value = exit_gate::detach(py, || device::device_attr(self.device(), attr))
            .map_err(|err| raise_error(py, err))?;
        value.map(|v| crate::convert::any_to_py(py, v)).transpose()
    }
}

#[pymethods]
impl PyDevice {
    /// `Device("cuda", 1)`, `Device("cuda:1")` or `Device(2, 1)`.
    #[new]
    #[pyo3(signature = (device_type, device_id = None))]
    fn py_new(
        device_type: &Bound<'_, PyAny>,
        device_id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyDevice> {
        let device_id = device_id
            .filter(|id| !id.is_none())
            .map(|id| {
                id.extract::<i32>().map_err(|_| {
                    let shown = id.repr().map(|r| r.to_string()).unwrap_or_default();
                    if id.is_instance_of::<pyo3::types::PyInt>() {
                        PyOverflowError::new_err(format!(
                            "device index {shown} does not fit in 32 bits"
                        ))
                    } else {
                        PyTypeError::new_err(format!("device index must be an int, got {shown}"))
                    }
                })
            })
            .transpose()?;
        if let Some(id) = device_id.filter(|id| *id < 0) {
            return Err(PyValueError::new_err(format!(
                "device index must be non-negative, got {id}"
            )));
        }
        if device_type.is_instance_of::<pyo3::types::PyInt>() {
            let code: i32 = device_type.extract().map_err(|_| {
                PyOverflowError::new_err(format!(
                    "device type {device_type} does not fit in 32 bits"
                ))
            })?;
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
        let device_type = self.0.device_type;
        let name = |t: i32| {
            tvm_ffi::device::device_type_name(t)
                .map_or_else(|| format!("device({t})"), str::to_owned)
        };
        if device_type >= 128 {
            // A device of RPC session `device_type / 128 - 1`.
            return format!(
                "remote[{}]:{}",
                device_type / 128 - 1,
                name(device_type % 128)
            );
        }
        name(device_type)
    }

    /// Whether the device is present (its backend is registered and reports it).
    #[getter]
    fn exist(&self, py: Python<'_>) -> bool {
        exit_gate::detach(py, || device::device_exists(self.device()))
    }

    /// Waits for the work queued on `stream` (an int handle from `create_raw_stream`; None:
    /// the calling thread's current stream).
    #[pyo3(signature = (stream = None))]
    fn sync(&self, py: Python<'_>, stream: Option<usize>) -> PyResult<()> {
        exit_gate::detach(py, || device::sync_stream(self.device(), stream))
            .map_err(|err| raise_error(py, err))
    }

    /// A new stream on this device, as an int handle (0 for backends without streams).
    fn create_raw_stream(&self, py: Python<'_>) -> PyResult<usize> {
        exit_gate::detach(py, || device::create_stream(self.device()))
            .map_err(|err| raise_error(py, err))
    }

    /// Frees a stream from `create_raw_stream`.
    fn free_raw_stream(&self, py: Python<'_>, stream: usize) -> PyResult<()> {
        // The registry and the backend refuse streams they did not create.
        exit_gate::detach(py, || device::free_stream(self.device(), stream))
            .map_err(|err| raise_error(py, err))
    }

    /// Makes `stream` the calling thread's current stream on this device; returns the previous
    /// one (0: the default stream).
    fn set_raw_stream(&self, py: Python<'_>, stream: usize) -> PyResult<usize> {
        device::set_current_stream(self.device(), stream).map_err(|err| raise_error(py, err))
    }

    /// The calling thread's current stream on this device (0: the default stream), the one
    /// kernels read with `TVMFFIEnvGetStream`.
    fn get_raw_stream(&self) -> usize {
        // SAFETY: reads the calling thread's stream table; any device may be asked.
        unsafe { tvm_ffi::abi::TVMFFIEnvGetStream(self.0.device_type, self.0.device_id) as usize }
    }

    /// Most threads in one block (None when the backend does not say).
    #[getter]
    fn max_threads_per_block(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.attr(py, DeviceAttr::MaxThreadsPerBlock)
    }

    /// Threads that run in lockstep.
    #[getter]
    fn warp_size(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.attr(py, DeviceAttr::WarpSize)
    }

    /// Shared memory one block may use, in bytes.
    #[getter]
    fn max_shared_memory_per_block(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.attr(py, DeviceAttr::MaxSharedMemoryPerBlock)
    }

    /// The compute capability or architecture version, such as "8.0".
    #[getter]
    fn compute_version(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.attr(py, DeviceAttr::ComputeVersion)
    }

    /// The device's name.
    #[getter]
    fn device_name(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.attr(py, DeviceAttr::DeviceName)
    }

    /// The highest clock rate, in kHz.
    #[getter]
    fn max_clock_rate(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.attr(py, DeviceAttr::MaxClockRate)
    }

    /// Streaming multiprocessors or compute units.
    #[getter]
    fn multi_processor_count(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.attr(py, DeviceAttr::MultiProcessorCount)
    }

    /// Largest block extent per dimension, as text.
    #[getter]
    fn max_thread_dimensions(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.attr(py, DeviceAttr::MaxThreadDimensions)
    }

    /// Registers available to one block.
    #[getter]
    fn max_registers_per_block(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.attr(py, DeviceAttr::MaxRegistersPerBlock)
    }

    /// The GCN architecture of an AMD GPU.
    #[getter]
    fn gcn_arch(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.attr(py, DeviceAttr::GcnArch)
    }

    /// The driver API's version.
    #[getter]
    fn api_version(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.attr(py, DeviceAttr::ApiVersion)
    }

    /// The driver's version.
    #[getter]
    fn driver_version(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.attr(py, DeviceAttr::DriverVersion)
    }

    /// Size of the L2 cache, in bytes.
    #[getter]
    fn l2_cache_size_bytes(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.attr(py, DeviceAttr::L2CacheSizeBytes)
    }

    /// Total device memory, in bytes.
    #[getter]
    fn total_global_memory(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.attr(py, DeviceAttr::TotalGlobalMemory)
    }

    /// Device memory not in use, in bytes.
    #[getter]
    fn available_global_memory(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.attr(py, DeviceAttr::AvailableGlobalMemory)
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
