//! A bare `wgpu` program that dispatches `add_one` the way a hand-written WebGPU program would:
//! pipeline, buffers, params block and bind group made once; per launch, a command encoder with
//! one compute pass (set the pipeline and the bind group, dispatch) submitted to the queue; a
//! wait for the queue at the end.

use tvm_runtime::async_functions::block_on;

/// Floats in each of the two buffers (one work group of 64).
pub const ELEMENTS: u32 = 64;

/// A device with the `add_one` pipeline and its bind group.
pub struct BareWgpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    name: String,
}

impl BareWgpu {
    /// The first adapter of wgpu's primary backends, with `add_one` compiled from `source`.
    pub fn new(source: &str) -> Result<BareWgpu, String> {
        let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        descriptor.backends = wgpu::Backends::PRIMARY;
        let instance = wgpu::Instance::new(descriptor);
        let adapter = block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))
            .map_err(|e| format!("no WebGPU adapter: {e}"))?;
        let name = adapter.get_info().name;
        let (device, queue) = block_on(adapter.request_device(&wgpu::DeviceDescriptor::default()))
            .map_err(|e| format!("no WebGPU device: {e}"))?;
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("add_one"),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("add_one"),
            layout: None,
            module: &module,
            entry_point: Some("add_one"),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            cache: None,
        });
        let buffer = |usage: wgpu::BufferUsages, bytes: &[u8]| {
            let buffer = device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: bytes.len() as u64,
                usage: usage | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            queue.write_buffer(&buffer, 0, bytes);
            buffer
        };
        let a: Vec<u8> = (0..ELEMENTS)
            .flat_map(|i| (i as f32).to_le_bytes())
            .collect();
        let a = buffer(wgpu::BufferUsages::STORAGE, &a);
        let b = buffer(wgpu::BufferUsages::STORAGE, &vec![0; ELEMENTS as usize * 4]);
        // The params block: n, packGridDimX, padded to 16 bytes.
        let params: Vec<u8> = [ELEMENTS, 1, 0, 0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let params = buffer(wgpu::BufferUsages::UNIFORM, &params);
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("add_one"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: a.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: b.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: params.as_entire_binding(),
                },
            ],
        });
        Ok(BareWgpu {
            device,
            queue,
            pipeline,
            bind_group,
            name,
        })
    }

    /// The adapter's name.
    pub fn device_name(&self) -> &str {
        &self.name
    }

    /// Dispatches `add_one` `launches` times and waits for the last.
    pub fn run(&self, launches: usize) -> Result<(), String> {
        for _ in 0..launches {
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                pass.set_pipeline(&self.pipeline);
                pass.set_bind_group(0, &self.bind_group, &[]);
                pass.dispatch_workgroups(1, 1, 1);
            }
            self.queue.submit([encoder.finish()]);
        }
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| format!("waiting for the queue: {e}"))
    }
}
