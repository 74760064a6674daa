//! One logical device: its compute queue (the device's one stream) and the batch of commands
//! recorded on it. Kernel launches and device-side copies are recorded into the open batch;
//! [`VulkanDevice::finish`] submits it and waits, which every host access to device memory,
//! every free and every stream synchronization does first.

use std::any::Any as StdAny;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ash::vk;

use crate::error::{VkResult, VulkanCall, VulkanError, vk_error};
use crate::instance::{Instance, PhysicalDevice};

/// Launches recorded in one batch before it is submitted on its own.
const MAX_BATCH_COMMANDS: usize = 256;
/// Descriptor sets (and storage-buffer descriptors per set) one batch may hold.
const POOL_SETS: u32 = MAX_BATCH_COMMANDS as u32;
const POOL_BUFFERS_PER_SET: u32 = 16;

/// Identities of the logical devices made in this process, never reused.
static NEXT_DEVICE_ID: AtomicU64 = AtomicU64::new(1);

/// A logical device with one compute queue.
pub(crate) struct VulkanDevice {
    /// This device among all made, also after a lost device of the same index is replaced:
    /// what caches of per-device objects (pipelines) are keyed by.
    pub(crate) id: u64,
    /// Set once a submission reported `VK_ERROR_DEVICE_LOST`: the backend makes a new device
    /// for the index at its next use.
    lost: AtomicBool,
    pub(crate) instance: Arc<Instance>,
    pub(crate) physical: PhysicalDevice,
    /// The device's index in the instance's list (its `vulkan:N`).
    pub(crate) physical_index: usize,
    pub(crate) raw: ash::Device,
    /// The memory type for storage buffers the host maps directly, if the device has one.
    pub(crate) mapped_memory_type: Option<u32>,
    /// A device-local memory type for storage buffers (the staging path).
    pub(crate) local_memory_type: u32,
    /// A host-visible, coherent memory type for staging buffers.
    pub(crate) staging_memory_type: u32,
    queue: Mutex<Queue>,
}

/// The queue and the commands recorded for it but not submitted yet.
struct Queue {
    raw: vk::Queue,
    command_pool: vk::CommandPool,
    command_buffer: vk::CommandBuffer,
    descriptor_pool: vk::DescriptorPool,
    fence: vk::Fence,
    /// Whether the command buffer is recording.
    open: bool,
    /// Commands in the open batch.
    recorded: usize,
    /// Buffers and pipelines the open batch uses, kept alive until it completes.
    keep_alive: Vec<Arc<dyn StdAny + Send + Sync>>,
}

/// A memory type index among `bits` with all of `flags`.
fn memory_type(
    memory: &vk::PhysicalDeviceMemoryProperties,
    bits: u32,
    flags: vk::MemoryPropertyFlags,
) -> Option<u32> {
    (0..memory.memory_type_count).find(|i| {
        bits & (1 << i) != 0
            && memory.memory_types[*i as usize]
                .property_flags
                .contains(flags)
    })
}

impl VulkanDevice {
    /// Creates the logical device of physical device `index`.
    pub(crate) fn new(instance: Arc<Instance>, index: usize) -> VkResult<VulkanDevice> {
        let physical = instance.devices[index].clone();
        let family = physical.compute_family.ok_or_else(|| {
            VulkanError::unavailable(format!(
                "Vulkan device {index} ({}) has no compute queue",
                physical.name
            ))
        })?;
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        // Every feature the device has (8/16/64-bit types, storage access, ...), so that shaders
        // may use any of them.
        let supports_1_2 = physical.properties.api_version >= vk::API_VERSION_1_2
            && instance.api_version >= vk::API_VERSION_1_2;
        let mut features11 = vk::PhysicalDeviceVulkan11Features::default();
        let mut features12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut features = vk::PhysicalDeviceFeatures2::default();
        if supports_1_2 {
            features = features
                .push_next(&mut features11)
                .push_next(&mut features12);
        }
        // SAFETY: a query of this instance's device; the chain lives across the call.
        unsafe {
            instance
                .raw
                .get_physical_device_features2(physical.raw, &mut features)
        };
        let info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .push_next(&mut features);
        // SAFETY: `info` and its chain live across the call.
        let raw = unsafe { instance.raw.create_device(physical.raw, &info, None) }
            .map_err(|e| vk_error("vkCreateDevice", e))?;
        let mut device = VulkanDevice {
            id: NEXT_DEVICE_ID.fetch_add(1, Ordering::Relaxed),
            lost: AtomicBool::new(false),
            mapped_memory_type: None,
            local_memory_type: 0,
            staging_memory_type: 0,
            queue: Mutex::new(Queue {
                // SAFETY: family `family` has one queue, created above.
                raw: unsafe { raw.get_device_queue(family, 0) },
                command_pool: vk::CommandPool::null(),
                command_buffer: vk::CommandBuffer::null(),
                descriptor_pool: vk::DescriptorPool::null(),
                fence: vk::Fence::null(),
                open: false,
                recorded: 0,
                keep_alive: Vec::new(),
            }),
            raw,
            physical,
            physical_index: index,
            instance,
        };
        // On failure from here, Drop destroys what was made (null handles are ignored).
        device.choose_memory_types()?;
        device.create_queue_objects(family)?;
        Ok(device)
    }

    fn choose_memory_types(&mut self) -> VkResult<()> {
        // The memory types a storage buffer may use, from a probe buffer.
        let probe = self.create_raw_buffer(4)?;
        // SAFETY: `probe` is a live buffer of this device, destroyed right after.
        let requirements = unsafe {
            let r = self.raw.get_buffer_memory_requirements(probe);
            self.raw.destroy_buffer(probe, None);
            r
        };
        let memory = &self.physical.memory;
        let bits = requirements.memory_type_bits;
        let local = vk::MemoryPropertyFlags::DEVICE_LOCAL;
        let host = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        self.mapped_memory_type = memory_type(memory, bits, local | host)
            .filter(|_| !self.instance.options.force_staging);
        self.local_memory_type = memory_type(memory, bits, local)
            .or_else(|| memory_type(memory, bits, vk::MemoryPropertyFlags::empty()))
            .ok_or_else(|| VulkanError::unavailable("no memory type holds storage buffers"))?;
        self.staging_memory_type = memory_type(memory, bits, host).ok_or_else(|| {
            VulkanError::unavailable("no host-visible, coherent memory type for staging copies")
        })?;
        Ok(())
    }

    fn create_queue_objects(&mut self, family: u32) -> VkResult<()> {
        let raw = &self.raw;
        let queue = self.queue.get_mut().unwrap_or_else(PoisonError::into_inner);
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(family)
            .flags(vk::CommandPoolCreateFlags::TRANSIENT);
        // SAFETY: creations on a live device; each result is stored for Drop to destroy.
        unsafe {
            queue.command_pool = raw
                .create_command_pool(&pool_info, None)
                .map_err(|e| vk_error("vkCreateCommandPool", e))?;
            let alloc = vk::CommandBufferAllocateInfo::default()
                .command_pool(queue.command_pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1);
            queue.command_buffer = raw
                .allocate_command_buffers(&alloc)
                .map_err(|e| vk_error("vkAllocateCommandBuffers", e))?[0];
            let sizes = [
                vk::DescriptorPoolSize {
                    ty: vk::DescriptorType::STORAGE_BUFFER,
                    descriptor_count: POOL_SETS * POOL_BUFFERS_PER_SET,
                },
                // One params block per launch, for kernels that take scalars that way.
                vk::DescriptorPoolSize {
                    ty: vk::DescriptorType::UNIFORM_BUFFER,
                    descriptor_count: POOL_SETS,
                },
            ];
            let pool = vk::DescriptorPoolCreateInfo::default()
                .max_sets(POOL_SETS)
                .pool_sizes(&sizes);
            queue.descriptor_pool = raw
                .create_descriptor_pool(&pool, None)
                .map_err(|e| vk_error("vkCreateDescriptorPool", e))?;
            queue.fence = raw
                .create_fence(&vk::FenceCreateInfo::default(), None)
                .map_err(|e| vk_error("vkCreateFence", e))?;
        }
        Ok(())
    }

    /// A buffer object of `size` bytes for storage and transfers, with no memory bound.
    pub(crate) fn create_raw_buffer(&self, size: u64) -> VkResult<vk::Buffer> {
        self.create_buffer_for(
            size,
            vk::BufferUsageFlags::STORAGE_BUFFER
                | vk::BufferUsageFlags::TRANSFER_SRC
                | vk::BufferUsageFlags::TRANSFER_DST,
        )
    }

    /// A buffer object of `size` bytes for `usage`, with no memory bound.
    pub(crate) fn create_buffer_for(
        &self,
        size: u64,
        usage: vk::BufferUsageFlags,
    ) -> VkResult<vk::Buffer> {
        let info = vk::BufferCreateInfo::default()
            .size(size.max(1))
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: creation on a live device.
        unsafe { self.raw.create_buffer(&info, None) }.map_err(|e| vk_error("vkCreateBuffer", e))
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a submission found the device lost: nothing more runs on it.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// Records commands into the open batch (started if needed): `record` gets the command
    /// buffer and the descriptor pool of the batch and returns `false`, having recorded nothing,
    /// when the pool has no room left; the batch is then submitted and `record` runs again on a
    /// fresh one. What `keep` holds stays alive until the batch completes. A barrier after the
    /// commands orders them before everything recorded later and before host reads.
    pub(crate) fn record(
        &self,
        keep: Vec<Arc<dyn StdAny + Send + Sync>>,
        mut record: impl FnMut(vk::CommandBuffer, vk::DescriptorPool) -> VkResult<bool>,
    ) -> VkResult<()> {
        let mut queue = self.lock();
        if queue.recorded >= MAX_BATCH_COMMANDS {
            self.submit_and_wait(&mut queue)?;
        }
        loop {
            if !queue.open {
                let begin = vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
                // SAFETY: the command buffer is not recording or pending (its last batch was
                // waited for and the pool reset).
                unsafe { self.raw.begin_command_buffer(queue.command_buffer, &begin) }
                    .map_err(|e| vk_error("vkBeginCommandBuffer", e))?;
                queue.open = true;
            }
            if record(queue.command_buffer, queue.descriptor_pool)? {
                break;
            }
            if queue.recorded == 0 {
                return Err(VulkanError::invalid(format!(
                    "a command needs more descriptors than a batch holds ({POOL_SETS} sets, \
                     {} storage buffers)",
                    POOL_SETS * POOL_BUFFERS_PER_SET
                )));
            }
            self.submit_and_wait(&mut queue)?;
        }
        queue.recorded += 1;
        queue.keep_alive.extend(keep);
        let barrier = vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(
                vk::AccessFlags::SHADER_READ
                    | vk::AccessFlags::SHADER_WRITE
                    | vk::AccessFlags::TRANSFER_READ
                    | vk::AccessFlags::TRANSFER_WRITE
                    | vk::AccessFlags::HOST_READ,
            );
        // SAFETY: the command buffer is recording.
        unsafe {
            self.raw.cmd_pipeline_barrier(
                queue.command_buffer,
                vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::COMPUTE_SHADER
                    | vk::PipelineStageFlags::TRANSFER
                    | vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &[barrier],
                &[],
                &[],
            )
        };
        Ok(())
    }

    /// Records commands and runs them now: [`VulkanDevice::record`] then
    /// [`VulkanDevice::finish`].
    pub(crate) fn run_now(
        &self,
        record: impl FnMut(vk::CommandBuffer, vk::DescriptorPool) -> VkResult<bool>,
    ) -> VkResult<()> {
        self.record(Vec::new(), record)?;
        self.finish()
    }

    /// Allocates a descriptor set of `layout` from the open batch's pool; when the pool is full,
    /// submits the batch and returns `None` so that the caller records again.
    pub(crate) fn allocate_descriptor_set(
        &self,
        pool: vk::DescriptorPool,
        layout: vk::DescriptorSetLayout,
    ) -> VkResult<Option<vk::DescriptorSet>> {
        let layouts = [layout];
        let info = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(pool)
            .set_layouts(&layouts);
        // SAFETY: the pool belongs to this device and is only used under the queue lock.
        match unsafe { self.raw.allocate_descriptor_sets(&info) } {
            Ok(sets) => Ok(Some(sets[0])),
            Err(vk::Result::ERROR_OUT_OF_POOL_MEMORY | vk::Result::ERROR_FRAGMENTED_POOL) => {
                Ok(None)
            }
            Err(e) => Err(vk_error("vkAllocateDescriptorSets", e)),
        }
    }

    /// Submits the open batch (if any) and waits until it is done.
    pub(crate) fn finish(&self) -> VkResult<()> {
        let mut queue = self.lock();
        self.submit_and_wait(&mut queue)
    }

    fn submit_and_wait(&self, queue: &mut Queue) -> VkResult<()> {
        if !queue.open {
            return Ok(());
        }
        queue.open = false;
        queue.recorded = 0;
        let buffers = [queue.command_buffer];
        let submit = [vk::SubmitInfo::default().command_buffers(&buffers)];
        // SAFETY: the command buffer was recorded under this lock; the fence is unsignaled.
        let result = unsafe {
            self.raw
                .end_command_buffer(queue.command_buffer)
                .map_err(|e| vk_error("vkEndCommandBuffer", e))
                .and_then(|()| {
                    self.raw
                        .queue_submit(queue.raw, &submit, queue.fence)
                        .map_err(|e| vk_error("vkQueueSubmit", e))
                })
                .and_then(|()| {
                    self.raw
                        .wait_for_fences(&[queue.fence], true, u64::MAX)
                        .map_err(|e| vk_error("vkWaitForFences", e))
                })
        };
        if let Err(VulkanError::Failed(VulkanCall {
            result: vk::Result::ERROR_DEVICE_LOST,
            ..
        })) = &result
        {
            self.lost.store(true, Ordering::Release);
        }
        if result.is_err() {
            // The batch may still be pending (a lost device): wait for the queue before the
            // pools are reset, so that the device can be used again.
            // SAFETY: the queue is externally synchronized by the lock.
            let _ = unsafe { self.raw.queue_wait_idle(queue.raw) };
        }
        // SAFETY: nothing of the batch is pending any more.
        unsafe {
            let _ = self.raw.reset_fences(&[queue.fence]);
            let _ = self
                .raw
                .reset_command_pool(queue.command_pool, vk::CommandPoolResetFlags::empty());
            let _ = self.raw.reset_descriptor_pool(
                queue.descriptor_pool,
                vk::DescriptorPoolResetFlags::empty(),
            );
        }
        queue.keep_alive.clear();
        result
    }
}

impl Drop for VulkanDevice {
    fn drop(&mut self) {
        let queue = self.queue.get_mut().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: no other user is left (this is the last reference); the device is idle before
        // its objects are destroyed, and null handles are skipped by Vulkan.
        unsafe {
            let _ = self.raw.device_wait_idle();
            self.raw.destroy_fence(queue.fence, None);
            self.raw
                .destroy_descriptor_pool(queue.descriptor_pool, None);
            self.raw.destroy_command_pool(queue.command_pool, None);
            self.raw.destroy_device(None);
        }
    }
}
