//! A bare `ash` program that dispatches `add_one` the way a hand-written Vulkan program would:
//! pipeline, descriptor set and buffers made once; per launch, the commands the runtime records
//! (bind the pipeline and the set, push the scalar, dispatch, a barrier), submitted in batches
//! of the runtime's size and waited for at the end.

use std::ffi::CStr;

use ash::vk;

/// Launches recorded per submission (the runtime's batch size).
const BATCH: usize = 256;
/// Floats in each of the two buffers (one work group of 64).
pub const ELEMENTS: u32 = 64;

/// A device with the `add_one` pipeline and its two buffers.
pub struct BareVulkan {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    queue: vk::Queue,
    command_pool: vk::CommandPool,
    command_buffer: vk::CommandBuffer,
    fence: vk::Fence,
    descriptor_pool: vk::DescriptorPool,
    set: vk::DescriptorSet,
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    shader: vk::ShaderModule,
    pipeline: vk::Pipeline,
    buffers: [vk::Buffer; 2],
    memory: [vk::DeviceMemory; 2],
    /// The device's name.
    name: String,
}

fn check<T>(what: &str, result: Result<T, vk::Result>) -> Result<T, String> {
    result.map_err(|e| format!("{what}: {e}"))
}

impl BareVulkan {
    /// Device 0 of the system's Vulkan driver, with `add_one` compiled from `words`.
    pub fn new(words: &[u32]) -> Result<BareVulkan, String> {
        // SAFETY: loading the system's Vulkan loader; its entry points outlive every object
        // made from them (the entry is a field, dropped last).
        let entry = unsafe { ash::Entry::load() }.map_err(|e| format!("libvulkan: {e}"))?;
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
        let info = vk::InstanceCreateInfo::default().application_info(&app);
        // SAFETY: `info` lives across the call.
        let instance = check("vkCreateInstance", unsafe {
            entry.create_instance(&info, None)
        })?;
        // SAFETY: a query of a live instance.
        let physical = check("vkEnumeratePhysicalDevices", unsafe {
            instance.enumerate_physical_devices()
        })?
        .into_iter()
        .next()
        .ok_or("no Vulkan device")?;
        // SAFETY: queries of a device of this instance.
        let (families, properties, memory) = unsafe {
            (
                instance.get_physical_device_queue_family_properties(physical),
                instance.get_physical_device_properties(physical),
                instance.get_physical_device_memory_properties(physical),
            )
        };
        let family = families
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .ok_or("no compute queue")? as u32;
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        let info = vk::DeviceCreateInfo::default().queue_create_infos(&queues);
        // SAFETY: `info` lives across the call.
        let device = check("vkCreateDevice", unsafe {
            instance.create_device(physical, &info, None)
        })?;
        // SAFETY: `properties.device_name` is a NUL-terminated string from the driver.
        let name = unsafe { CStr::from_ptr(properties.device_name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let mut bare = BareVulkan {
            _entry: entry,
            instance,
            // SAFETY: family `family` has the one queue created above.
            queue: unsafe { device.get_device_queue(family, 0) },
            device,
            command_pool: vk::CommandPool::null(),
            command_buffer: vk::CommandBuffer::null(),
            fence: vk::Fence::null(),
            descriptor_pool: vk::DescriptorPool::null(),
            set: vk::DescriptorSet::null(),
            set_layout: vk::DescriptorSetLayout::null(),
            layout: vk::PipelineLayout::null(),
            shader: vk::ShaderModule::null(),
            pipeline: vk::Pipeline::null(),
            buffers: [vk::Buffer::null(); 2],
            memory: [vk::DeviceMemory::null(); 2],
            name,
        };
        // From here on, Drop destroys whatever was made.
        bare.create_buffers(&memory)?;
        bare.create_pipeline(words)?;
        bare.create_commands(family)?;
        Ok(bare)
    }

    /// The device's name.
    pub fn device_name(&self) -> &str {
        &self.name
    }

    fn create_buffers(
        &mut self,
        memory: &vk::PhysicalDeviceMemoryProperties,
    ) -> Result<(), String> {
        let host = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        for i in 0..2 {
            let info = vk::BufferCreateInfo::default()
                .size(u64::from(ELEMENTS) * 4)
                .usage(vk::BufferUsageFlags::STORAGE_BUFFER);
            // SAFETY: creations on the live device; each handle is stored at once for Drop; the
            // mapped range is the whole allocation, written before the buffer is used.
            unsafe {
                self.buffers[i] = check("vkCreateBuffer", self.device.create_buffer(&info, None))?;
                let needs = self.device.get_buffer_memory_requirements(self.buffers[i]);
                let type_index = (0..memory.memory_type_count)
                    .find(|&t| {
                        needs.memory_type_bits & (1 << t) != 0
                            && memory.memory_types[t as usize]
                                .property_flags
                                .contains(host)
                    })
                    .ok_or("no host-visible memory type")?;
                let alloc = vk::MemoryAllocateInfo::default()
                    .allocation_size(needs.size)
                    .memory_type_index(type_index);
                self.memory[i] = check(
                    "vkAllocateMemory",
                    self.device.allocate_memory(&alloc, None),
                )?;
                check(
                    "vkBindBufferMemory",
                    self.device
                        .bind_buffer_memory(self.buffers[i], self.memory[i], 0),
                )?;
                let ptr = check(
                    "vkMapMemory",
                    self.device.map_memory(
                        self.memory[i],
                        0,
                        vk::WHOLE_SIZE,
                        vk::MemoryMapFlags::empty(),
                    ),
                )?;
                let floats = std::slice::from_raw_parts_mut(ptr.cast::<f32>(), ELEMENTS as usize);
                for (j, f) in floats.iter_mut().enumerate() {
                    *f = if i == 0 { j as f32 } else { 0.0 };
                }
                self.device.unmap_memory(self.memory[i]);
            }
        }
        Ok(())
    }

    fn create_pipeline(&mut self, words: &[u32]) -> Result<(), String> {
        let bindings = [0, 1].map(|b| {
            vk::DescriptorSetLayoutBinding::default()
                .binding(b)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
        });
        let push = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .size(4)];
        let sizes = [vk::DescriptorPoolSize {
            ty: vk::DescriptorType::STORAGE_BUFFER,
            descriptor_count: 2,
        }];
        let device = &self.device;
        // SAFETY: creations on the live device from infos that live across each call; each
        // handle is stored at once for Drop.
        unsafe {
            let info = vk::ShaderModuleCreateInfo::default().code(words);
            self.shader = check(
                "vkCreateShaderModule",
                device.create_shader_module(&info, None),
            )?;
            let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
            self.set_layout = check(
                "vkCreateDescriptorSetLayout",
                device.create_descriptor_set_layout(&info, None),
            )?;
            let set_layouts = [self.set_layout];
            let info = vk::PipelineLayoutCreateInfo::default()
                .set_layouts(&set_layouts)
                .push_constant_ranges(&push);
            self.layout = check(
                "vkCreatePipelineLayout",
                device.create_pipeline_layout(&info, None),
            )?;
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(self.shader)
                .name(c"add_one");
            let info = [vk::ComputePipelineCreateInfo::default()
                .stage(stage)
                .layout(self.layout)];
            self.pipeline = device
                .create_compute_pipelines(vk::PipelineCache::null(), &info, None)
                .map_err(|(_, e)| format!("vkCreateComputePipelines: {e}"))?[0];
            let info = vk::DescriptorPoolCreateInfo::default()
                .max_sets(1)
                .pool_sizes(&sizes);
            self.descriptor_pool = check(
                "vkCreateDescriptorPool",
                device.create_descriptor_pool(&info, None),
            )?;
            let info = vk::DescriptorSetAllocateInfo::default()
                .descriptor_pool(self.descriptor_pool)
                .set_layouts(&set_layouts);
            self.set = check(
                "vkAllocateDescriptorSets",
                device.allocate_descriptor_sets(&info),
            )?[0];
            let infos = self.buffers.map(|buffer| vk::DescriptorBufferInfo {
                buffer,
                offset: 0,
                range: vk::WHOLE_SIZE,
            });
            let writes: Vec<_> = infos
                .iter()
                .enumerate()
                .map(|(b, info)| {
                    vk::WriteDescriptorSet::default()
                        .dst_set(self.set)
                        .dst_binding(b as u32)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .buffer_info(std::slice::from_ref(info))
                })
                .collect();
            device.update_descriptor_sets(&writes, &[]);
        }
        Ok(())
    }

    fn create_commands(&mut self, family: u32) -> Result<(), String> {
        let info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(family)
            .flags(vk::CommandPoolCreateFlags::TRANSIENT);
        // SAFETY: creations on the live device; each handle is stored at once for Drop.
        unsafe {
            self.command_pool = check(
                "vkCreateCommandPool",
                self.device.create_command_pool(&info, None),
            )?;
            let alloc = vk::CommandBufferAllocateInfo::default()
                .command_pool(self.command_pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1);
            self.command_buffer = check(
                "vkAllocateCommandBuffers",
                self.device.allocate_command_buffers(&alloc),
            )?[0];
            self.fence = check(
                "vkCreateFence",
                self.device
                    .create_fence(&vk::FenceCreateInfo::default(), None),
            )?;
        }
        Ok(())
    }

    /// Dispatches `add_one` `launches` times and waits for the last.
    pub fn run(&self, launches: usize) -> Result<(), String> {
        let device = &self.device;
        let n = (ELEMENTS as i32).to_le_bytes();
        let barrier = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE)
            .dst_access_mask(vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE)];
        let mut left = launches;
        while left > 0 {
            let batch = left.min(BATCH);
            left -= batch;
            let begin = vk::CommandBufferBeginInfo::default()
                .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
            let cmd = self.command_buffer;
            let buffers = [cmd];
            let submit = [vk::SubmitInfo::default().command_buffers(&buffers)];
            // SAFETY: the command buffer is not pending (the last batch was waited for and the
            // pool reset); the pipeline, set and buffers are live.
            unsafe {
                check(
                    "vkBeginCommandBuffer",
                    device.begin_command_buffer(cmd, &begin),
                )?;
                for _ in 0..batch {
                    device.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, self.pipeline);
                    device.cmd_bind_descriptor_sets(
                        cmd,
                        vk::PipelineBindPoint::COMPUTE,
                        self.layout,
                        0,
                        &[self.set],
                        &[],
                    );
                    device.cmd_push_constants(
                        cmd,
                        self.layout,
                        vk::ShaderStageFlags::COMPUTE,
                        0,
                        &n,
                    );
                    device.cmd_dispatch(cmd, 1, 1, 1);
                    device.cmd_pipeline_barrier(
                        cmd,
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        vk::DependencyFlags::empty(),
                        &barrier,
                        &[],
                        &[],
                    );
                }
                check("vkEndCommandBuffer", device.end_command_buffer(cmd))?;
                check(
                    "vkQueueSubmit",
                    device.queue_submit(self.queue, &submit, self.fence),
                )?;
                check(
                    "vkWaitForFences",
                    device.wait_for_fences(&[self.fence], true, u64::MAX),
                )?;
                check("vkResetFences", device.reset_fences(&[self.fence]))?;
                check(
                    "vkResetCommandPool",
                    device
                        .reset_command_pool(self.command_pool, vk::CommandPoolResetFlags::empty()),
                )?;
            }
        }
        Ok(())
    }
}

impl Drop for BareVulkan {
    fn drop(&mut self) {
        // SAFETY: the device is idle before its objects go; null handles are skipped by Vulkan,
        // and the instance goes last.
        unsafe {
            let device = &self.device;
            let _ = device.device_wait_idle();
            device.destroy_fence(self.fence, None);
            device.destroy_command_pool(self.command_pool, None);
            device.destroy_descriptor_pool(self.descriptor_pool, None);
            device.destroy_pipeline(self.pipeline, None);
            device.destroy_pipeline_layout(self.layout, None);
            device.destroy_descriptor_set_layout(self.set_layout, None);
            device.destroy_shader_module(self.shader, None);
            for (buffer, memory) in self.buffers.iter().zip(&self.memory) {
                device.destroy_buffer(*buffer, None);
                device.free_memory(*memory, None);
            }
            device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}
