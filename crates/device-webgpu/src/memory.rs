//! Device memory: one wgpu storage buffer per allocation, its size padded to wgpu's copy
//! alignment, and reads and writes of any byte range (unaligned ends go through the host).

use std::future::Future;
use std::ops::Range;
use std::sync::Arc;

use device_kit::buffer::{DeviceBuffer, HostAccess, Placement};
use tvm_runtime::async_functions::block_on;

use crate::device::{Staged, WebGpuDevice};
use crate::error::{WebGpuError, WgResult, WgpuFailure};

/// wgpu's alignment of copy offsets and sizes.
const COPY_ALIGNMENT: u64 = wgpu::COPY_BUFFER_ALIGNMENT;

/// `range` widened to multiples of [`COPY_ALIGNMENT`].
pub(crate) fn aligned(range: &Range<u64>) -> Range<u64> {
    let start = range.start - range.start % COPY_ALIGNMENT;
    let end = range.end.div_ceil(COPY_ALIGNMENT) * COPY_ALIGNMENT;
    start..end
}

/// Whether both ends of `range` are multiples of [`COPY_ALIGNMENT`].
pub(crate) fn is_aligned(range: &Range<u64>) -> bool {
    range.start.is_multiple_of(COPY_ALIGNMENT) && range.end.is_multiple_of(COPY_ALIGNMENT)
}

/// One allocation: a buffer usable as storage and as copy source and destination. The tensor
/// `data` of a WebGPU tensor is the address of one of these.
pub struct WebGpuBuffer {
    /// The device that owns it.
    pub(crate) device: Arc<WebGpuDevice>,
    /// The wgpu buffer, destroyed with this allocation (wgpu frees it once the work queued on
    /// it is done, even while a cached bind group still names it).
    pub(crate) raw: wgpu::Buffer,
    /// Bytes asked for; the buffer itself holds this padded to 4 (and at least 4).
    pub(crate) size: u64,
}

impl Drop for WebGpuBuffer {
    fn drop(&mut self) {
        self.raw.destroy();
    }
}

impl WebGpuBuffer {
    /// A buffer of `size` bytes on `device`; past the device's buffer size limit it is a
    /// `ValueError` naming both.
    pub(crate) fn new(device: &Arc<WebGpuDevice>, size: u64) -> WgResult<WebGpuBuffer> {
        let padded = size.max(1).div_ceil(COPY_ALIGNMENT) * COPY_ALIGNMENT;
        let limit = device.limits.max_buffer_size;
        if padded > limit {
            return Err(WebGpuError::invalid(format!(
                "cannot allocate {size} bytes on {}: one WebGPU buffer of '{}' holds at most \
                 {limit} bytes",
                device.label(),
                device.info.name
            )));
        }
        let raw = device.capture(format_args!("allocating {size} bytes"), || {
            let mut usage = wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST;
            if device.host_mappable {
                usage |= wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::MAP_WRITE;
            }
            device.raw.create_buffer(&wgpu::BufferDescriptor {
                label: Some("tvm webgpu tensor"),
                size: padded,
                usage,
                mapped_at_creation: false,
            })
        })?;
        Ok(WebGpuBuffer {
            device: Arc::clone(device),
            raw,
            size,
        })
    }

    /// Bytes the wgpu buffer holds (the size padded to 4).
    pub(crate) fn padded_size(&self) -> u64 {
        self.raw.size()
    }

    /// A future of bytes `range` (any ends; the staged bytes cover [`aligned`]`(range)`),
    /// after the work queued before it, through a staging buffer (the buffer itself stays free
    /// for the device while the future is pending).
    pub(crate) fn read(
        &self,
        range: &Range<u64>,
    ) -> impl Future<Output = WgResult<Staged>> + Send + 'static + use<> {
        self.device.read(&self.raw, aligned(range))
    }

    /// Bytes `range` (any ends; the bytes cover [`mappable`]`(range)` when the host maps the
    /// buffer, [`aligned`]`(range)` otherwise), after the work queued before it: the buffer
    /// mapped in place where the host can, a staging copy otherwise. Blocks.
    pub(crate) fn read_now(&self, range: &Range<u64>) -> WgResult<(Staged, u64)> {
        if self.device.host_mappable {
            let wide = mappable(range);
            let start = wide.start;
            let staged = self.device.map_now(&self.raw, wide, wgpu::MapMode::Read)?;
            return Ok((staged, start));
        }
        Ok((block_on(self.read(range))?, aligned(range).start))
    }

    /// Writes `bytes` at `offset`, ordered after the work queued before and before later work:
    /// straight into the buffer where the host maps it, else queued (unaligned ends completed
    /// with the bytes the buffer holds there, read back first).
    pub(crate) fn write(&self, offset: u64, bytes: &[u8]) -> WgResult<()> {
        let range = offset..offset + bytes.len() as u64;
        if bytes.is_empty() {
            return Ok(());
        }
        if self.device.host_mappable {
            let wide = mappable(&range);
            let at = (offset - wide.start) as usize;
            let mapped = self.device.map_now(&self.raw, wide, wgpu::MapMode::Write)?;
            return mapped.write_at(at, bytes);
        }
        if is_aligned(&range) {
            return self.device.capture("writing a WebGPU buffer", || {
                self.device.queue.write_buffer(&self.raw, offset, bytes);
            });
        }
        let wide = aligned(&range);
        let mut patched = block_on(self.read(&range))?.with_bytes(<[u8]>::to_vec)?;
        let at = (range.start - wide.start) as usize;
        patched[at..at + bytes.len()].copy_from_slice(bytes);
        self.device.capture("writing a WebGPU buffer", || {
            self.device
                .queue
                .write_buffer(&self.raw, wide.start, &patched);
        })
    }
}

impl DeviceBuffer for WebGpuBuffer {
    type Failure = WgpuFailure;

    fn placement(&self) -> Placement {
        Placement {
            device_index: self.device.index,
            device_id: self.device.id,
            size: self.size,
        }
    }

    fn access(self: &Arc<Self>, access: HostAccess<'_>) -> WgResult<()> {
        match access {
            HostAccess::Read { extent, f } => {
                let (staged, start) = self.read_now(&extent)?;
                staged.with_bytes(|bytes| f(bytes.as_ptr(), start))
            }
            // Patched on the host and written back: what lies around the elements stays.
            HostAccess::Update {
                extent,
                read_first: true,
                f,
            } => {
                let (staged, start) = self.read_now(&extent)?;
                let mut patched = staged.with_bytes(<[u8]>::to_vec)?;
                f(patched.as_mut_ptr(), start);
                self.write(start, &patched)
            }
            HostAccess::Update { extent, f, .. } => {
                let mut filled = vec![0u8; (extent.end - extent.start) as usize];
                f(filled.as_mut_ptr(), extent.start);
                self.write(extent.start, &filled)
            }
            HostAccess::Write { offset, bytes } => self.write(offset, bytes),
        }
    }

    fn copy_to(self: &Arc<Self>, dst: &Arc<Self>, ranges: [&Range<u64>; 2]) -> WgResult<bool> {
        if !ranges.iter().all(|r| is_aligned(r)) {
            return Ok(false);
        }
        let device = &self.device;
        device.capture("a copy between WebGPU buffers", || {
            let mut encoder = device
                .raw
                .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
            let [from, to] = ranges;
            let len = from.end - from.start;
            encoder.copy_buffer_to_buffer(&self.raw, from.start, &dst.raw, to.start, len);
            device.queue.submit([encoder.finish()]);
        })?;
        Ok(true)
    }
}

/// `range` widened to what the host may map: the start a multiple of wgpu's map alignment,
/// the end of the copy alignment.
pub(crate) fn mappable(range: &Range<u64>) -> Range<u64> {
    let start = range.start - range.start % wgpu::MAP_ALIGNMENT;
    start..aligned(range).end
}
