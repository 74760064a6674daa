//! Copies between host memory and Vulkan buffers, and between Vulkan buffers, with any strides
//! and byte offsets. Host-mapped buffers are read and written in place (one `memcpy` for
//! compact tensors); other buffers go through a staging buffer. A compact copy between two
//! buffers of one device is a `vkCmdCopyBuffer` on the device's queue.

use std::ops::Range;
use std::sync::Arc;

use ash::vk;
use tvm_ffi::abi::{DLTensor, kDLCPU};
use tvm_runtime::device::{byte_extent, copy_host_strided, host_view, is_row_major, tensor_nbytes};

use crate::api::VulkanDeviceApi;
use crate::error::{VkResult, VulkanError};
use crate::memory::VulkanBuffer;

/// A device side of a copy: its buffer and the bytes its elements occupy.
struct DeviceSide {
    buffer: Arc<VulkanBuffer>,
    extent: Range<u64>,
}

impl DeviceSide {
    /// # Safety
    /// `t` is a valid descriptor of a Vulkan tensor.
    unsafe fn resolve(api: &VulkanDeviceApi, t: &DLTensor, what: &str) -> VkResult<DeviceSide> {
        let buffer = api.buffer(t.data, t.device.device_id)?;
        // SAFETY: guaranteed by the caller.
        let extent = unsafe { byte_extent(t) }.map_err(|e| VulkanError::invalid(e.message()))?;
        buffer.check_range(&extent, what)?;
        Ok(DeviceSide {
            buffer,
            extent: extent.start as u64..extent.end as u64,
        })
    }

    fn len(&self) -> u64 {
        self.extent.end - self.extent.start
    }

    /// The descriptor of `t` re-based on a host view of this side's extent at `view`.
    fn host_descriptor(&self, t: &DLTensor, view: *mut u8) -> DLTensor {
        host_view(t, view, self.extent.start)
    }
}

/// Copies `from` into `to`; at least one is a Vulkan tensor, the other on the host or Vulkan.
///
/// # Safety
/// Both descriptors are valid with the same shape and dtype; a host side holds its elements.
pub(crate) unsafe fn copy_tensors(
    api: &VulkanDeviceApi,
    from: &DLTensor,
    to: &DLTensor,
) -> VkResult<()> {
    // SAFETY: guaranteed by the caller.
    let nbytes = unsafe { tensor_nbytes(from) }.map_err(|e| VulkanError::invalid(e.message()))?;
    let on_host = |t: &DLTensor| t.device.device_type == kDLCPU;
    match (on_host(from), on_host(to)) {
        (true, true) => Err(VulkanError::invalid(
            "a copy between two host tensors is not the Vulkan backend's",
        )),
        (true, false) => {
            // SAFETY: guaranteed by the caller.
            let dst = unsafe { DeviceSide::resolve(api, to, "the copy's destination")? };
            // A staged destination with gaps between its elements keeps the bytes in the gaps.
            let read = dst.len() != nbytes as u64;
            let range = dst.extent.clone();
            dst.buffer.with_host_view(range, read, true, |view| {
                let to_host = dst.host_descriptor(to, view);
                // SAFETY: the view holds the destination's elements; the source is host memory.
                unsafe { copy_host_strided(from, &to_host) }
            })
        }
        (false, true) => {
            // SAFETY: guaranteed by the caller.
            let src = unsafe { DeviceSide::resolve(api, from, "the copy's source")? };
            let range = src.extent.clone();
            src.buffer.with_host_view(range, true, false, |view| {
                let from_host = src.host_descriptor(from, view);
                // SAFETY: the view holds the source's elements; the destination is host memory.
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
            if compact && Arc::ptr_eq(&src.buffer.device, &dst.buffer.device) {
                return copy_on_device(&src, &dst);
            }
            // SAFETY: guaranteed by the caller.
            unsafe { copy_through_host(&src, from, &dst, to, nbytes) }
        }
    }
}

/// A compact copy between two buffers of one device, queued on the device.
fn copy_on_device(src: &DeviceSide, dst: &DeviceSide) -> VkResult<()> {
    let device = &src.buffer.device;
    let region = [vk::BufferCopy {
        src_offset: src.extent.start,
        dst_offset: dst.extent.start,
        size: src.len(),
    }];
    if region[0].size == 0 {
        return Ok(());
    }
    let keep: Vec<Arc<dyn std::any::Any + Send + Sync>> =
        vec![src.buffer.clone(), dst.buffer.clone()];
    device.record(keep, |cmd, _| {
        // SAFETY: both buffers are live (the batch keeps them) and hold the region.
        unsafe {
            device
                .raw
                .cmd_copy_buffer(cmd, src.buffer.raw, dst.buffer.raw, &region)
        };
        Ok(true)
    })
}

/// A strided copy between two buffers (of one device or two) through host views of both.
///
/// # Safety
/// As for [`copy_tensors`].
unsafe fn copy_through_host(
    src: &DeviceSide,
    from: &DLTensor,
    dst: &DeviceSide,
    to: &DLTensor,
    nbytes: usize,
) -> VkResult<()> {
    let read_dst = dst.len() != nbytes as u64;
    src.buffer
        .with_host_view(src.extent.clone(), true, false, |src_view| {
            dst.buffer
                .with_host_view(dst.extent.clone(), read_dst, true, |dst_view| {
                    let from_host = src.host_descriptor(from, src_view);
                    let to_host = dst.host_descriptor(to, dst_view);
                    // SAFETY: both views hold their side's elements.
                    unsafe { copy_host_strided(&from_host, &to_host) }
                })
        })?
}
