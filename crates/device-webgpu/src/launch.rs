//! Kernel launches: compute pipelines (one per kernel and device, made on first launch) and the
//! packed function that dispatches a kernel by the launch convention GPU backends share
//! ([`device_kit::kernel`]).
//!
//! Call convention of a WGSL kernel: its arguments in `arg_types` order (tensors first, bound
//! as storage buffers at `@group(0) @binding(0..n-1)`; then scalars), then one int per launch
//! tag. The scalars travel in one uniform buffer at `@binding(n)`, the *params* block: each
//! scalar takes 4 bytes in argument order (`i32`, `u32` or `f32`; WGSL has no 64-bit scalars),
//! followed by `packGridDimX: u32`, the grid's x extent; the block is zero-padded to 16 bytes.
//! It is bound when the entry point uses `@binding(n)`. The grid is `blockIdx.x/y`;
//! `blockIdx.z` is reserved: a grid x past the device's limit is folded into z (halved until it
//! fits), and such a kernel computes its block as `wid.z * nwg.x + wid.x` and returns when that
//! reaches `packGridDimX`. The block (`threadIdx.*`) is the shader's `@workgroup_size`.

use std::num::NonZeroU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use device_kit::buffer::ShaderKernel;
use device_kit::buffer::kernel::{BoundBuffer, KernelShape, PipelineCache};
use device_kit::kernel::{ArgKind, FunctionInfo, StorageBinding};
use tvm_ffi::AnyView;
use tvm_ffi::Device;

use crate::backend::WebGpuBackend;
use crate::device::WebGpuDevice;
use crate::error::{WebGpuError, WgResult};
use crate::memory::WebGpuBuffer;
use crate::wgsl::{BindingKind, EntryPoint};

/// Prefix of the launch tag TVM's WGSL code generator adds to say which buffers are written.
const WRITE_ACCESS_TAG: &str = "paramWriteAccess:";

/// Size of the params block: multiples of this.
const PARAMS_ALIGNMENT: usize = 16;

const AXES: [&str; 3] = ["x", "y", "z"];

/// A compute pipeline of one kernel on one device, with what its launches reuse.
struct Pipeline {
    layout: wgpu::BindGroupLayout,
    raw: wgpu::ComputePipeline,
    /// Held from writing the params block to submitting the dispatch: a queued write lands
    /// between the submissions before and after it, so one params buffer serves every launch.
    reuse: Mutex<Reuse>,
}

/// The params buffer and the bind group of the last launch, kept for the next.
struct Reuse {
    /// The params block's buffer, when the entry point uses it.
    params: Option<wgpu::Buffer>,
    /// The bytes last written to it.
    written: Vec<u8>,
    /// The last bind group and the tensor bindings it was made for.
    bound: Option<(Vec<BindingKey>, wgpu::BindGroup)>,
}

/// A tensor binding of a cached bind group. The weak reference keeps the allocation's address
/// from being reused while the key exists, so an equal address is the same buffer.
struct BindingKey {
    buffer: Weak<WebGpuBuffer>,
    offset: u64,
    size: NonZeroU64,
}

impl BindingKey {
    fn matches(&self, bound: &BoundBuffer<WebGpuBuffer>, size: NonZeroU64) -> bool {
        Weak::as_ptr(&self.buffer) == Arc::as_ptr(&bound.buffer)
            && self.offset == bound.offset
            && self.size == size
    }
}

/// `kernel `name` on webgpu:N`, formatted only when an error needs it.
struct Launching<'a> {
    kernel: &'a str,
    device: usize,
}

impl std::fmt::Display for Launching<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "kernel `{}` on webgpu:{}", self.kernel, self.device)
    }
}

/// A kernel of a `webgpu` module, ready to launch on any device of its backend.
pub struct WebGpuKernel {
    backend: Arc<WebGpuBackend>,
    shape: KernelShape,
    source: Arc<str>,
    entry: EntryPoint,
    /// Whether the entry point uses the params block.
    uses_params: bool,
    /// By [`WebGpuDevice::id`].
    pipelines: PipelineCache<Pipeline>,
}

impl WebGpuKernel {
    /// Checks `info` against the convention and against the shader's entry point: tensors first
    /// bound as storage, scalars WGSL can take, the params block a uniform, known tags.
    pub(crate) fn new(
        backend: Arc<WebGpuBackend>,
        mut info: FunctionInfo,
        source: Arc<str>,
        entry: EntryPoint,
    ) -> WgResult<WebGpuKernel> {
        // TVM's code generator records which buffers are written; the shader says it too.
        info.launch_param_tags
            .retain(|tag| !tag.starts_with(WRITE_ACCESS_TAG));
        let name = info.name.clone();
        let shape = KernelShape::new(info, |index, kind, t| match kind {
            ArgKind::Int32 | ArgKind::UInt32 | ArgKind::Float32 => Ok(kind),
            _ => Err(WebGpuError::WrongType(format!(
                "kernel `{name}`: argument {index} has type {t}; WGSL kernels take int32, \
                 uint32 and float32 scalars"
            ))),
        })?;
        if shape
            .info
            .launch_param_tags
            .iter()
            .any(|t| t == "blockIdx.z")
        {
            return Err(
                shape.fail("blockIdx.z is reserved on WebGPU (a large grid x folds into z)")
            );
        }
        if let Some(group) = entry.other_group {
            return Err(shape.fail(format!(
                "the shader uses bind group {group}; kernels bind group 0 only"
            )));
        }
        let num_buffers = shape.num_buffers;
        let params_binding = num_buffers as u32;
        for (&binding, &kind) in &entry.bindings {
            let fits = match kind {
                BindingKind::Storage { .. } => binding < params_binding,
                BindingKind::Uniform => binding == params_binding,
                BindingKind::Other => false,
            };
            if !fits {
                return Err(shape.fail(format!(
                    "the shader's @binding({binding}) is {kind:?}, but the metadata ({} tensor \
                     arguments, {} scalars) gives storage buffers at bindings 0..{} and the \
                     params uniform at {params_binding}: the metadata does not match the shader",
                    num_buffers,
                    shape.scalars.len(),
                    num_buffers
                )));
            }
        }
        let uses_params = entry.bindings.contains_key(&params_binding);
        Ok(WebGpuKernel {
            backend,
            shape,
            source,
            entry,
            uses_params,
            pipelines: PipelineCache::default(),
        })
    }

    /// The WGSL source of the kernel's shader.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The buffers behind the tensor arguments. The shader says which bindings it writes
    /// (`var<storage, read_write>`): a read-only tensor there is refused, as a copy into it is.
    fn bind(&self, args: &[AnyView<'_>]) -> WgResult<Vec<BoundBuffer<WebGpuBuffer>>> {
        let bound = self.shape.bind_all(&*self.backend, args, false)?;
        for (index, b) in bound.iter().enumerate() {
            let writes = matches!(
                self.entry.bindings.get(&(index as u32)),
                Some(BindingKind::Storage { read_only: false })
            );
            if writes && b.read_only {
                return Err(self.shape.fail(format!(
                    "argument {index} is read-only, but binding {index} is \
                     `var<storage, read_write>` (assignment destination is read-only)"
                )));
            }
        }
        Ok(bound)
    }

    /// The pipeline of this kernel on `device`, made on first use; WGSL the device refuses is
    /// a `ValueError` naming the kernel with wgpu's message.
    fn pipeline(&self, device: &Arc<WebGpuDevice>) -> WgResult<Arc<Pipeline>> {
        self.pipelines.get_or_make(device.id, || {
            let what = Launching {
                kernel: self.shape.name(),
                device: device.index,
            };
            device.capture(what, || self.create_pipeline(device))
        })
    }

    fn create_pipeline(&self, device: &WebGpuDevice) -> Pipeline {
        let raw = &device.raw;
        let module = raw.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(self.shape.name()),
            source: wgpu::ShaderSource::Wgsl(std::borrow::Cow::Borrowed(&self.source)),
        });
        let storage = |binding: u32| {
            let read_only = matches!(
                self.entry.bindings.get(&binding),
                Some(BindingKind::Storage { read_only: true })
            );
            wgpu::BindGroupLayoutEntry {
                binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            }
        };
        let mut entries: Vec<_> = (0..self.shape.num_buffers as u32).map(storage).collect();
        if self.uses_params {
            entries.push(wgpu::BindGroupLayoutEntry {
                binding: self.shape.num_buffers as u32,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            });
        }
        let layout = raw.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some(self.shape.name()),
            entries: &entries,
        });
        let pipeline_layout = raw.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(self.shape.name()),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = raw.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(self.shape.name()),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some(self.shape.name()),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            cache: None,
        });
        let params = self.uses_params.then(|| {
            raw.create_buffer(&wgpu::BufferDescriptor {
                label: Some("tvm webgpu params"),
                size: self.params_size() as u64,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        Pipeline {
            layout,
            raw: pipeline,
            reuse: Mutex::new(Reuse {
                params,
                written: Vec::new(),
                bound: None,
            }),
        }
    }

    /// Bytes of the params block: the scalars and `packGridDimX`, 4 bytes each, padded.
    fn params_size(&self) -> usize {
        ((self.shape.scalars.len() + 1) * 4).next_multiple_of(PARAMS_ALIGNMENT)
    }

    /// The work groups to dispatch and the grid's x extent, from the launch arguments, checked
    /// against the shader and the device.
    fn dispatch_size(
        &self,
        device: &WebGpuDevice,
        values: &[AnyView<'_>],
    ) -> WgResult<([u32; 3], u32)> {
        let dims = self.shape.launch.dims(values)?;
        let size = self.entry.workgroup_size;
        for axis in (0..3).filter(|&axis| self.shape.launch.sets_block(axis)) {
            if dims.block[axis] != size[axis] {
                return Err(self.shape.fail(format!(
                    "threadIdx.{}={} does not match the shader's @workgroup_size {size:?}",
                    AXES[axis], dims.block[axis]
                )));
            }
        }
        let max = device.limits.max_compute_workgroups_per_dimension;
        let [grid_x, grid_y, _] = dims.grid;
        if grid_y > max {
            return Err(self.shape.fail(format!(
                "blockIdx.y={grid_y} is outside the device's grid range 1..={max}"
            )));
        }
        let (mut x, mut z) = (grid_x, 1u32);
        while x > max {
            x = x.div_ceil(2);
            z *= 2;
        }
        Ok(([x, grid_y, z], grid_x))
    }

    /// The params block: the scalars, 4 bytes each, then `packGridDimX`, padded to 16 bytes.
    fn params(&self, args: &[AnyView<'_>], grid_x: u32) -> WgResult<Vec<u8>> {
        let mut bytes = Vec::with_capacity(self.params_size());
        for (i, scalar) in self.shape.scalars.iter().enumerate() {
            let index = self.shape.num_buffers + i;
            let packed = scalar.scalar_bytes(self.shape.name(), index, &args[index])?;
            bytes.extend_from_slice(&packed[..4]);
        }
        bytes.extend_from_slice(&grid_x.to_le_bytes());
        bytes.resize(bytes.len().next_multiple_of(PARAMS_ALIGNMENT), 0);
        Ok(bytes)
    }

    /// The binding range of each tensor argument, checked against the device's limits.
    fn binding_sizes(
        &self,
        device: &Arc<WebGpuDevice>,
        buffers: &[BoundBuffer<WebGpuBuffer>],
    ) -> WgResult<Vec<NonZeroU64>> {
        buffers
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let binding = StorageBinding {
                    buffer_size: b.buffer.padded_size(),
                    offset: b.offset,
                };
                let range = binding.range(
                    self.shape.name(),
                    i,
                    u64::from(device.limits.min_storage_buffer_offset_alignment),
                    device.limits.max_storage_buffer_binding_size,
                    &device.info.name,
                )?;
                NonZeroU64::new(range)
                    .ok_or_else(|| self.shape.fail(format!("argument {i} is empty")))
            })
            .collect()
    }

    /// Launches the kernel with packed arguments (see the module docs for the convention).
    pub(crate) fn call(&self, args: &[AnyView<'_>]) -> WgResult<()> {
        let nargs = self.shape.info.arg_types.len();
        self.shape
            .launch
            .check_arg_count(&self.shape.info, args.len())?;
        let buffers = self.bind(args)?;
        let device = match buffers.first() {
            Some(b) => Arc::clone(&b.buffer.device),
            None => self.backend.device(Device::webgpu(0))?,
        };
        let (groups, grid_x) = self.dispatch_size(&device, &args[nargs..])?;
        if groups[2] > device.limits.max_compute_workgroups_per_dimension {
            return Err(self.shape.fail(format!(
                "blockIdx.x={grid_x} is past what the device dispatches, even folded into z"
            )));
        }
        let params = self.params(args, grid_x)?;
        let sizes = self.binding_sizes(&device, &buffers)?;
        let pipeline = self.pipeline(&device)?;
        let mut reuse = pipeline
            .reuse
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let what = Launching {
            kernel: self.shape.name(),
            device: device.index,
        };
        let launched = device.capture(what, || {
            self.dispatch(
                &device, &pipeline, &mut reuse, &buffers, &sizes, &params, groups,
            )
        });
        if launched.is_err() {
            // Whatever failed may have left the params or the bind group unusable.
            reuse.written.clear();
            reuse.bound = None;
        }
        launched
    }

    /// Writes the params block if it changed, makes a bind group unless the last one binds
    /// the same buffers, and submits the dispatch.
    #[allow(clippy::too_many_arguments)]
    fn dispatch(
        &self,
        device: &WebGpuDevice,
        pipeline: &Pipeline,
        reuse: &mut MutexGuard<'_, Reuse>,
        buffers: &[BoundBuffer<WebGpuBuffer>],
        sizes: &[NonZeroU64],
        params: &[u8],
        groups: [u32; 3],
    ) {
        let raw = &device.raw;
        let reuse = &mut **reuse;
        if let Some(buffer) = &reuse.params {
            if reuse.written != params {
                device.queue.write_buffer(buffer, 0, params);
                reuse.written.clear();
                reuse.written.extend_from_slice(params);
            }
        }
        let same_bindings = reuse.bound.as_ref().is_some_and(|(keys, _)| {
            keys.len() == buffers.len()
                && keys
                    .iter()
                    .zip(buffers.iter().zip(sizes))
                    .all(|(key, (b, &size))| key.matches(b, size))
        });
        if !same_bindings {
            let mut entries: Vec<_> = buffers
                .iter()
                .zip(sizes)
                .enumerate()
                .map(|(i, (b, size))| wgpu::BindGroupEntry {
                    binding: i as u32,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &b.buffer.raw,
                        offset: b.offset,
                        size: Some(*size),
                    }),
                })
                .collect();
            if let Some(buffer) = &reuse.params {
                entries.push(wgpu::BindGroupEntry {
                    binding: self.shape.num_buffers as u32,
                    resource: buffer.as_entire_binding(),
                });
            }
            let group = raw.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(self.shape.name()),
                layout: &pipeline.layout,
                entries: &entries,
            });
            let keys = buffers
                .iter()
                .zip(sizes)
                .map(|(b, &size)| BindingKey {
                    buffer: Arc::downgrade(&b.buffer),
                    offset: b.offset,
                    size,
                })
                .collect();
            reuse.bound = Some((keys, group));
        }
        let Some((_, group)) = &reuse.bound else {
            return;
        };
        let mut encoder = raw.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some(self.shape.name()),
        });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(self.shape.name()),
                timestamp_writes: None,
            });
            pass.set_pipeline(&pipeline.raw);
            pass.set_bind_group(0, group, &[]);
            pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        }
        device.queue.submit([encoder.finish()]);
    }
}

impl ShaderKernel for WebGpuKernel {
    const FILE_EXTENSION: &'static str = "wgsl";
    const MODULE_KIND: &'static str = "webgpu";

    fn launch(&self, args: &[AnyView<'_>]) -> tvm_ffi::Result<()> {
        Ok(self.call(args)?)
    }
}
