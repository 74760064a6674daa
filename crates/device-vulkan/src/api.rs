//! [`VulkanDeviceApi`]: the runtime's device API over Vulkan. The loader is opened, and the
//! instance created, on first use; logical devices are created on their first use.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use ash::vk;
use tvm_ffi::abi::DLTensor;
use tvm_ffi::{Any, DataType, Device, Result};
use tvm_runtime::device::{
    DeviceApi, DeviceAttr, StreamHandle, device_index, require_default_stream,
};

use crate::device::VulkanDevice;
use crate::error::{VkResult, VulkanError};
use crate::instance::{Instance, VulkanOptions};
use crate::memory::VulkanBuffer;

/// The Vulkan backend (device type `kDLVulkan`, 7): devices by their index in the loader's list.
pub struct VulkanDeviceApi {
    /// `None`: read from the environment when the instance is created.
    options: Option<VulkanOptions>,
    instance: OnceLock<VkResult<Arc<Instance>>>,
    devices: Mutex<HashMap<usize, Arc<VulkanDevice>>>,
    /// Live allocations by handle (the address of the buffer object).
    buffers: Mutex<HashMap<usize, Arc<VulkanBuffer>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `major.minor.patch` of a packed Vulkan version.
fn version_text(v: u32) -> String {
    format!(
        "{}.{}.{}",
        vk::api_version_major(v),
        vk::api_version_minor(v),
        vk::api_version_patch(v)
    )
}

impl VulkanDeviceApi {
    /// A backend with the given options; nothing is loaded until it is used.
    pub fn new(options: VulkanOptions) -> VulkanDeviceApi {
        VulkanDeviceApi::with_options(Some(options))
    }

    /// A backend that reads its options from the environment ([`VulkanOptions::from_env`]) when
    /// it is first used.
    pub fn from_env() -> VulkanDeviceApi {
        VulkanDeviceApi::with_options(None)
    }

    fn with_options(options: Option<VulkanOptions>) -> VulkanDeviceApi {
        VulkanDeviceApi {
            options,
            instance: OnceLock::new(),
            devices: Mutex::default(),
            buffers: Mutex::default(),
        }
    }

    /// The instance, created on first use (the error, if creating it failed, is kept).
    pub(crate) fn instance(&self) -> VkResult<Arc<Instance>> {
        self.instance
            .get_or_init(|| {
                let options = self.options.clone().unwrap_or_else(VulkanOptions::from_env);
                Instance::load(options).map(Arc::new)
            })
            .clone()
    }

    /// The names of the Vulkan devices present, by index; an error naming what is missing
    /// when Vulkan cannot be loaded.
    pub fn device_names(&self) -> std::result::Result<Vec<String>, VulkanError> {
        Ok(self
            .instance()?
            .devices
            .iter()
            .map(|d| d.name.clone())
            .collect())
    }

    /// The validation layer's warnings and errors so far (empty when validation is off).
    pub fn validation_messages(&self) -> Vec<String> {
        self.instance
            .get()
            .and_then(|i| i.as_ref().ok())
            .map(|i| i.validation_messages())
            .unwrap_or_default()
    }

    /// Whether the validation layer is on (it was asked for and is installed).
    pub fn validation_enabled(&self) -> bool {
        self.instance().is_ok_and(|i| i.validation_enabled())
    }

    /// Whether the host maps the memory of allocation `data` directly (no staging copies).
    pub fn is_host_mapped(&self, data: *mut c_void) -> std::result::Result<bool, VulkanError> {
        Ok(self.buffer_anywhere(data)?.is_mapped())
    }

    /// The index of `device`, if such a Vulkan device is present.
    fn index_of(&self, device: Device) -> VkResult<usize> {
        let instance = self.instance()?;
        let names = instance.devices.iter().map(|d| d.name.as_str());
        device_index("Vulkan", "vulkan", device, names).map_err(VulkanError::unavailable)
    }

    /// The logical device of `device`, created on first use and created again after it was
    /// lost (the memory of the lost one stays unusable).
    pub(crate) fn device(&self, device: Device) -> VkResult<Arc<VulkanDevice>> {
        let index = self.index_of(device)?;
        let mut devices = lock(&self.devices);
        if let Some(d) = devices.get(&index).filter(|d| !d.is_lost()) {
            return Ok(Arc::clone(d));
        }
        let created = Arc::new(VulkanDevice::new(self.instance()?, index)?);
        devices.insert(index, Arc::clone(&created));
        Ok(created)
    }

    /// The live buffer whose handle is `data`, on device `device_id`; a `ValueError` otherwise.
    pub(crate) fn buffer(&self, data: *mut c_void, device_id: i32) -> VkResult<Arc<VulkanBuffer>> {
        let buffer = lock(&self.buffers).get(&(data as usize)).cloned();
        match buffer {
            Some(b) if b.device.physical_index as i32 == device_id => Ok(b),
            Some(b) => Err(VulkanError::invalid(format!(
                "Vulkan buffer {data:p} belongs to vulkan:{}, not vulkan:{device_id}",
                b.device.physical_index
            ))),
            None => Err(VulkanError::invalid(format!(
                "{data:p} is not a live Vulkan buffer (freed, or memory of another device)"
            ))),
        }
    }

    /// The live buffer whose handle is `data`, on whichever device holds it.
    pub(crate) fn buffer_anywhere(&self, data: *mut c_void) -> VkResult<Arc<VulkanBuffer>> {
        lock(&self.buffers)
            .get(&(data as usize))
            .cloned()
            .ok_or_else(|| VulkanError::invalid(format!("{data:p} is not a live Vulkan buffer")))
    }

    fn attr_of(&self, device: Device, attr: DeviceAttr) -> VkResult<Option<Any>> {
        let index = self.index_of(device)?;
        let instance = self.instance()?;
        let physical = &instance.devices[index];
        let limits = &physical.properties.limits;
        let [x, y, z] = limits.max_compute_work_group_size;
        Ok(Some(match attr {
            DeviceAttr::Exist => Any::from(1i64),
            DeviceAttr::DeviceName => Any::from(physical.name.as_str()),
            DeviceAttr::MaxThreadsPerBlock => {
                Any::from(i64::from(limits.max_compute_work_group_invocations))
            }
            DeviceAttr::WarpSize => Any::from(i64::from(physical.subgroup_size)),
            DeviceAttr::MaxSharedMemoryPerBlock => {
                Any::from(i64::from(limits.max_compute_shared_memory_size))
            }
            DeviceAttr::ComputeVersion | DeviceAttr::ApiVersion => {
                Any::from(version_text(physical.properties.api_version))
            }
            DeviceAttr::DriverVersion => Any::from(i64::from(physical.properties.driver_version)),
            DeviceAttr::MaxThreadDimensions => Any::from(format!("[{x}, {y}, {z}]")),
            DeviceAttr::TotalGlobalMemory => {
                let memory = &physical.memory;
                let local: u64 = memory.memory_heaps[..memory.memory_heap_count as usize]
                    .iter()
                    .filter(|h| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
                    .map(|h| h.size)
                    .sum();
                Any::from(local as i64)
            }
            _ => return Ok(None),
        }))
    }
}

impl DeviceApi for VulkanDeviceApi {
    fn name(&self) -> &str {
        "vulkan"
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
        _dtype_hint: DataType,
    ) -> Result<*mut c_void> {
        // Each allocation is a buffer of its own, whose offset 0 meets any alignment.
        let buffer = Arc::new(VulkanBuffer::new(&self.device(device)?, nbytes as u64)?);
        let handle = Arc::as_ptr(&buffer) as *mut c_void;
        lock(&self.buffers).insert(handle as usize, buffer);
        Ok(handle)
    }

    unsafe fn free(&self, device: Device, ptr: *mut c_void) -> Result<()> {
        let buffer = self.buffer(ptr, device.device_id())?;
        // Like Apache TVM: the work queued so far completes first.
        buffer.device.finish()?;
        lock(&self.buffers).remove(&(ptr as usize));
        Ok(())
    }

    unsafe fn copy(&self, from: &DLTensor, to: &DLTensor, stream: StreamHandle) -> Result<()> {
        require_default_stream("Vulkan", stream)?;
        // SAFETY: forwarded from the caller (valid descriptors, checked shapes).
        Ok(unsafe { crate::copy::copy_tensors(self, from, to) }?)
    }

    fn create_stream(&self, _device: Device) -> Result<StreamHandle> {
        // One queue per device, as in Apache TVM: the default stream is the only one.
        Ok(StreamHandle::NULL)
    }

    unsafe fn free_stream(&self, _device: Device, stream: StreamHandle) -> Result<()> {
        require_default_stream("Vulkan", stream)
    }

    fn check_raw_stream(&self, _device: Device, stream: StreamHandle) -> Result<()> {
        require_default_stream("Vulkan", stream)
    }

    fn sync_stream(&self, device: Device, stream: StreamHandle) -> Result<()> {
        require_default_stream("Vulkan", stream)?;
        Ok(self.device(device)?.finish()?)
    }
}
