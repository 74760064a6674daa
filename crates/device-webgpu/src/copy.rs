//! Copies between host memory and WebGPU buffers, and between WebGPU buffers, with any strides
//! and byte offsets.
//!
//! - host → device: a compact, 4-byte aligned destination is one `queue.write_buffer` straight
//!   from the source; otherwise the destination's bytes are read back, patched on the host and
//!   written again (gaps between strided elements and unaligned ends keep their bytes).
//! - device → host: a copy into a mapped staging buffer, then one strided host copy out of it.
//! - device → device: `copy_buffer_to_buffer` when both sides are compact, aligned and on one
//!   device; through the host otherwise.

use std::ops::Range;
use std::sync::Arc;

use tvm_ffi::abi::{DLTensor, kDLCPU};
use tvm_runtime::device::{byte_extent, copy_host_strided, host_view, is_row_major, tensor_nbytes};

use crate::api::WebGpuDeviceApi;
use crate::error::{WebGpuError, WgResult};
use crate::memory::{WebGpuBuffer, is_aligned};

/// A device side of a copy: its buffer and the bytes its elements occupy.
pub(crate) struct DeviceSide {
    pub(crate) buffer: Arc<WebGpuBuffer>,
    pub(crate) extent: Range<u64>,
}

impl DeviceSide {
    /// # Safety
    /// `t` is a valid descriptor of a WebGPU tensor.
    pub(crate) unsafe fn resolve(
        api: &WebGpuDeviceApi,
        t: &DLTensor,
        what: &str,
    ) -> WgResult<DeviceSide> {
        let buffer = api.buffer(t.data, t.device.device_id)?;
        // SAFETY: guaranteed by the caller.
        let extent = unsafe { byte_extent(t) }?;
        let extent = u64::try_from(extent.start).unwrap_or(u64::MAX)
            ..u64::try_from(extent.end).unwrap_or(u64::MAX);
        buffer.check_range(&extent, what)?;
        Ok(DeviceSide { buffer, extent })
    }

    fn len(&self) -> u64 {
        self.extent.end - self.extent.start
    }
}

/// Copies `from` into `to`; at least one is a WebGPU tensor, the other on the host or WebGPU.
///
/// # Safety
/// Both descriptors are valid with the same shape and dtype; a host side holds its elements.
pub(crate) unsafe fn copy_tensors(
    api: &WebGpuDeviceApi,
    from: &DLTensor,
    to: &DLTensor,
) -> WgResult<()> {
    // SAFETY: guaranteed by the caller.
    let nbytes = unsafe { tensor_nbytes(from) }? as u64;
    let on_host = |t: &DLTensor| t.device.device_type == kDLCPU;
    match (on_host(from), on_host(to)) {
        (true, true) => Err(WebGpuError::invalid(
            "a copy between two host tensors is not the WebGPU backend's",
        )),
        (true, false) => {
            // SAFETY: guaranteed by the caller.
            let dst = unsafe { DeviceSide::resolve(api, to, "the copy's destination")? };
            // SAFETY: guaranteed by the caller.
            unsafe { write_from_host(from, &dst, to, nbytes) }
        }
        (false, true) => {
            // SAFETY: guaranteed by the caller.
            let src = unsafe { DeviceSide::resolve(api, from, "the copy's source")? };
            let (staged, start) = src.buffer.read_now(&src.extent)?;
            staged.with_bytes(|bytes| {
                let from_host = host_view(from, bytes.as_ptr().cast_mut(), start);
                // SAFETY: the staged bytes hold the source's elements (read only); the
                // destination is host memory.
                unsafe { copy_host_strided(&from_host, to) }
            })
        }
        (false, false) => {
            // SAFETY: guaranteed by the caller.
            let (src, dst) = unsafe {
                (
                    DeviceSide::resolve(api, from, "the copy's source")?,
                    DeviceSide::resolve(api, to, "the copy's destination")?,
                )
            };
            // SAFETY: guaranteed by the caller.
            let compact = unsafe { is_row_major(from) && is_row_major(to) };
            let same_device = Arc::ptr_eq(&src.buffer.device, &dst.buffer.device);
            if compact && same_device && is_aligned(&src.extent) && is_aligned(&dst.extent) {
                return copy_on_device(&src, &dst);
            }
            let (staged, start) = src.buffer.read_now(&src.extent)?;
            let compact_source = staged.with_bytes(|bytes| {
                let mut out = vec![0u8; nbytes as usize];
                let from_host = host_view(from, bytes.as_ptr().cast_mut(), start);
                let compact = DLTensor {
                    strides: std::ptr::null_mut(),
                    ..host_view(from, out.as_mut_ptr(), from.byte_offset)
                };
                // SAFETY: the staged bytes hold the source's elements; `out` holds them compact.
                unsafe { copy_host_strided(&from_host, &compact) };
                out
            })?;
            let compact = DLTensor {
                strides: std::ptr::null_mut(),
                ..host_view(from, compact_source.as_ptr().cast_mut(), from.byte_offset)
            };
            // SAFETY: `compact` describes the host bytes just gathered.
            unsafe { write_from_host(&compact, &dst, to, nbytes) }
        }
    }
}

/// Writes the elements of host tensor `from` into device side `dst` of tensor `to`.
///
/// # Safety
/// As for [`copy_tensors`].
unsafe fn write_from_host(
    from: &DLTensor,
    dst: &DeviceSide,
    to: &DLTensor,
    nbytes: u64,
) -> WgResult<()> {
    // SAFETY: guaranteed by the caller.
    let compact = unsafe { is_row_major(from) && is_row_major(to) };
    if compact && dst.len() == nbytes && is_aligned(&dst.extent) {
        // SAFETY: a compact host source holds `nbytes` bytes from its data plus byte offset.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                from.data.cast::<u8>().add(from.byte_offset as usize),
                nbytes as usize,
            )
        };
        return dst.buffer.write(dst.extent.start, bytes);
    }
    // Patch the destination's bytes on the host: what lies between or around its elements
    // stays as it is.
    let (staged, start) = dst.buffer.read_now(&dst.extent)?;
    let mut patched = staged.with_bytes(<[u8]>::to_vec)?;
    let to_host = host_view(to, patched.as_mut_ptr(), start);
    // SAFETY: `patched` holds the destination's elements; the source is host memory.
    unsafe { copy_host_strided(from, &to_host) };
    dst.buffer.write(start, &patched)
}

/// A compact copy between two buffers of one device, queued on the device.
fn copy_on_device(src: &DeviceSide, dst: &DeviceSide) -> WgResult<()> {
    if src.len() == 0 {
        return Ok(());
    }
    let device = &src.buffer.device;
    device.capture("a copy between WebGPU buffers", || {
        let mut encoder = device
            .raw
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        encoder.copy_buffer_to_buffer(
            &src.buffer.raw,
            src.extent.start,
            &dst.buffer.raw,
            dst.extent.start,
            src.len(),
        );
        device.queue.submit([encoder.finish()]);
    })
}
