//! One logical WebGPU device: its queue, the poller thread that completes its futures, error
//! capture (errors are returned, never raised as panics by wgpu), synchronization and readback
//! as futures.

use std::future::Future;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tvm_rpc::async_functions::block_on;

use crate::completion::{Poller, signal};
use crate::error::{WebGpuError, WgResult};

/// Optional shader features requested whenever the adapter offers them (wider tensor dtypes).
const OPTIONAL_FEATURES: wgpu::Features = wgpu::Features::SHADER_F16
    .union(wgpu::Features::SHADER_F64)
    .union(wgpu::Features::SHADER_INT64);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A device created from adapter `index`, with its queue.
pub(crate) struct WebGpuDevice {
    /// Position of its adapter in the instance's list (the device id).
    pub(crate) index: usize,
    /// The adapter's description.
    pub(crate) info: wgpu::AdapterInfo,
    /// The limits the device was created with (the adapter's own).
    pub(crate) limits: wgpu::Limits,
    /// The features it was created with.
    pub(crate) features: wgpu::Features,
    pub(crate) raw: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    poller: Arc<Poller>,
    /// Errors no scope captured, kept instead of wgpu's default panic.
    uncaptured: Arc<Mutex<Vec<String>>>,
    /// Why the device was lost, once it was.
    lost: Arc<Mutex<Option<String>>>,
}

/// A device→host copy that finished: a mapped staging buffer holding the bytes.
pub(crate) struct Staged {
    buffer: wgpu::Buffer,
}

impl Staged {
    /// Runs `f` on the bytes, then unmaps the staging buffer.
    pub(crate) fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> WgResult<R> {
        let out = {
            let view = self.buffer.slice(..).get_mapped_range().map_err(|e| {
                WebGpuError::device(format!("reading back a WebGPU buffer failed: {e}"))
            })?;
            f(&view)
        };
        self.buffer.unmap();
        Ok(out)
    }
}

impl WebGpuDevice {
    /// Creates the device of `adapter` (number `index`) with the adapter's limits and the
    /// optional features it offers.
    pub(crate) fn new(
        adapter: &wgpu::Adapter,
        info: wgpu::AdapterInfo,
        index: usize,
    ) -> WgResult<WebGpuDevice> {
        let limits = adapter.limits();
        let features = adapter.features() & OPTIONAL_FEATURES;
        let descriptor = wgpu::DeviceDescriptor {
            label: Some("tvm webgpu"),
            required_features: features,
            required_limits: limits.clone(),
            ..Default::default()
        };
        let (raw, queue) = block_on(adapter.request_device(&descriptor)).map_err(|e| {
            WebGpuError::unavailable(format!(
                "cannot create a device on WebGPU adapter {index} '{}': {e}",
                info.name
            ))
        })?;
        let uncaptured = Arc::new(Mutex::new(Vec::new()));
        let recorder = Arc::clone(&uncaptured);
        raw.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            lock(&recorder).push(e.to_string());
        }));
        let lost = Arc::new(Mutex::new(None));
        let recorder = Arc::clone(&lost);
        raw.set_device_lost_callback(move |reason, message| {
            *lock(&recorder) = Some(format!("{reason:?}: {message}"));
        });
        let poller = Poller::start(raw.clone(), format!("tvm-webgpu-{index}")).map_err(|e| {
            WebGpuError::device(format!("cannot start the WebGPU poller thread: {e}"))
        })?;
        Ok(WebGpuDevice {
            index,
            info,
            limits,
            features,
            raw,
            queue,
            poller,
            uncaptured,
            lost,
        })
    }

    /// `webgpu:<index>`, for messages.
    pub(crate) fn label(&self) -> String {
        format!("webgpu:{}", self.index)
    }

    /// An error when the device was lost or its poller failed; the device is unusable then.
    pub(crate) fn check_alive(&self) -> WgResult<()> {
        if let Some(reason) = lock(&self.lost).clone().or_else(|| self.poller.failure()) {
            return Err(WebGpuError::device(format!(
                "the WebGPU device {} was lost ({reason})",
                self.label()
            )));
        }
        Ok(())
    }

    /// The errors wgpu reported outside any scope so far (taken: each is reported once).
    pub(crate) fn take_uncaptured_errors(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.uncaptured))
    }

    /// Runs `f` with wgpu's validation and out-of-memory errors captured: an error raised by
    /// `f`'s wgpu calls comes back as `Err` naming `what`, and the device stays usable.
    pub(crate) fn capture<T>(&self, what: &str, f: impl FnOnce() -> T) -> WgResult<T> {
        self.check_alive()?;
        let out_of_memory = self.raw.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.raw.push_error_scope(wgpu::ErrorFilter::Validation);
        let value = f();
        // On native, popping a scope is ready at once.
        let invalid = block_on(validation.pop());
        let exhausted = block_on(out_of_memory.pop());
        match invalid.or(exhausted) {
            Some(error) => Err(WebGpuError::from_wgpu(what, &error)),
            None => Ok(value),
        }
    }

    /// A future that completes when all work submitted so far (kernels, device copies) is
    /// done; host writes are ordered before later work. (No empty submission to flush host
    /// writes: on lavapipe it blocks until the device is idle.) The poller thread completes it; nothing blocks until it is awaited.
    pub(crate) fn sync(
        self: &Arc<Self>,
    ) -> impl Future<Output = WgResult<()>> + Send + 'static + use<> {
        let device = Arc::clone(self);
        let started = self.check_alive().map(|()| {
            let (done, finished) = signal();
            self.queue.on_submitted_work_done(move || done.complete(()));
            self.poller.request();
            finished
        });
        async move {
            started?.await;
            device.check_alive()
        }
    }

    /// Waits for all work queued so far ([`WebGpuDevice::sync`], blocking).
    pub(crate) fn finish(self: &Arc<Self>) -> WgResult<()> {
        block_on(self.sync())
    }

    /// A future of the bytes `range` of `buffer` (offsets and length multiples of 4), after the
    /// work queued before it: a copy into a mapped staging buffer.
    pub(crate) fn read(
        self: &Arc<Self>,
        buffer: &wgpu::Buffer,
        range: Range<u64>,
    ) -> impl Future<Output = WgResult<Staged>> + Send + 'static + use<> {
        let device = Arc::clone(self);
        let started = self.capture("reading back a WebGPU buffer", || {
            let len = range.end - range.start;
            let staging = self.raw.create_buffer(&wgpu::BufferDescriptor {
                label: Some("tvm webgpu readback"),
                size: len,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut encoder = self
                .raw
                .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
            encoder.copy_buffer_to_buffer(buffer, range.start, &staging, 0, len);
            self.queue.submit([encoder.finish()]);
            let (mapped, finished) = signal();
            staging
                .slice(..)
                .map_async(wgpu::MapMode::Read, move |result| mapped.complete(result));
            self.poller.request();
            (staging, finished)
        });
        async move {
            let (staging, finished) = started?;
            finished.await.map_err(|e| {
                let lost = device.check_alive().err();
                lost.unwrap_or_else(|| {
                    WebGpuError::device(format!("mapping a WebGPU readback buffer failed: {e}"))
                })
            })?;
            Ok(Staged { buffer: staging })
        }
    }
}

impl Drop for WebGpuDevice {
    fn drop(&mut self) {
        self.poller.stop();
    }
}
