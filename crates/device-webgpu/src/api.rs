//! [`WebGpuDeviceApi`]: the runtime's device API over wgpu. The instance is created, and its
//! adapters listed, on first use; a device is created on the first use of its index.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use tvm_ffi::abi::{DLTensor, kDLFloat, kDLInt, kDLUInt};
use tvm_ffi::{Any, DataType, Device, Result};
use tvm_runtime::device::{
    DeviceApi, DeviceAttr, StreamHandle, device_index, require_default_stream,
};

use crate::device::WebGpuDevice;
use crate::error::{WebGpuError, WgResult};
use crate::instance::Instance;
use crate::memory::WebGpuBuffer;

/// The WebGPU backend (device type `kDLWebGPU`, 15): devices by their adapter's index.
#[derive(Default)]
pub struct WebGpuDeviceApi {
    instance: OnceLock<WgResult<Arc<Instance>>>,
    devices: Mutex<HashMap<usize, Arc<WebGpuDevice>>>,
    /// Live allocations by handle (the address of the buffer object).
    buffers: Mutex<HashMap<usize, Arc<WebGpuBuffer>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl WebGpuDeviceApi {
    /// A backend that loads nothing until it is used.
    pub fn new() -> WebGpuDeviceApi {
        WebGpuDeviceApi::default()
    }

    fn instance(&self) -> WgResult<Arc<Instance>> {
        self.instance
            .get_or_init(|| Instance::load().map(Arc::new))
            .clone()
    }

    /// The names of the WebGPU adapters present, by index (`name (backend, device type)`); an
    /// error saying what is missing when there is none.
    pub fn device_names(&self) -> std::result::Result<Vec<String>, WebGpuError> {
        Ok(self
            .instance()?
            .infos
            .iter()
            .map(|i| i.name.clone())
            .collect())
    }

    /// The element types tensors on `device` may hold: float32, int32 and uint32 everywhere,
    /// float16, float64 and 64-bit integers where the adapter's shaders take them.
    pub fn supported_dtypes(
        &self,
        device: Device,
    ) -> std::result::Result<Vec<String>, WebGpuError> {
        let device = self.device(device)?;
        let mut names = vec!["float32", "int32", "uint32"];
        if device.features.contains(wgpu::Features::SHADER_F16) {
            names.push("float16");
        }
        if device.features.contains(wgpu::Features::SHADER_F64) {
            names.push("float64");
        }
        if device.features.contains(wgpu::Features::SHADER_INT64) {
            names.extend(["int64", "uint64"]);
        }
        Ok(names.into_iter().map(str::to_owned).collect())
    }

    /// The index of `device`, if such an adapter is present.
    fn index_of(&self, device: Device) -> WgResult<usize> {
        let instance = self.instance()?;
        let names = instance.infos.iter().map(|info| info.name.as_str());
        device_index("WebGPU", "webgpu", device, names).map_err(WebGpuError::unavailable)
    }

    /// The device of `device`, created on first use and created again after it was lost
    /// (the memory of the lost one stays unusable).
    pub(crate) fn device(&self, device: Device) -> WgResult<Arc<WebGpuDevice>> {
        let index = self.index_of(device)?;
        let mut devices = lock(&self.devices);
        if let Some(d) = devices.get(&index).filter(|d| !d.is_lost()) {
            return Ok(Arc::clone(d));
        }
        let instance = self.instance()?;
        let created = Arc::new(WebGpuDevice::new(
            &instance.adapters[index],
            instance.infos[index].clone(),
            index,
        )?);
        devices.insert(index, Arc::clone(&created));
        Ok(created)
    }

    /// Destroys the device of `device`, as a device loss would: work not done yet is dropped,
    /// its memory is freed at once, tensors on it can only be freed, and the next use of the
    /// index creates a new device. Returns whether there was a device to destroy.
    pub fn release_device(&self, device: Device) -> std::result::Result<bool, WebGpuError> {
        let index = self.index_of(device)?;
        let released = lock(&self.devices).remove(&index);
        if let Some(d) = &released {
            d.destroy();
        }
        Ok(released.is_some())
    }

    /// The live buffer whose handle is `data`, on device `device_id`; a `ValueError` otherwise.
    pub(crate) fn buffer(&self, data: *mut c_void, device_id: i32) -> WgResult<Arc<WebGpuBuffer>> {
        let buffer = lock(&self.buffers).get(&(data as usize)).cloned();
        match buffer {
            Some(b) if b.device.index as i32 == device_id => Ok(b),
            Some(b) => Err(WebGpuError::invalid(format!(
                "WebGPU buffer {data:p} belongs to {}, not webgpu:{device_id}",
                b.device.label()
            ))),
            None => Err(WebGpuError::invalid(format!(
                "{data:p} is not a live WebGPU buffer (freed, or memory of another device)"
            ))),
        }
    }

    /// Refuses element types the device's shaders cannot hold, naming the type.
    fn check_dtype(&self, device: &WebGpuDevice, dtype: DataType) -> WgResult<()> {
        let DataType(raw) = dtype;
        let features = device.features;
        let supported = raw.lanes == 1
            && match (raw.code, raw.bits) {
                (c, 32) => c == kDLFloat || c == kDLInt || c == kDLUInt,
                (c, 16) => c == kDLFloat && features.contains(wgpu::Features::SHADER_F16),
                (c, 64) if c == kDLFloat => features.contains(wgpu::Features::SHADER_F64),
                (c, 64) => {
                    (c == kDLInt || c == kDLUInt) && features.contains(wgpu::Features::SHADER_INT64)
                }
                _ => false,
            };
        if !supported {
            let allowed = self
                .supported_dtypes(Device::webgpu(device.index as i32))?
                .join(", ");
            return Err(WebGpuError::WrongType(format!(
                "WebGPU tensors cannot hold {dtype}: the shaders of {} '{}' take {allowed}",
                device.label(),
                device.info.name
            )));
        }
        Ok(())
    }

    fn attr_of(&self, device: Device, attr: DeviceAttr) -> WgResult<Option<Any>> {
        let index = self.index_of(device)?;
        let instance = self.instance()?;
        let info = &instance.infos[index];
        let limits = instance.adapters[index].limits();
        Ok(Some(match attr {
            DeviceAttr::Exist => Any::from(1i64),
            DeviceAttr::DeviceName => Any::from(info.name.as_str()),
            DeviceAttr::MaxThreadsPerBlock => {
                Any::from(i64::from(limits.max_compute_invocations_per_workgroup))
            }
            DeviceAttr::WarpSize => Any::from(i64::from(info.subgroup_min_size.max(1))),
            DeviceAttr::MaxSharedMemoryPerBlock => {
                Any::from(i64::from(limits.max_compute_workgroup_storage_size))
            }
            DeviceAttr::MaxThreadDimensions => Any::from(format!(
                "[{}, {}, {}]",
                limits.max_compute_workgroup_size_x,
                limits.max_compute_workgroup_size_y,
                limits.max_compute_workgroup_size_z
            )),
            DeviceAttr::DriverVersion => Any::from(format!("{} {}", info.driver, info.driver_info)),
            DeviceAttr::ApiVersion => Any::from(format!("{:?}", info.backend).to_lowercase()),
            _ => return Ok(None),
        }))
    }

    /// The errors wgpu reported outside any captured call so far, on every device (each is
    /// reported once; tests expect none).
    pub fn uncaptured_errors(&self) -> Vec<String> {
        lock(&self.devices)
            .values()
            .flat_map(|d| d.take_uncaptured_errors())
            .collect()
    }

    /// The largest byte range one storage binding of `device` may span.
    pub fn max_storage_binding_size(&self, device: Device) -> Result<u64> {
        Ok(self.device(device)?.limits.max_storage_buffer_binding_size)
    }
}

impl DeviceApi for WebGpuDeviceApi {
    fn name(&self) -> &str {
        "webgpu"
    }

    fn attr(&self, device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
        if attr == DeviceAttr::Exist {
            return Ok(Some(Any::from(i64::from(self.index_of(device).is_ok()))));
        }
        Ok(self.attr_of(device, attr)?)
    }

    fn unavailable_reason(&self, device: Device) -> Option<String> {
        self.index_of(device).err().map(|e| e.to_string())
    }

    fn alloc(
        &self,
        device: Device,
        nbytes: usize,
        _alignment: usize,
        dtype_hint: DataType,
    ) -> Result<*mut c_void> {
        let device = self.device(device)?;
        self.check_dtype(&device, dtype_hint)?;
        // Each allocation is a buffer of its own, whose offset 0 meets any alignment.
        let buffer = Arc::new(WebGpuBuffer::new(&device, nbytes as u64)?);
        let handle = Arc::as_ptr(&buffer) as *mut c_void;
        lock(&self.buffers).insert(handle as usize, buffer);
        Ok(handle)
    }

    unsafe fn free(&self, device: Device, ptr: *mut c_void) -> Result<()> {
        self.buffer(ptr, device.device_id())?;
        // wgpu keeps the buffer alive until the work queued on it is done.
        lock(&self.buffers).remove(&(ptr as usize));
        Ok(())
    }

    unsafe fn copy(&self, from: &DLTensor, to: &DLTensor, stream: StreamHandle) -> Result<()> {
        require_default_stream("WebGPU", stream)?;
        // SAFETY: forwarded from the caller (valid descriptors, checked shapes).
        Ok(unsafe { crate::copy::copy_tensors(self, from, to) }?)
    }

    fn create_stream(&self, _device: Device) -> Result<StreamHandle> {
        // One queue per device: the default stream is the only one.
        Ok(StreamHandle::NULL)
    }

    unsafe fn free_stream(&self, _device: Device, stream: StreamHandle) -> Result<()> {
        require_default_stream("WebGPU", stream)
    }

    fn check_raw_stream(&self, _device: Device, stream: StreamHandle) -> Result<()> {
        require_default_stream("WebGPU", stream)
    }

    fn sync_stream(&self, device: Device, stream: StreamHandle) -> Result<()> {
        require_default_stream("WebGPU", stream)?;
        Ok(self.device(device)?.finish()?)
    }
}
