//! Checks every copy passes first, and the strided copy between two host descriptors that the
//! CPU backend (and any backend whose memory the host can address) uses.

use std::ops::Range;

use tvm_ffi::abi::DLTensor;
use tvm_ffi::{DataType, Device, Error, ErrorKind, Result};

/// The shape of a descriptor (empty for a scalar).
///
/// # Safety
/// `t` is a valid descriptor: `shape` holds `ndim` values when `ndim > 0`.
unsafe fn shape_of(t: &DLTensor) -> &[i64] {
    match usize::try_from(t.ndim) {
        // SAFETY: guaranteed by the caller.
        Ok(n) if n > 0 && !t.shape.is_null() => unsafe { std::slice::from_raw_parts(t.shape, n) },
        _ => &[],
    }
}

/// The strides of a descriptor in elements: its own, or compact row-major ones when NULL.
///
/// # Safety
/// As for [`shape_of`]; `strides` is NULL or holds `ndim` values.
unsafe fn strides_of(t: &DLTensor) -> Vec<i64> {
    // SAFETY: guaranteed by the caller.
    let shape = unsafe { shape_of(t) };
    if t.strides.is_null() || shape.is_empty() {
        return tvm_ffi::tensor::compact_strides(shape);
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(t.strides, shape.len()) }.to_vec()
}

/// Bytes a compact tensor of this descriptor's shape and dtype takes; a `ValueError` for a
/// negative dimension or a size that does not fit in memory.
///
/// # Safety
/// `t` is a valid descriptor.
pub unsafe fn tensor_nbytes(t: &DLTensor) -> Result<usize> {
    // SAFETY: guaranteed by the caller.
    let shape = unsafe { shape_of(t) };
    let dtype = DataType(t.dtype);
    shape
        .iter()
        .try_fold(dtype.itemsize(), |acc, d| {
            usize::try_from(*d).ok().and_then(|d| acc.checked_mul(d))
        })
        .filter(|n| isize::try_from(*n).is_ok())
        .ok_or_else(|| {
            Error::new(
                ErrorKind::ValueError,
                format!("a tensor of shape {shape:?} and dtype {dtype} does not fit in memory"),
            )
        })
}

/// Checks that `from` can be copied into `to`: same dtype and shape. Returns the bytes of
/// element data the copy moves.
///
/// # Safety
/// Both descriptors are valid.
pub unsafe fn check_copy_shapes(from: &DLTensor, to: &DLTensor) -> Result<usize> {
    let (from_dtype, to_dtype) = (DataType(from.dtype), DataType(to.dtype));
    if from_dtype != to_dtype {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "cannot copy a tensor of dtype {from_dtype} into one of dtype {to_dtype}"
        );
    }
    // SAFETY: guaranteed by the caller.
    let (from_shape, to_shape) = unsafe { (shape_of(from), shape_of(to)) };
    if from_shape != to_shape {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "cannot copy a tensor of shape {from_shape:?} into one of shape {to_shape:?}"
        );
    }
    // SAFETY: guaranteed by the caller.
    let nbytes = unsafe { tensor_nbytes(from)? };
    for (side, t) in [("source", from), ("destination", to)] {
        if nbytes > 0 && t.data.is_null() {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "the {side} of a copy on {} has no data (NULL)",
                Device(t.device)
            );
        }
    }
    Ok(nbytes)
}

/// The bytes, relative to `data`, that the elements of `t` occupy (an empty range when it has
/// none); a `ValueError` if an offset overflows.
///
/// # Safety
/// `t` is a valid descriptor.
pub unsafe fn byte_extent(t: &DLTensor) -> Result<Range<i128>> {
    // SAFETY: guaranteed by the caller.
    let (shape, strides) = unsafe { (shape_of(t), strides_of(t)) };
    let itemsize = DataType(t.dtype).itemsize() as i128;
    let start = i128::from(t.byte_offset);
    if shape.contains(&0) {
        return Ok(start..start);
    }
    let (mut low, mut high) = (start, start + itemsize);
    for (dim, stride) in shape.iter().zip(&strides) {
        let reach = i128::from(*stride) * i128::from(dim - 1) * itemsize;
        if reach < 0 {
            low += reach;
        } else {
            high += reach;
        }
    }
    Ok(low..high)
}

/// Whether the elements of `t` are compact and in row-major order (NULL strides, or strides
/// equal to the compact ones wherever a dimension is not 1).
///
/// # Safety
/// `t` is a valid descriptor.
pub unsafe fn is_row_major(t: &DLTensor) -> bool {
    if t.strides.is_null() {
        return true;
    }
    // SAFETY: guaranteed by the caller.
    let (shape, strides) = unsafe { (shape_of(t), strides_of(t)) };
    shape.is_empty() || tvm_ffi::tensor::is_contiguous(shape, Some(&strides))
}

/// The descriptor of `t` re-based on host memory `view` that holds the bytes of `t`'s buffer
/// from `view_start` on (a mapped or staged copy of a device buffer): same shape, dtype and
/// strides, on the CPU, with the byte offset taken relative to `view_start`.
///
/// `view_start` must not exceed `t.byte_offset - (bytes before it that t reaches)`: the start
/// of [`byte_extent`] or lower.
pub fn host_view(t: &DLTensor, view: *mut u8, view_start: u64) -> DLTensor {
    DLTensor {
        data: view.cast(),
        byte_offset: t.byte_offset - view_start,
        device: Device::cpu(0).0,
        ..*t
    }
}

/// Copies the elements of `from` into `to`, both in memory the host can address: any strides,
/// byte offsets and overlapping memory. The innermost dimensions that are compact on both sides
/// move as one block.
///
/// # Safety
/// Both descriptors are valid, have the same shape and dtype ([`check_copy_shapes`]) and
/// describe host memory that holds all of their elements.
pub unsafe fn copy_host_strided(from: &DLTensor, to: &DLTensor) {
    // SAFETY: guaranteed by the caller.
    let (shape, src_strides, dst_strides) =
        unsafe { (shape_of(from), strides_of(from), strides_of(to)) };
    if shape.contains(&0) {
        return;
    }
    let itemsize = DataType(from.dtype).itemsize() as isize;
    // The block: the longest suffix of dimensions that is compact on both sides.
    let mut block = itemsize;
    let mut outer = shape.len();
    while outer > 0 {
        let d = outer - 1;
        let extent = shape[d] as isize;
        let compact = |strides: &[i64]| strides[d] as isize * itemsize == block;
        if extent != 1 && !(compact(&src_strides) && compact(&dst_strides)) {
            break;
        }
        block *= extent;
        outer -= 1;
    }
    let src_base = from
        .data
        .cast::<u8>()
        .wrapping_offset(from.byte_offset as isize);
    let dst_base = to
        .data
        .cast::<u8>()
        .wrapping_offset(to.byte_offset as isize);
    // An odometer over the outer dimensions, tracking both byte offsets. Size-1 dimensions never
    // move it (their strides, which may be anything, are never multiplied).
    let dims: Vec<usize> = (0..outer).filter(|d| shape[*d] != 1).collect();
    let mut index = vec![0i64; dims.len()];
    let (mut src_off, mut dst_off) = (0isize, 0isize);
    loop {
        // SAFETY: the offsets stay within the elements both descriptors describe.
        unsafe {
            std::ptr::copy(
                src_base.offset(src_off),
                dst_base.offset(dst_off),
                block as usize,
            )
        };
        let mut k = dims.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            let d = dims[k];
            index[k] += 1;
            src_off += src_strides[d] as isize * itemsize;
            dst_off += dst_strides[d] as isize * itemsize;
            if index[k] < shape[d] {
                break;
            }
            src_off -= src_strides[d] as isize * itemsize * shape[d] as isize;
            dst_off -= dst_strides[d] as isize * itemsize * shape[d] as isize;
            index[k] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tvm_ffi::abi::{DLDataType, DLDevice, kDLCPU, kDLFloat};

    fn view(
        data: &mut [f32],
        shape: &mut [i64],
        strides: Option<&mut [i64]>,
        offset: u64,
    ) -> DLTensor {
        DLTensor {
            data: data.as_mut_ptr().cast(),
            device: DLDevice {
                device_type: kDLCPU,
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
            byte_offset: offset,
        }
    }

    #[test]
    fn transposed_and_offset_copies_move_each_element() {
        // Source: a 2x3 row-major matrix read transposed (shape 3x2, strides 1,3).
        let mut src: Vec<f32> = (0..6).map(|v| v as f32).collect();
        let mut dst = vec![0f32; 8];
        let (mut s_shape, mut s_strides) = ([3i64, 2], [1i64, 3]);
        let mut d_shape = [3i64, 2];
        let from = view(&mut src, &mut s_shape, Some(&mut s_strides), 0);
        let to = view(&mut dst, &mut d_shape, None, 8);
        // SAFETY: both views describe live host buffers that hold their elements.
        unsafe {
            assert_eq!(check_copy_shapes(&from, &to).unwrap(), 24);
            copy_host_strided(&from, &to);
            assert_eq!(byte_extent(&to).unwrap(), 8..32);
            assert_eq!(byte_extent(&from).unwrap(), 0..24);
        }
        assert_eq!(dst, [0.0, 0.0, 0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    }

    #[test]
    fn mismatches_name_both_sides() {
        let mut a = vec![0f32; 6];
        let mut b = vec![0f32; 6];
        let (mut sa, mut sb) = ([2i64, 3], [3i64, 2]);
        let from = view(&mut a, &mut sa, None, 0);
        let mut to = view(&mut b, &mut sb, None, 0);
        // SAFETY: valid descriptors.
        let err = unsafe { check_copy_shapes(&from, &to) }.unwrap_err();
        assert!(
            err.message().contains("[2, 3]") && err.message().contains("[3, 2]"),
            "{err}"
        );
        to.dtype.bits = 64;
        // SAFETY: valid descriptors.
        let err = unsafe { check_copy_shapes(&from, &to) }.unwrap_err();
        assert!(
            err.is_kind(ErrorKind::ValueError) && err.message().contains("float64"),
            "{err}"
        );
    }
}
