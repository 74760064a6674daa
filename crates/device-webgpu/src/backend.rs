//! [`WebGpuBackend`]: WebGPU as a buffer-handle backend of the kit. The instance is created,
//! and its adapters listed, on first use; a device is created on the first use of its index.

use std::sync::{Arc, OnceLock};

use device_kit::buffer::{BufferBackend, BufferTable, DeviceSlots};
use tvm_ffi::abi::{kDLFloat, kDLInt, kDLUInt};
use tvm_ffi::{Any, DataType, Device, Result};
use tvm_runtime::device::DeviceAttr;

use crate::device::WebGpuDevice;
use crate::error::{WebGpuError, WgResult, WgpuFailure};
use crate::instance::Instance;
use crate::memory::WebGpuBuffer;

/// The WebGPU backend (device type `kDLWebGPU`, 15): devices by their adapter's index.
#[derive(Default)]
pub struct WebGpuBackend {
    instance: OnceLock<WgResult<Arc<Instance>>>,
    devices: DeviceSlots<WebGpuDevice>,
    buffers: BufferTable<WebGpuBuffer>,
}

impl WebGpuBackend {
    /// A backend that reads wgpu's settings from the environment (`WGPU_BACKEND`, ...) when it
    /// is first used; nothing is loaded before.
    pub fn from_env() -> WebGpuBackend {
        WebGpuBackend::default()
    }

    fn instance(&self) -> WgResult<Arc<Instance>> {
        self.instance
            .get_or_init(|| Instance::load().map(Arc::new))
            .clone()
    }

    /// The element types tensors on `device` may hold: float32, int32 and uint32 everywhere,
    /// float16, float64 and 64-bit integers where the adapter's shaders take them.
    pub fn supported_dtypes(&self, device: Device) -> WgResult<Vec<String>> {
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

    /// The device of `device`, created on first use and created again after it was lost
    /// (the memory of the lost one stays unusable).
    pub(crate) fn device(&self, device: Device) -> WgResult<Arc<WebGpuDevice>> {
        let index = BufferBackend::device_index(self, device)?;
        self.devices
            .get_or_create(index, WebGpuDevice::is_lost, || {
                let instance = self.instance()?;
                WebGpuDevice::new(
                    &instance.adapters[index],
                    instance.infos[index].clone(),
                    index,
                )
            })
    }

    /// Destroys the device of `device`, as a device loss would: work not done yet is dropped,
    /// its memory is freed at once, tensors on it can only be freed, and the next use of the
    /// index creates a new device. Returns whether there was a device to destroy.
    pub fn release_device(&self, device: Device) -> WgResult<bool> {
        let index = BufferBackend::device_index(self, device)?;
        let released = self.devices.remove(index);
        if let Some(d) = &released {
            d.destroy();
        }
        Ok(released.is_some())
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

    /// The errors wgpu reported outside any captured call so far, on every device (each is
    /// reported once; tests expect none).
    pub fn uncaptured_errors(&self) -> Vec<String> {
        self.devices
            .all()
            .iter()
            .flat_map(|d| d.take_uncaptured_errors())
            .collect()
    }

    /// The largest byte range one storage binding of `device` may span.
    pub fn max_storage_binding_size(&self, device: Device) -> Result<u64> {
        Ok(self.device(device)?.limits.max_storage_buffer_binding_size)
    }
}

impl BufferBackend for WebGpuBackend {
    type Failure = WgpuFailure;
    type Buffer = WebGpuBuffer;

    const DEVICE_TYPE: i32 = tvm_ffi::abi::kDLWebGPU;

    fn device_attr(&self, device: Device, attr: DeviceAttr) -> WgResult<Option<Any>> {
        let index = BufferBackend::device_index(self, device)?;
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

    /// The names of the WebGPU adapters present, by index (`name (backend, device type)`); an
    /// error saying what is missing when there is none.
    fn device_names(&self) -> WgResult<Vec<String>> {
        let instance = self.instance()?;
        Ok(instance.infos.iter().map(|i| i.name.clone()).collect())
    }

    fn buffers(&self) -> &BufferTable<WebGpuBuffer> {
        &self.buffers
    }

    fn allocate(
        &self,
        device: Device,
        nbytes: u64,
        dtype_hint: DataType,
    ) -> WgResult<Arc<WebGpuBuffer>> {
        let device = self.device(device)?;
        self.check_dtype(&device, dtype_hint)?;
        Ok(Arc::new(WebGpuBuffer::new(&device, nbytes)?))
    }

    fn before_free(&self, _buffer: &WebGpuBuffer) -> WgResult<()> {
        // wgpu keeps the buffer alive until the work queued on it is done.
        Ok(())
    }

    fn synchronize(&self, device: Device) -> WgResult<()> {
        self.device(device)?.finish()
    }
}
