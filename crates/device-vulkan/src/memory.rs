//! Device memory: one `VkBuffer` with its own memory per allocation, mapped for the life of the
//! buffer when the device has host-visible memory, and host views of a byte range of a buffer
//! (the mapping itself, or a staging buffer when the memory is not host-visible).

use std::ops::Range;
use std::sync::Arc;

use ash::vk;
use device_kit::buffer::{DeviceBuffer, HostAccess, Placement};

use crate::device::VulkanDevice;
use crate::error::{VkResult, VulkanCall, VulkanError, vk_error};

/// A buffer and the memory bound to it. The tensor `data` of a Vulkan tensor is the address of
/// one of these (an opaque handle, as `VulkanBuffer*` is in Apache TVM's runtime).
pub struct VulkanBuffer {
    pub(crate) device: Arc<VulkanDevice>,
    pub(crate) raw: vk::Buffer,
    memory: vk::DeviceMemory,
    /// Usable bytes (what was asked for).
    pub(crate) size: u64,
    /// The mapped memory, when the host can address it.
    mapped: Option<MappedPtr>,
}

/// The host address of mapped device memory.
#[derive(Clone, Copy)]
struct MappedPtr(*mut u8);

// SAFETY: the mapping is valid from any thread while its buffer lives; accesses are ordered by
// the device's queue lock and the caller's synchronization.
unsafe impl Send for MappedPtr {}
// SAFETY: as above.
unsafe impl Sync for MappedPtr {}

impl VulkanBuffer {
    /// A buffer of `size` bytes: mapped when `memory_type` is host-visible.
    fn with_memory_type(
        device: &Arc<VulkanDevice>,
        size: u64,
        memory_type: u32,
        map: bool,
        usage: Option<vk::BufferUsageFlags>,
    ) -> VkResult<VulkanBuffer> {
        let raw = match usage {
            Some(usage) => device.create_buffer_for(size, usage)?,
            None => device.create_raw_buffer(size)?,
        };
        let mut buffer = VulkanBuffer {
            device: Arc::clone(device),
            raw,
            memory: vk::DeviceMemory::null(),
            size,
            mapped: None,
        };
        // SAFETY: `raw` is a live buffer of this device.
        let requirements = unsafe { device.raw.get_buffer_memory_requirements(raw) };
        let info = vk::MemoryAllocateInfo::default()
            .allocation_size(requirements.size)
            .memory_type_index(memory_type);
        // SAFETY: allocation and binding on a live device; on failure Drop frees what exists.
        unsafe {
            buffer.memory = device
                .raw
                .allocate_memory(&info, None)
                .map_err(|e| match e {
                    vk::Result::ERROR_OUT_OF_DEVICE_MEMORY
                    | vk::Result::ERROR_OUT_OF_HOST_MEMORY => VulkanError::OutOfMemory(format!(
                        "cannot allocate {size} bytes on Vulkan device '{}' ({e})",
                        device.physical.name
                    )),
                    e => vk_error("vkAllocateMemory", e),
                })?;
            device
                .raw
                .bind_buffer_memory(raw, buffer.memory, 0)
                .map_err(|e| vk_error("vkBindBufferMemory", e))?;
            if map {
                let ptr = device
                    .raw
                    .map_memory(
                        buffer.memory,
                        0,
                        vk::WHOLE_SIZE,
                        vk::MemoryMapFlags::empty(),
                    )
                    .map_err(|e| vk_error("vkMapMemory", e))?;
                buffer.mapped = Some(MappedPtr(ptr.cast()));
            }
        }
        Ok(buffer)
    }

    /// A storage buffer of `size` bytes: host-mapped memory where the device offers it,
    /// device-local memory otherwise.
    pub(crate) fn new(device: &Arc<VulkanDevice>, size: u64) -> VkResult<VulkanBuffer> {
        match device.mapped_memory_type {
            Some(t) => VulkanBuffer::with_memory_type(device, size, t, true, None),
            None => {
                VulkanBuffer::with_memory_type(device, size, device.local_memory_type, false, None)
            }
        }
    }

    /// A mapped buffer for staging copies.
    fn staging(device: &Arc<VulkanDevice>, size: u64) -> VkResult<VulkanBuffer> {
        VulkanBuffer::with_memory_type(device, size, device.staging_memory_type, true, None)
    }

    /// A uniform buffer holding `bytes` (a kernel's params block), in host-visible memory.
    pub(crate) fn uniform(device: &Arc<VulkanDevice>, bytes: &[u8]) -> VkResult<VulkanBuffer> {
        let usage = Some(vk::BufferUsageFlags::UNIFORM_BUFFER);
        let size = bytes.len() as u64;
        let buffer =
            VulkanBuffer::with_memory_type(device, size, device.staging_memory_type, true, usage)?;
        let Some(MappedPtr(host)) = buffer.mapped else {
            unreachable!("staging memory is mapped");
        };
        // SAFETY: the mapping holds at least `size` bytes and nothing else uses the new buffer.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), host, bytes.len()) };
        Ok(buffer)
    }

    /// Whether the host maps this buffer directly.
    pub(crate) fn is_mapped(&self) -> bool {
        self.mapped.is_some()
    }

    /// Runs `f` on a host view of `range` of this buffer (checked by the caller): the mapping
    /// itself, or a staging buffer that holds the range's bytes first when `read` and is copied
    /// back afterwards when `write`. Work queued on the device finishes first.
    pub(crate) fn with_host_view<T>(
        self: &Arc<Self>,
        range: Range<u64>,
        read: bool,
        write: bool,
        f: impl FnOnce(*mut u8) -> T,
    ) -> VkResult<T> {
        self.device.finish()?;
        if let Some(MappedPtr(ptr)) = self.mapped {
            return Ok(f(ptr.wrapping_add(range.start as usize)));
        }
        let len = range.end - range.start;
        let staging = Arc::new(VulkanBuffer::staging(&self.device, len)?);
        let Some(MappedPtr(host)) = staging.mapped else {
            unreachable!("staging buffers are mapped");
        };
        let copy = |src: vk::Buffer, src_offset, dst: vk::Buffer, dst_offset| {
            let region = [vk::BufferCopy {
                src_offset,
                dst_offset,
                size: len,
            }];
            self.device.run_now(|cmd, _| {
                // SAFETY: both buffers are live and hold the region; `cmd` is recording.
                unsafe { self.device.raw.cmd_copy_buffer(cmd, src, dst, &region) };
                Ok(true)
            })
        };
        if read && len > 0 {
            copy(self.raw, range.start, staging.raw, 0)?;
        }
        let out = f(host);
        if write && len > 0 {
            copy(staging.raw, 0, self.raw, range.start)?;
        }
        Ok(out)
    }
}

impl DeviceBuffer for VulkanBuffer {
    type Failure = VulkanCall;

    fn placement(&self) -> Placement {
        let (device_index, device_id) = (self.device.physical_index, self.device.id);
        let size = self.size;
        Placement {
            device_index,
            device_id,
            size,
        }
    }

    fn access(self: &Arc<Self>, access: HostAccess<'_>) -> VkResult<()> {
        // A mapped buffer is read and written in place; the others through staging.
        match access {
            HostAccess::Read { extent, f } => {
                let start = extent.start;
                self.with_host_view(extent, true, false, |view| f(view, start))
            }
            HostAccess::Update {
                extent,
                read_first,
                f,
            } => {
                let start = extent.start;
                self.with_host_view(extent, read_first, true, |view| f(view, start))
            }
            HostAccess::Write { offset, bytes } => {
                let extent = offset..offset + bytes.len() as u64;
                self.with_host_view(extent, false, true, |view| {
                    // SAFETY: the view holds the extent, `bytes.len()` bytes.
                    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), view, bytes.len()) }
                })
            }
        }
    }

    fn copy_to(self: &Arc<Self>, dst: &Arc<Self>, ranges: [&Range<u64>; 2]) -> VkResult<bool> {
        let [from, to] = ranges;
        let region = [vk::BufferCopy {
            src_offset: from.start,
            dst_offset: to.start,
            size: from.end - from.start,
        }];
        let keep: Vec<Arc<dyn std::any::Any + Send + Sync>> = vec![self.clone(), dst.clone()];
        self.device.record(keep, |cmd, _| {
            // SAFETY: both buffers are live (the batch keeps them) and hold the region.
            unsafe {
                self.device
                    .raw
                    .cmd_copy_buffer(cmd, self.raw, dst.raw, &region)
            };
            Ok(true)
        })?;
        Ok(true)
    }
}

impl Drop for VulkanBuffer {
    fn drop(&mut self) {
        // SAFETY: the last reference is gone and no pending batch uses the buffer (batches keep
        // their buffers alive); null handles are skipped by Vulkan.
        unsafe {
            if self.mapped.is_some() {
                self.device.raw.unmap_memory(self.memory);
            }
            self.device.raw.destroy_buffer(self.raw, None);
            self.device.raw.free_memory(self.memory, None);
        }
    }
}
