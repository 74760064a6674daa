//! One logical WebGPU device: its queue, the poller thread that completes its futures, error
//! capture (errors are returned, never raised as panics by wgpu), synchronization and readback
//! as futures.

use std::future::Future;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tvm_runtime::async_functions::block_on;

use crate::completion::{Poller, signal};
use crate::error::{WebGpuError, WgResult, device_error, wgpu_error};

/// Optional shader features requested whenever the adapter offers them (wider tensor dtypes).
const OPTIONAL_FEATURES: wgpu::Features = wgpu::Features::SHADER_F16
    .union(wgpu::Features::SHADER_F64)
    .union(wgpu::Features::SHADER_INT64);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Identities of the devices made in this process, never reused.
static NEXT_DEVICE_ID: AtomicU64 = AtomicU64::new(1);

/// A device created from adapter `index`, with its queue.
pub(crate) struct WebGpuDevice {
    /// Position of its adapter in the instance's list (the device id).
    pub(crate) index: usize,
    /// This device among all made, also after a lost device of the same index is replaced:
    /// what caches of per-device objects (pipelines) are keyed by.
    pub(crate) id: u64,
    /// The adapter's description.
    pub(crate) info: wgpu::AdapterInfo,
    /// The limits the device was created with (the adapter's own).
    pub(crate) limits: wgpu::Limits,
    /// The features it was created with.
    pub(crate) features: wgpu::Features,
    /// Whether tensor buffers are mapped by the host directly (memory shared with the host:
    /// CPU and integrated adapters), so that copies need no staging buffer.
    pub(crate) host_mappable: bool,
    pub(crate) raw: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    poller: Arc<Poller>,
    /// Errors no scope captured, kept instead of wgpu's default panic.
    uncaptured: Arc<Mutex<Vec<String>>>,
    /// Why the device was lost, once it was.
    lost: Arc<Mutex<Option<String>>>,
}

/// Bytes read back: a mapped range of a staging buffer, or of the tensor's buffer itself when
/// the host maps it directly.
pub(crate) struct Staged {
    buffer: wgpu::Buffer,
    range: Range<u64>,
}

impl Staged {
    /// Runs `f` on the bytes; the buffer is unmapped when `self` goes.
    pub(crate) fn with_bytes<R>(self, f: impl FnOnce(&[u8]) -> R) -> WgResult<R> {
        let view = self.buffer.slice(self.range.clone()).get_mapped_range();
        let view =
            view.map_err(|e| device_error(format!("reading a mapped WebGPU buffer failed: {e}")))?;
        Ok(f(&view))
    }

    /// Writes `bytes` at byte `at` of the mapped range (mapped for writing); the buffer is
    /// unmapped, and the bytes go to the device, when `self` goes.
    pub(crate) fn write_at(self, at: usize, bytes: &[u8]) -> WgResult<()> {
        let view = self.buffer.slice(self.range.clone()).get_mapped_range_mut();
        let mut view =
            view.map_err(|e| device_error(format!("writing a mapped WebGPU buffer failed: {e}")))?;
        view.slice(at..at + bytes.len()).copy_from_slice(bytes);
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        self.buffer.unmap();
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
        let mut features = adapter.features() & OPTIONAL_FEATURES;
        // Where the device's memory is the host's, buffers the host maps cost nothing extra;
        // on a discrete GPU they would live in slow host memory, so there copies are staged.
        let shares_memory = matches!(
            info.device_type,
            wgpu::DeviceType::Cpu | wgpu::DeviceType::IntegratedGpu
        );
        if shares_memory {
            features |= adapter.features() & wgpu::Features::MAPPABLE_PRIMARY_BUFFERS;
        }
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
        let poller = Poller::start(raw.clone(), format!("tvm-webgpu-{index}"))
            .map_err(|e| device_error(format!("cannot start the WebGPU poller thread: {e}")))?;
        Ok(WebGpuDevice {
            index,
            id: NEXT_DEVICE_ID.fetch_add(1, Ordering::Relaxed),
            info,
            limits,
            features,
            host_mappable: features.contains(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS),
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
            return Err(device_error(format!(
                "the WebGPU device {} was lost ({reason})",
                self.label()
            )));
        }
        Ok(())
    }

    /// Whether the device was lost (or destroyed): nothing more runs on it.
    pub(crate) fn is_lost(&self) -> bool {
        self.check_alive().is_err()
    }

    /// Destroys the device: work not done yet is dropped, its memory freed, and every later
    /// use of it is an error saying it was lost.
    pub(crate) fn destroy(&self) {
        // wgpu reports the loss on a later poll; every use from now on must see it.
        lock(&self.lost).get_or_insert_with(|| "destroyed on request".to_owned());
        self.raw.destroy();
    }

    /// The errors wgpu reported outside any scope so far (taken: each is reported once).
    pub(crate) fn take_uncaptured_errors(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.uncaptured))
    }

    /// Runs `f` with wgpu's validation and out-of-memory errors captured: an error raised by
    /// `f`'s wgpu calls comes back as `Err` naming `what`, and the device stays usable.
    pub(crate) fn capture<T>(
        &self,
        what: impl std::fmt::Display,
        f: impl FnOnce() -> T,
    ) -> WgResult<T> {
        self.check_alive()
            .map_err(|lost| device_error(format!("{what}: {lost}")))?;
        let out_of_memory = self.raw.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.raw.push_error_scope(wgpu::ErrorFilter::Validation);
        let value = f();
        // On native, popping a scope is ready at once.
        let invalid = block_on(validation.pop());
        let exhausted = block_on(out_of_memory.pop());
        match invalid.or(exhausted) {
            Some(error) => Err(wgpu_error(&what, &error)),
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

    /// Maps `range` of `buffer` (a buffer of this device the host maps directly; the start a
    /// multiple of 8, the length of 4) once the work queued on it is done, and waits for it.
    pub(crate) fn map_now(
        &self,
        buffer: &wgpu::Buffer,
        range: Range<u64>,
        mode: wgpu::MapMode,
    ) -> WgResult<Staged> {
        let finished = self.capture("mapping a WebGPU buffer", || {
            let (mapped, finished) = signal();
            buffer
                .slice(range.clone())
                .map_async(mode, move |result| mapped.complete(result));
            self.poller.request();
            finished
        })?;
        block_on(finished).map_err(|e| {
            self.check_alive()
                .err()
                .unwrap_or_else(|| device_error(format!("mapping a WebGPU buffer failed: {e}")))
        })?;
        Ok(Staged {
            buffer: buffer.clone(),
            range,
        })
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
                    device_error(format!("mapping a WebGPU readback buffer failed: {e}"))
                })
            })?;
            let range = 0..staging.size();
            Ok(Staged {
                buffer: staging,
                range,
            })
        }
    }
}

impl Drop for WebGpuDevice {
    fn drop(&mut self) {
        self.poller.stop();
    }
}
