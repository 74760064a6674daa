//! The copy plan of every buffer-handle backend: copies between host memory and device
//! buffers, and between device buffers, with any strides and byte offsets.
//!
//! - host → device: a compact destination whose elements fill its extent is one write of the
//!   source's bytes ([`HostAccess::Write`]); otherwise the destination's extent is
//!   updated through a host view (its bytes read first when gaps between elements must keep
//!   theirs).
//! - device → host: one strided host copy out of a host view of the source's extent.
//! - device → device: a copy queued on the device when both sides are compact and on one
//!   device (and the backend takes the two extents); otherwise the source is gathered compact
//!   on the host and written as from the host.

use std::ops::Range;
use std::sync::Arc;

use tvm_ffi::abi::{DLTensor, kDLCPU};
use tvm_runtime::device::{byte_extent, copy_host_strided, host_view, is_row_major, tensor_nbytes};

use super::{BackendError, BackendFailure, BackendResult, BufferBackend, DeviceBuffer, HostAccess};

/// A device side of a copy: its buffer and the bytes its elements occupy.
pub struct DeviceSide<B> {
    /// The buffer that holds the tensor.
    pub buffer: Arc<B>,
    /// The bytes of the buffer its elements span.
    pub extent: Range<u64>,
}

impl<B: DeviceBuffer> DeviceSide<B> {
    /// The buffer of tensor `t` and the extent of its elements, checked to lie inside the
    /// buffer (`what` names the tensor in the error).
    ///
    /// # Safety
    /// `t` is a valid descriptor of a tensor of `backend`.
    pub unsafe fn resolve<K: BufferBackend<Buffer = B>>(
        backend: &K,
        t: &DLTensor,
        what: &str,
    ) -> BackendResult<DeviceSide<B>, B::Failure> {
        let buffer = backend.buffers().get(t.data, t.device.device_id)?;
        // SAFETY: guaranteed by the caller.
        let extent = unsafe { byte_extent(t) }?;
        let size = buffer.placement().size;
        if extent.start < 0 || extent.end > i128::from(size) {
            return Err(BackendError::invalid(format!(
                "{what} reaches bytes {}..{} of a {} buffer of {} bytes",
                extent.start,
                extent.end,
                <B::Failure as BackendFailure>::TITLE,
                size
            )));
        }
        Ok(DeviceSide {
            buffer,
            extent: extent.start as u64..extent.end as u64,
        })
    }

    fn len(&self) -> u64 {
        self.extent.end - self.extent.start
    }
}

/// Copies `from` into `to`; at least one is a tensor of `backend`, the other on the host or of
/// `backend`.
///
/// # Safety
/// Both descriptors are valid with the same shape and dtype; a host side holds its elements.
pub unsafe fn copy_tensors<K: BufferBackend>(
    backend: &K,
    from: &DLTensor,
    to: &DLTensor,
) -> BackendResult<(), K::Failure> {
    // SAFETY: guaranteed by the caller.
    let nbytes = unsafe { tensor_nbytes(from) }? as u64;
    let on_host = |t: &DLTensor| t.device.device_type == kDLCPU;
    match (on_host(from), on_host(to)) {
        (true, true) => Err(BackendError::invalid(format!(
            "a copy between two host tensors is not the {} backend's",
            K::Failure::TITLE
        ))),
        (true, false) => {
            // SAFETY: guaranteed by the caller.
            let dst = unsafe { DeviceSide::resolve(backend, to, "the copy's destination")? };
            // SAFETY: guaranteed by the caller.
            unsafe { write_from_host(from, &dst, to, nbytes) }
        }
        (false, true) => {
            // SAFETY: guaranteed by the caller.
            let src = unsafe { DeviceSide::resolve(backend, from, "the copy's source")? };
            src.buffer.access(HostAccess::Read {
                extent: src.extent.clone(),
                f: &mut |view, start| {
                    let from_host = host_view(from, view.cast_mut(), start);
                    // SAFETY: the view holds the source's elements (read only); the
                    // destination is host memory.
                    unsafe { copy_host_strided(&from_host, to) }
                },
            })
        }
        (false, false) => {
            // SAFETY: guaranteed by the caller.
            let (src, dst) = unsafe {
                (
                    DeviceSide::resolve(backend, from, "the copy's source")?,
                    DeviceSide::resolve(backend, to, "the copy's destination")?,
                )
            };
            // SAFETY: guaranteed by the caller.
            let compact = unsafe { is_row_major(from) && is_row_major(to) };
            let same_device = src.buffer.placement().device_id == dst.buffer.placement().device_id;
            if compact && same_device && queue_on_device(&src, &dst)? {
                return Ok(());
            }
            let mut gathered = vec![0u8; nbytes as usize];
            let compact = DLTensor {
                strides: std::ptr::null_mut(),
                ..host_view(from, gathered.as_mut_ptr(), from.byte_offset)
            };
            src.buffer.access(HostAccess::Read {
                extent: src.extent.clone(),
                f: &mut |view, start| {
                    let from_host = host_view(from, view.cast_mut(), start);
                    // SAFETY: the view holds the source's elements; `gathered` holds them
                    // compact.
                    unsafe { copy_host_strided(&from_host, &compact) };
                },
            })?;
            // SAFETY: `compact` describes the host bytes just gathered.
            unsafe { write_from_host(&compact, &dst, to, nbytes) }
        }
    }
}

/// A compact copy between two buffers of one device, when the backend takes their extents.
fn queue_on_device<B: DeviceBuffer>(
    src: &DeviceSide<B>,
    dst: &DeviceSide<B>,
) -> BackendResult<bool, B::Failure> {
    if src.len() == 0 {
        return Ok(true);
    }
    src.buffer.copy_to(&dst.buffer, [&src.extent, &dst.extent])
}

/// Writes the elements of host tensor `from` into device side `dst` of tensor `to`.
///
/// # Safety
/// As for [`copy_tensors`].
unsafe fn write_from_host<B: DeviceBuffer>(
    from: &DLTensor,
    dst: &DeviceSide<B>,
    to: &DLTensor,
    nbytes: u64,
) -> BackendResult<(), B::Failure> {
    // SAFETY: guaranteed by the caller.
    let compact = unsafe { is_row_major(from) && is_row_major(to) };
    if compact && dst.len() == nbytes {
        // SAFETY: a compact host source holds `nbytes` bytes from its data plus byte offset.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                from.data.cast::<u8>().add(from.byte_offset as usize),
                nbytes as usize,
            )
        };
        let offset = dst.extent.start;
        return dst.buffer.access(HostAccess::Write { offset, bytes });
    }
    // What lies between the destination's elements keeps its bytes.
    let read_first = dst.len() != nbytes;
    dst.buffer.access(HostAccess::Update {
        extent: dst.extent.clone(),
        read_first,
        f: &mut |view, start| {
            let to_host = host_view(to, view, start);
            // SAFETY: the view holds the destination's elements; the source is host memory.
            unsafe { copy_host_strided(from, &to_host) }
        },
    })
}
