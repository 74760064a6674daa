//! Copies between host memory and device memory with any strides and byte offsets, planned once
//! for every backend that has flat copies between addresses:
//!
//! - both sides compact (row-major, no gaps): one flat copy through the driver, queued on the
//!   stream and done when it is synchronized;
//! - otherwise through host staging, synchronously: a strided device side is read whole (the
//!   bytes its elements span), rearranged on the host, and, when it is the destination, written
//!   back whole, so the bytes between its elements keep their values.

use tvm_ffi::abi::{DLTensor, kDLCPU};
use tvm_ffi::{Device, Result};
use tvm_runtime::device::{StreamHandle, byte_extent, copy_host_strided, tensor_nbytes};

/// One flat copy of `len` bytes. Device memory is named by its address.
#[derive(Clone, Copy, Debug)]
pub enum FlatCopy {
    /// From host `src` to device address `dst`.
    HostToDevice {
        /// The device address written.
        dst: u64,
        /// The host bytes read.
        src: *const u8,
        /// How many bytes.
        len: usize,
    },
    /// From device address `src` to host `dst`.
    DeviceToHost {
        /// The host bytes written.
        dst: *mut u8,
        /// The device address read.
        src: u64,
        /// How many bytes.
        len: usize,
    },
    /// Between two device addresses.
    DeviceToDevice {
        /// The device address written.
        dst: u64,
        /// The device address read.
        src: u64,
        /// How many bytes.
        len: usize,
    },
}

impl FlatCopy {
    /// What the copy does, for an error: "copying 16 bytes from the host to cuda:0".
    pub fn describe(&self, device: Device) -> String {
        match *self {
            FlatCopy::HostToDevice { len, .. } => {
                format!("copying {len} bytes from the host to {device}")
            }
            FlatCopy::DeviceToHost { len, .. } => {
                format!("copying {len} bytes from {device} to the host")
            }
            FlatCopy::DeviceToDevice { len, .. } => format!("copying {len} bytes on {device}"),
        }
    }
}

/// The flat copies of a driver, queued on a stream.
pub trait RawCopies {
    /// Queues `copy` on `stream`.
    ///
    /// # Safety
    /// Its host side is readable (or writable, when written) for `len` bytes and its device
    /// side is device memory of `len` bytes, both until the stream is synchronized.
    unsafe fn copy(&self, copy: FlatCopy, stream: StreamHandle) -> Result<()>;

    /// Waits for the work queued on `stream`.
    fn synchronize(&self, stream: StreamHandle) -> Result<()>;
}

/// Whether the elements of `t` are compact and row-major.
///
/// # Safety
/// `t` is a valid descriptor.
unsafe fn is_compact(t: &DLTensor) -> bool {
    let ndim = usize::try_from(t.ndim).unwrap_or(0);
    if t.strides.is_null() || ndim == 0 {
        return true;
    }
    // SAFETY: a valid descriptor's shape and strides hold `ndim` values.
    let (shape, strides) = unsafe {
        (
            std::slice::from_raw_parts(t.shape, ndim),
            std::slice::from_raw_parts(t.strides, ndim),
        )
    };
    tvm_ffi::tensor::is_contiguous(shape, Some(strides))
}

/// The address of the first element of `t`.
fn first_element(t: &DLTensor) -> u64 {
    (t.data as u64).wrapping_add(t.byte_offset)
}

/// Host bytes standing in for the elements of a device tensor, and the descriptor that reads
/// them in the tensor's own layout.
struct Staged {
    buffer: Vec<u8>,
    host: DLTensor,
    /// The device address of `buffer[0]`.
    device_start: u64,
}

/// Host staging for device tensor `t`: the bytes its elements span, read from the device first
/// when `fill` (a source, or a strided destination whose gaps must survive); compact and unread
/// otherwise.
///
/// # Safety
/// `t` is a valid descriptor of device memory that holds its elements.
unsafe fn stage(
    copies: &impl RawCopies,
    t: &DLTensor,
    fill: bool,
    stream: StreamHandle,
) -> Result<Staged> {
    // SAFETY: guaranteed by the caller.
    let extent = unsafe { byte_extent(t)? };
    let len = usize::try_from(extent.end - extent.start).unwrap_or(0);
    let mut buffer = vec![0u8; len];
    let device_start = (t.data as u64).wrapping_add(extent.start as i64 as u64);
    if fill {
        let dst = buffer.as_mut_ptr();
        let copy = FlatCopy::DeviceToHost {
            dst,
            src: device_start,
            len,
        };
        // SAFETY: the span lies in the tensor's memory (the caller's contract) and the buffer
        // holds it; the stream is synchronized before the buffer is read or dropped.
        unsafe { copies.copy(copy, stream)? };
        copies.synchronize(stream)?;
    }
    let host = DLTensor {
        // The descriptor keeps its byte offset and strides; `data` moves so that the first
        // spanned byte lands on `buffer[0]`.
        data: buffer
            .as_mut_ptr()
            .wrapping_offset(-(extent.start as isize))
            .cast(),
        device: Device::cpu(0).0,
        ..*t
    };
    Ok(Staged {
        buffer,
        host,
        device_start,
    })
}

/// Copies the elements of `from` into `to` (same shape and dtype, checked by the caller); each
/// side is device memory of this backend when its `*_on_device` says so, host memory otherwise.
/// Flat copies stay queued on `stream`; staged ones are done when this returns.
///
/// # Safety
/// Both descriptors are valid and their memory holds their elements until the stream is
/// synchronized.
pub unsafe fn copy_tensor(
    copies: &impl RawCopies,
    from: &DLTensor,
    from_on_device: bool,
    to: &DLTensor,
    to_on_device: bool,
    stream: StreamHandle,
) -> Result<()> {
    // SAFETY: guaranteed by the caller.
    let len = unsafe { tensor_nbytes(from)? };
    if len == 0 {
        return Ok(());
    }
    if !from_on_device && !to_on_device {
        // SAFETY: both sides are host memory holding their elements.
        unsafe { copy_host_strided(from, to) };
        return Ok(());
    }
    // SAFETY: valid descriptors.
    if unsafe { is_compact(from) && is_compact(to) } {
        let (src, dst) = (first_element(from), first_element(to));
        let copy = match (from_on_device, to_on_device) {
            (true, true) => FlatCopy::DeviceToDevice { dst, src, len },
            (true, false) => FlatCopy::DeviceToHost {
                dst: dst as *mut u8,
                src,
                len,
            },
            _ => FlatCopy::HostToDevice {
                dst,
                src: src as *const u8,
                len,
            },
        };
        // SAFETY: compact tensors hold `len` bytes from their first element.
        return unsafe { copies.copy(copy, stream) };
    }
    let source = if from_on_device {
        // SAFETY: device memory holding the elements.
        Some(unsafe { stage(copies, from, true, stream)? })
    } else {
        None
    };
    let source_host = source.as_ref().map_or(from, |s| &s.host);
    if !to_on_device {
        // SAFETY: both descriptors address host memory holding their elements.
        unsafe { copy_host_strided(source_host, to) };
        return Ok(());
    }
    // SAFETY: valid descriptors; a strided destination is read first so its gaps survive.
    let target = unsafe { stage(copies, to, !is_compact(to), stream)? };
    // SAFETY: both descriptors address host memory holding their elements.
    unsafe { copy_host_strided(source_host, &target.host) };
    let copy = FlatCopy::HostToDevice {
        dst: target.device_start,
        src: target.buffer.as_ptr(),
        len: target.buffer.len(),
    };
    // SAFETY: the staging buffer spans the destination's elements on the device; it lives until
    // the stream is synchronized below.
    unsafe { copies.copy(copy, stream)? };
    copies.synchronize(stream)?;
    debug_assert_eq!(target.host.device.device_type, kDLCPU);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use tvm_ffi::abi::{DLDataType, DLDevice, kDLFloat};

    /// "Device memory" in a host vector, addressed from 0x1000, with every copy logged.
    struct FakeDevice {
        memory: RefCell<Vec<u8>>,
        log: RefCell<Vec<&'static str>>,
    }

    const BASE: u64 = 0x1000;

    impl FakeDevice {
        fn at(&self, address: u64) -> *mut u8 {
            let offset = (address - BASE) as usize;
            assert!(offset <= self.memory.borrow().len());
            self.memory.borrow_mut().as_mut_ptr().wrapping_add(offset)
        }
    }

    impl RawCopies for FakeDevice {
        unsafe fn copy(&self, copy: FlatCopy, _: StreamHandle) -> Result<()> {
            // SAFETY (each arm): the test's buffers hold `len` bytes.
            match copy {
                FlatCopy::HostToDevice { dst, src, len } => {
                    self.log.borrow_mut().push("h2d");
                    // SAFETY: as above.
                    unsafe { std::ptr::copy(src, self.at(dst), len) };
                }
                FlatCopy::DeviceToHost { dst, src, len } => {
                    self.log.borrow_mut().push("d2h");
                    // SAFETY: as above.
                    unsafe { std::ptr::copy(self.at(src), dst, len) };
                }
                FlatCopy::DeviceToDevice { dst, src, len } => {
                    self.log.borrow_mut().push("d2d");
                    // SAFETY: as above.
                    unsafe { std::ptr::copy(self.at(src), self.at(dst), len) };
                }
            }
            Ok(())
        }
        fn synchronize(&self, _: StreamHandle) -> Result<()> {
            self.log.borrow_mut().push("sync");
            Ok(())
        }
    }

    fn descriptor(data: u64, shape: &mut [i64], strides: Option<&mut [i64]>) -> DLTensor {
        DLTensor {
            data: data as *mut std::ffi::c_void,
            device: DLDevice {
                device_type: 2,
                device_id: 0,
            },
            ndim: shape.len() as i32,
            dtype: DLDataType {
                code: kDLFloat,
                bits: 32,
                lanes: 1,
            },
            shape: shape.as_mut_ptr(),
            strides: strides.map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
            byte_offset: 0,
        }
    }

    #[test]
    fn compact_copies_are_one_queued_driver_copy() {
        let device = FakeDevice {
            memory: RefCell::new(vec![0; 64]),
            log: RefCell::default(),
        };
        let mut host: Vec<f32> = (0..4).map(|v| v as f32).collect();
        let mut shape = [4i64];
        let from = descriptor(host.as_mut_ptr() as u64, &mut shape, None);
        let to = descriptor(BASE + 16, &mut shape, None);
        // SAFETY: the descriptors describe the test's buffers.
        unsafe { copy_tensor(&device, &from, false, &to, true, StreamHandle::NULL).unwrap() };
        assert_eq!(*device.log.borrow(), ["h2d"]);
        assert_eq!(&device.memory.borrow()[16..20], &0f32.to_le_bytes());
        assert_eq!(&device.memory.borrow()[28..32], &3f32.to_le_bytes());
    }

    #[test]
    fn strided_device_destinations_keep_their_gaps() {
        let device = FakeDevice {
            memory: RefCell::new(vec![0xAB; 64]),
            log: RefCell::default(),
        };
        let mut host: Vec<f32> = vec![1.0, 2.0, 3.0];
        let mut shape = [3i64];
        let mut strides = [2i64];
        let from = descriptor(host.as_mut_ptr() as u64, &mut shape, None);
        let mut to = descriptor(BASE, &mut shape, Some(&mut strides));
        to.byte_offset = 4;
        // SAFETY: the descriptors describe the test's buffers.
        unsafe { copy_tensor(&device, &from, false, &to, true, StreamHandle::NULL).unwrap() };
        assert_eq!(*device.log.borrow(), ["d2h", "sync", "h2d", "sync"]);
        let memory = device.memory.borrow();
        assert_eq!(&memory[0..4], &[0xAB; 4]);
        assert_eq!(&memory[4..8], &1f32.to_le_bytes());
        assert_eq!(&memory[8..12], &[0xAB; 4]);
        assert_eq!(&memory[12..16], &2f32.to_le_bytes());
        assert_eq!(&memory[20..24], &3f32.to_le_bytes());
        assert_eq!(&memory[24..28], &[0xAB; 4]);
        drop(memory);
        // And back: a strided device source into compact host memory.
        let mut back = vec![0f32; 3];
        let out = descriptor(back.as_mut_ptr() as u64, &mut shape, None);
        // SAFETY: as above.
        unsafe { copy_tensor(&device, &to, true, &out, false, StreamHandle::NULL).unwrap() };
        assert_eq!(back, [1.0, 2.0, 3.0]);
    }
}
