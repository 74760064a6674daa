//! Kernel launches: compute pipelines (one per kernel and device, made on first launch) and the
//! packed function that records a dispatch, by the launch convention GPU backends share
//! ([`device_kit::kernel`]).
//!
//! Call convention of a kernel: its arguments in `arg_types` order (tensors first, bound as
//! storage buffers 0..n-1 of set 0; then scalars, packed in 8-byte slots as push constants, or
//! in a uniform buffer at binding n when the shader's flag says so: [`ScalarPassing`]), then
//! one int per thread or block tag of `launch_param_tags`, in tag order. The grid is `blockIdx.*`;
//! the block (`threadIdx.*`) is fixed by the shader and must match its `LocalSize`.

use std::ffi::CString;
use std::sync::Arc;

use ash::vk;
use device_kit::buffer::ShaderKernel;
use device_kit::buffer::kernel::{BoundBuffer, KernelShape, PipelineCache};
use device_kit::kernel::{FunctionInfo, StorageBinding};
use tvm_ffi::{AnyView, Device};

use crate::backend::VulkanBackend;
use crate::device::VulkanDevice;
use crate::error::{VkResult, vk_error};
use crate::memory::VulkanBuffer;
use crate::set_cache::SetCache;
use crate::spirv::EntryPoint;

/// How a kernel's shader takes its scalar arguments (8 bytes each, in argument order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScalarPassing {
    /// A push-constant block (what TVM's code generator emits while it fits the device's
    /// 128-byte minimum).
    PushConstants,
    /// A uniform buffer at the binding after the tensors' (shader flag `kUseUBO`), made for
    /// each launch and kept until its batch completes.
    UniformBuffer,
}

/// A compute pipeline of one kernel on one device, with its layouts.
struct Pipeline {
    device: Arc<VulkanDevice>,
    /// The descriptor set of the last launch, for kernels whose sets depend on their tensors
    /// only (not on a params block made per launch).
    sets: Option<Arc<SetCache>>,
    shader: vk::ShaderModule,
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    raw: vk::Pipeline,
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // SAFETY: the last reference is gone and no pending batch uses the pipeline (batches
        // keep theirs alive); null handles are skipped by Vulkan.
        unsafe {
            let raw = &self.device.raw;
            raw.destroy_pipeline(self.raw, None);
            raw.destroy_pipeline_layout(self.layout, None);
            raw.destroy_descriptor_set_layout(self.set_layout, None);
            raw.destroy_shader_module(self.shader, None);
        }
    }
}

/// A kernel of a `vulkan` module, ready to launch on any device of its backend.
pub struct VulkanKernel {
    backend: Arc<VulkanBackend>,
    shape: KernelShape,
    words: Arc<Vec<u32>>,
    entry: EntryPoint,
    passing: ScalarPassing,
    /// By [`VulkanDevice::id`].
    pipelines: PipelineCache<Pipeline>,
}

impl VulkanKernel {
    /// Checks `info` against the convention: tensors first, then supported scalars, known tags.
    pub(crate) fn new(
        backend: Arc<VulkanBackend>,
        info: FunctionInfo,
        words: Arc<Vec<u32>>,
        entry: EntryPoint,
        passing: ScalarPassing,
    ) -> VkResult<VulkanKernel> {
        let shape = KernelShape::new(info, |_, kind, _| Ok(kind))?;
        Ok(VulkanKernel {
            backend,
            shape,
            words,
            entry,
            passing,
            pipelines: PipelineCache::default(),
        })
    }

    /// The pipeline of this kernel on `device`, made on first use.
    fn pipeline(&self, device: &Arc<VulkanDevice>) -> VkResult<Arc<Pipeline>> {
        self.pipelines
            .get_or_make(device.id, || self.create_pipeline(device))
    }

    /// Whether scalars travel in a uniform buffer (and there are any).
    fn uses_uniform_buffer(&self) -> bool {
        self.passing == ScalarPassing::UniformBuffer && !self.shape.scalars.is_empty()
    }

    fn create_pipeline(&self, device: &Arc<VulkanDevice>) -> VkResult<Pipeline> {
        let scalar_bytes = (self.shape.scalars.len() * 8) as u32;
        let limits = &device.physical.properties.limits;
        let (push_bytes, limit, what) = match self.passing {
            ScalarPassing::PushConstants => (
                scalar_bytes,
                limits.max_push_constants_size,
                "push constants",
            ),
            ScalarPassing::UniformBuffer => {
                (0, limits.max_uniform_buffer_range, "a uniform buffer")
            }
        };
        if scalar_bytes > limit {
            return Err(self.shape.fail(format!(
                "{} scalar arguments take {scalar_bytes} bytes of {what}; the device allows \
                 {limit}",
                self.shape.scalars.len()
            )));
        }
        let sets = match self.passing {
            ScalarPassing::PushConstants => {
                Some(Arc::new(SetCache::new(device, self.shape.num_buffers)?))
            }
            ScalarPassing::UniformBuffer => None,
        };
        let mut pipeline = Pipeline {
            device: Arc::clone(device),
            sets,
            shader: vk::ShaderModule::null(),
            set_layout: vk::DescriptorSetLayout::null(),
            layout: vk::PipelineLayout::null(),
            raw: vk::Pipeline::null(),
        };
        let raw = &device.raw;
        let binding = |b: usize, kind| {
            vk::DescriptorSetLayoutBinding::default()
                .binding(b as u32)
                .descriptor_type(kind)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
        };
        let mut bindings: Vec<_> = (0..self.shape.num_buffers)
            .map(|b| binding(b, vk::DescriptorType::STORAGE_BUFFER))
            .collect();
        if self.uses_uniform_buffer() {
            bindings.push(binding(
                self.shape.num_buffers,
                vk::DescriptorType::UNIFORM_BUFFER,
            ));
        }
        let push = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .size(push_bytes)];
        let entry = CString::new(self.shape.name())
            .map_err(|_| self.shape.fail("the name contains a NUL byte".to_owned()))?;
        // SAFETY: creations on a live device from infos that live across each call; each
        // handle is stored at once so that Drop destroys it if a later step fails.
        unsafe {
            let info = vk::ShaderModuleCreateInfo::default().code(&self.words);
            pipeline.shader = raw
                .create_shader_module(&info, None)
                .map_err(|e| vk_error("vkCreateShaderModule", e))?;
            let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
            pipeline.set_layout = raw
                .create_descriptor_set_layout(&info, None)
                .map_err(|e| vk_error("vkCreateDescriptorSetLayout", e))?;
            let set_layouts = [pipeline.set_layout];
            let mut info = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts);
            if push_bytes > 0 {
                info = info.push_constant_ranges(&push);
            }
            pipeline.layout = raw
                .create_pipeline_layout(&info, None)
                .map_err(|e| vk_error("vkCreatePipelineLayout", e))?;
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(pipeline.shader)
                .name(&entry);
            let info = [vk::ComputePipelineCreateInfo::default()
                .stage(stage)
                .layout(pipeline.layout)];
            pipeline.raw = raw
                .create_compute_pipelines(vk::PipelineCache::null(), &info, None)
                .map_err(|(_, e)| vk_error("vkCreateComputePipelines", e))?[0];
        }
        Ok(pipeline)
    }

    /// The grid of a launch from its launch arguments, checked against the shader and device.
    fn grid(&self, device: &VulkanDevice, values: &[AnyView<'_>]) -> VkResult<[u32; 3]> {
        let dims = self.shape.launch.dims(values)?;
        let limits = &device.physical.properties.limits;
        for (axis, (&blocks, &max)) in dims
            .grid
            .iter()
            .zip(&limits.max_compute_work_group_count)
            .enumerate()
        {
            if blocks > max {
                return Err(self.shape.fail(format!(
                    "blockIdx.{}={blocks} is outside the device's grid range 1..={max}",
                    ["x", "y", "z"][axis]
                )));
            }
        }
        if let Some(size) = self.entry.local_size {
            for axis in (0..3).filter(|&axis| self.shape.launch.sets_block(axis)) {
                if dims.block[axis] != size[axis] {
                    return Err(self.shape.fail(format!(
                        "threadIdx.{}={} does not match the shader's work-group size {size:?}",
                        ["x", "y", "z"][axis],
                        dims.block[axis]
                    )));
                }
            }
        }
        Ok(dims.grid)
    }

    /// Launches the kernel with packed arguments (see the module docs for the convention).
    pub(crate) fn call(&self, args: &[AnyView<'_>]) -> VkResult<()> {
        let nargs = self.shape.info.arg_types.len();
        self.shape
            .launch
            .check_arg_count(&self.shape.info, args.len())?;
        let buffers = self.shape.bind_all(&*self.backend, args, true)?;
        let device = match buffers.first() {
            Some(b) => Arc::clone(&b.buffer.device),
            None => self.backend.device(Device::vulkan(0))?,
        };
        let mut push = Vec::with_capacity(self.shape.scalars.len() * 8);
        for (i, scalar) in self.shape.scalars.iter().enumerate() {
            let index = self.shape.num_buffers + i;
            let bytes = scalar.scalar_bytes(self.shape.name(), index, &args[index])?;
            push.extend_from_slice(&bytes);
        }
        let grid = self.grid(&device, &args[nargs..])?;
        let infos = self.buffer_infos(&device, &buffers)?;
        let pipeline = self.pipeline(&device)?;
        let mut keep: Vec<Arc<dyn std::any::Any + Send + Sync>> =
            buffers.iter().map(|b| b.buffer.clone() as _).collect();
        keep.push(pipeline.clone());
        let params = if self.uses_uniform_buffer() {
            let params = Arc::new(VulkanBuffer::uniform(&device, &push)?);
            keep.push(params.clone());
            push.clear();
            Some(vk::DescriptorBufferInfo {
                buffer: params.raw,
                offset: 0,
                range: params.size,
            })
        } else {
            None
        };
        let cached = match &pipeline.sets {
            Some(cache) => {
                let bound: Vec<&Arc<VulkanBuffer>> = buffers.iter().map(|b| &b.buffer).collect();
                cache.set_for(pipeline.set_layout, &bound, &infos, &mut keep)?
            }
            None => None,
        };
        device.record(keep, |cmd, pool| {
            let set = match cached {
                Some(set) => set,
                None => {
                    let Some(set) = device.allocate_descriptor_set(pool, pipeline.set_layout)?
                    else {
                        return Ok(false);
                    };
                    self.write_set(&device, set, &infos, params.as_ref());
                    set
                }
            };
            let raw = &device.raw;
            // SAFETY: `cmd` is recording; the set, pipeline and buffers are live and kept alive
            // by the batch.
            unsafe {
                raw.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipeline.raw);
                raw.cmd_bind_descriptor_sets(
                    cmd,
                    vk::PipelineBindPoint::COMPUTE,
                    pipeline.layout,
                    0,
                    &[set],
                    &[],
                );
                if !push.is_empty() {
                    raw.cmd_push_constants(
                        cmd,
                        pipeline.layout,
                        vk::ShaderStageFlags::COMPUTE,
                        0,
                        &push,
                    );
                }
                raw.cmd_dispatch(cmd, grid[0], grid[1], grid[2]);
            }
            Ok(true)
        })
    }

    /// Writes the tensors' descriptors (and the params block's, if any) into `set`, a set of
    /// the open batch no command uses yet.
    fn write_set(
        &self,
        device: &VulkanDevice,
        set: vk::DescriptorSet,
        infos: &[vk::DescriptorBufferInfo],
        params: Option<&vk::DescriptorBufferInfo>,
    ) {
        let write = |b: usize, kind, info| {
            vk::WriteDescriptorSet::default()
                .dst_set(set)
                .dst_binding(b as u32)
                .descriptor_type(kind)
                .buffer_info(std::slice::from_ref(info))
        };
        let mut writes: Vec<_> = infos
            .iter()
            .enumerate()
            .map(|(b, info)| write(b, vk::DescriptorType::STORAGE_BUFFER, info))
            .collect();
        if let Some(info) = params {
            writes.push(write(
                self.shape.num_buffers,
                vk::DescriptorType::UNIFORM_BUFFER,
                info,
            ));
        }
        // SAFETY: the set and the buffers are live, and no recorded command uses the set yet.
        unsafe { device.raw.update_descriptor_sets(&writes, &[]) };
    }

    /// The descriptor of each tensor argument, checked against the device's binding limits.
    fn buffer_infos(
        &self,
        device: &Arc<VulkanDevice>,
        buffers: &[BoundBuffer<VulkanBuffer>],
    ) -> VkResult<Vec<vk::DescriptorBufferInfo>> {
        let limits = &device.physical.properties.limits;
        buffers
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let binding = StorageBinding {
                    buffer_size: b.buffer.size.max(1),
                    offset: b.offset,
                };
                let range = binding.range(
                    self.shape.name(),
                    i,
                    limits.min_storage_buffer_offset_alignment,
                    u64::from(limits.max_storage_buffer_range),
                    &device.physical.name,
                )?;
                Ok(vk::DescriptorBufferInfo {
                    buffer: b.buffer.raw,
                    offset: b.offset,
                    range,
                })
            })
            .collect()
    }
}

impl ShaderKernel for VulkanKernel {
    const FILE_EXTENSION: &'static str = "spv";
    const MODULE_KIND: &'static str = "vulkan";

    fn launch(&self, args: &[AnyView<'_>]) -> tvm_ffi::Result<()> {
        Ok(self.call(args)?)
    }
}
