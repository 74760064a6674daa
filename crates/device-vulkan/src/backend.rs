//! [`VulkanBackend`]: Vulkan as a buffer-handle backend of the kit. The loader is opened, and
//! the instance created, on first use; logical devices are created on their first use.

use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

use ash::vk;
use device_kit::buffer::{BufferBackend, BufferTable, DeviceSlots};
use tvm_ffi::{Any, DataType, Device};
use tvm_runtime::device::DeviceAttr;

use crate::device::VulkanDevice;
use crate::error::{VkResult, VulkanCall, VulkanError};
use crate::instance::{Instance, VulkanOptions};
use crate::memory::VulkanBuffer;

/// The Vulkan backend (device type `kDLVulkan`, 7): devices by their index in the loader's list.
pub struct VulkanBackend {
    /// `None`: read from the environment when the instance is created.
    options: Option<VulkanOptions>,
    instance: OnceLock<VkResult<Arc<Instance>>>,
    devices: DeviceSlots<VulkanDevice>,
    buffers: BufferTable<VulkanBuffer>,
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

impl VulkanBackend {
    /// A backend with the given options; nothing is loaded until it is used.
    pub fn new(options: VulkanOptions) -> VulkanBackend {
        VulkanBackend::with_options(Some(options))
    }

    /// A backend that reads its options from the environment ([`VulkanOptions::from_env`]) when
    /// it is first used.
    pub fn from_env() -> VulkanBackend {
        VulkanBackend::with_options(None)
    }

    fn with_options(options: Option<VulkanOptions>) -> VulkanBackend {
        VulkanBackend {
            options,
            instance: OnceLock::new(),
            devices: DeviceSlots::default(),
            buffers: BufferTable::default(),
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
    pub fn is_host_mapped(&self, data: *mut c_void) -> Result<bool, VulkanError> {
        Ok(self.buffers.get_anywhere(data)?.is_mapped())
    }

    /// The logical device of `device`, created on first use and created again after it was
    /// lost (the memory of the lost one stays unusable).
    pub(crate) fn device(&self, device: Device) -> VkResult<Arc<VulkanDevice>> {
        let index = BufferBackend::device_index(self, device)?;
        self.devices
            .get_or_create(index, VulkanDevice::is_lost, || {
                VulkanDevice::new(self.instance()?, index)
            })
    }
}

impl BufferBackend for VulkanBackend {
    type Failure = VulkanCall;
    type Buffer = VulkanBuffer;

    const DEVICE_TYPE: i32 = tvm_ffi::abi::kDLVulkan;

    fn buffers(&self) -> &BufferTable<VulkanBuffer> {
        &self.buffers
    }

    fn device_names(&self) -> VkResult<Vec<String>> {
        let instance = self.instance()?;
        Ok(instance.devices.iter().map(|d| d.name.clone()).collect())
    }

    fn device_attr(&self, device: Device, attr: DeviceAttr) -> VkResult<Option<Any>> {
        let index = BufferBackend::device_index(self, device)?;
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

    fn allocate(
        &self,
        device: Device,
        nbytes: u64,
        _dtype_hint: DataType,
    ) -> VkResult<Arc<VulkanBuffer>> {
        Ok(Arc::new(VulkanBuffer::new(&self.device(device)?, nbytes)?))
    }

    fn before_free(&self, buffer: &VulkanBuffer) -> VkResult<()> {
        // Like Apache TVM: the work queued so far completes first.
        buffer.device.finish()
    }

    fn synchronize(&self, device: Device) -> VkResult<()> {
        self.device(device)?.finish()
    }
}
