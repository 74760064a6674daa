//! The `strided_copy` target: two descriptors over host buffers (any shapes, strides, offsets
//! and dtypes), checked with `check_copy_shapes`, copied with `copy_host_strided` when every
//! element lies inside its buffer, and compared with a naive element-by-element copy; the same
//! copy also goes through the strict test device backend, which must refuse out-of-bounds
//! device descriptors.

use std::ffi::c_void;
use std::sync::OnceLock;

use tvm_ffi::DataType;
use tvm_ffi::abi::{self, DLDataType, DLDevice, DLTensor};
use tvm_runtime::device::{
    DeviceApi, StreamHandle, TestDeviceApi, TestDeviceConfig, check_copy_shapes, copy_host_strided,
};

use crate::input::Input;

/// Most elements a copy may move (stride-0 dims can make huge shapes fit a small buffer).
const MAX_ELEMENTS: i128 = 1 << 14;
/// Largest host buffer.
const MAX_BUFFER: usize = 1024;

/// One side of a copy.
#[derive(Clone, Debug)]
struct Side {
    ndim: i32,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    byte_offset: u64,
    dtype: DLDataType,
    buffer_len: usize,
    null_data: bool,
}

impl Side {
    fn descriptor(&mut self, data: *mut u8) -> DLTensor {
        DLTensor {
            data: if self.null_data {
                std::ptr::null_mut()
            } else {
                data.cast()
            },
            device: DLDevice {
                device_type: abi::kDLCPU,
                device_id: 0,
            },
            ndim: self.ndim,
            dtype: self.dtype,
            shape: self.shape.as_mut_ptr(),
            strides: self
                .strides
                .as_mut()
                .map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
            byte_offset: self.byte_offset,
        }
    }

    /// The dims the runtime sees: none for `ndim <= 0`.
    fn dims(&self) -> &[i64] {
        if self.ndim > 0 { &self.shape } else { &[] }
    }

    /// Strides in elements, compact ones when none are given (exact arithmetic).
    fn strides(&self) -> Vec<i128> {
        let dims = self.dims();
        match &self.strides {
            Some(s) if !dims.is_empty() => s.iter().map(|v| i128::from(*v)).collect(),
            _ => {
                let mut out = vec![1i128; dims.len()];
                for i in (0..dims.len().saturating_sub(1)).rev() {
                    out[i] = out[i + 1].saturating_mul(i128::from(dims[i + 1].max(1)));
                }
                out
            }
        }
    }

    /// The byte range the elements occupy relative to `data` (`None`: no elements).
    fn extent(&self) -> Option<(i128, i128)> {
        let dims = self.dims();
        if dims.contains(&0) {
            return None;
        }
        let itemsize = DataType(self.dtype).itemsize() as i128;
        let start = i128::from(self.byte_offset);
        let (mut low, mut high) = (start, start + itemsize);
        for (dim, stride) in dims.iter().zip(self.strides()) {
            let reach = stride
                .saturating_mul(i128::from(*dim) - 1)
                .saturating_mul(itemsize);
            if reach < 0 {
                low = low.saturating_add(reach);
            } else {
                high = high.saturating_add(reach);
            }
        }
        Some((low, high))
    }

    /// Whether every element lies inside a buffer of `len` bytes.
    fn fits(&self, len: usize) -> bool {
        match self.extent() {
            None => true,
            Some((low, high)) => low >= 0 && high <= len as i128,
        }
    }

    /// The byte offset of the element at `index`.
    fn offset_of(&self, index: &[i64]) -> i128 {
        let itemsize = DataType(self.dtype).itemsize() as i128;
        let strides = self.strides();
        let elements: i128 = index
            .iter()
            .zip(&strides)
            .map(|(i, s)| i128::from(*i) * s)
            .sum();
        i128::from(self.byte_offset) + elements * itemsize
    }
}

fn read_dtype(input: &mut Input<'_>) -> DLDataType {
    input.dtype(
        8,
        6,
        &[8, 16, 32, 64, 1, 4, 24, 0],
        &[1, 1, 1, 2, 3, 4, 0, 65535],
    )
}

fn read_side(input: &mut Input<'_>, shape: &[i64], ndim: i32, dtype: DLDataType) -> Side {
    let strides = (!input.u8().is_multiple_of(3)).then(|| {
        shape
            .iter()
            .map(|_| input.i64_mostly(-4, 8))
            .collect::<Vec<_>>()
    });
    let byte_offset = match input.u8() % 8 {
        0 => crate::input::INTERESTING_I64[input.below(20)] as u64,
        1 => input.u64(),
        _ => u64::from(input.u8()),
    };
    Side {
        ndim,
        shape: shape.to_vec(),
        strides,
        byte_offset,
        dtype,
        buffer_len: input.range_i64(0, MAX_BUFFER as i64) as usize,
        null_data: input.u8().is_multiple_of(32),
    }
}

/// What `check_copy_shapes` must answer: the bytes moved, or an error.
fn expected_nbytes(from: &Side, to: &Side) -> Option<usize> {
    if DataType(from.dtype) != DataType(to.dtype) || from.dims() != to.dims() {
        return None;
    }
    let itemsize = DataType(from.dtype).itemsize();
    let nbytes = from.dims().iter().try_fold(itemsize, |acc, d| {
        usize::try_from(*d).ok().and_then(|d| acc.checked_mul(d))
    })?;
    isize::try_from(nbytes).ok()?;
    if nbytes > 0 && (from.null_data || to.null_data) {
        return None;
    }
    Some(nbytes)
}

/// The naive copy: every element in row-major order, `itemsize` bytes each.
fn reference_copy(from: &Side, src: &[u8], to: &Side, dst: &mut [u8]) {
    let dims = from.dims();
    if dims.contains(&0) {
        return;
    }
    let itemsize = DataType(from.dtype).itemsize();
    let mut index = vec![0i64; dims.len()];
    loop {
        let s = usize::try_from(from.offset_of(&index)).expect("inside the source");
        let d = usize::try_from(to.offset_of(&index)).expect("inside the destination");
        let item = src[s..s + itemsize].to_vec();
        dst[d..d + itemsize].copy_from_slice(&item);
        let mut k = dims.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            index[k] += 1;
            if index[k] < dims[k] {
                break;
            }
            index[k] = 0;
        }
    }
}

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt))
        .collect()
}

/// The shared simulated device (unregistered, so the fuzz run leaves the registry alone).
fn test_device() -> &'static TestDeviceApi {
    static API: OnceLock<TestDeviceApi> = OnceLock::new();
    API.get_or_init(|| {
        TestDeviceApi::new(TestDeviceConfig {
            num_devices: 1,
            memory_bytes: 1 << 20,
        })
    })
}

/// The destination side on the test device: a device allocation of `to.buffer_len` bytes, the
/// descriptor's data pointer displaced by `shift` bytes from its start. Copies `from` into it,
/// synchronizes, reads the allocation back and compares with `expected` (the host result).
fn copy_to_test_device(from: &mut Side, src: &mut [u8], to: &Side, shift: i64, expected: &[u8]) {
    let api = test_device();
    let device = tvm_ffi::Device::new(abi::kDLExtDev, 0);
    let len = to.buffer_len;
    let base = api
        .alloc(device, len, 64, DataType(to.dtype))
        .expect("test device allocation");
    let _free = FreeOnDrop(base);
    // Fill the device memory with the destination's initial bytes.
    let mut initial = pattern(len, 0x40);
    transfer_whole(api, base, &mut initial, true);

    let mut to_side = to.clone();
    let data = (base as u64).wrapping_add(shift as u64) as *mut u8;
    let mut dst_desc = to_side.descriptor(data);
    dst_desc.device = device.0;
    dst_desc.data = data.cast::<c_void>();
    let src_desc = from.descriptor(src.as_mut_ptr());
    let inside = device_inside(&to_side, shift, len);
    // SAFETY: the source is a valid host descriptor whose elements lie in `src`; the device
    // side is checked by the backend itself.
    let queued = unsafe { api.copy(&src_desc, &dst_desc, StreamHandle::NULL) };
    match queued {
        Err(err) => {
            assert!(
                !inside,
                "the test device refused an in-bounds copy: {err:?}"
            );
            assert!(err.is_kind("ValueError"), "{err:?}");
        }
        Ok(()) => {
            assert!(
                inside,
                "the test device queued an out-of-bounds copy: {to_side:?}"
            );
            let synced = api.sync_stream(device, StreamHandle::NULL);
            let mut back = vec![0u8; len];
            transfer_whole(api, base, &mut back, false);
            synced.expect("a queued in-bounds copy failed when run");
            assert_eq!(back, expected, "test device copy differs: {to_side:?}");
        }
    }
    drop(to_side);
}

/// Copies all of `host` to (`upload`) or from the test device allocation at `base` (as long as
/// `host`), and synchronizes.
fn transfer_whole(api: &TestDeviceApi, base: *mut c_void, host: &mut [u8], upload: bool) {
    let device = DLDevice {
        device_type: abi::kDLExtDev,
        device_id: 0,
    };
    let mut shape = [host.len() as i64];
    let host_side = DLTensor {
        data: host.as_mut_ptr().cast(),
        device: DLDevice {
            device_type: abi::kDLCPU,
            device_id: 0,
        },
        ndim: 1,
        dtype: DLDataType {
            code: abi::kDLUInt,
            bits: 8,
            lanes: 1,
        },
        shape: shape.as_mut_ptr(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let device_side = DLTensor {
        data: base,
        device,
        ..host_side
    };
    let (from, to) = if upload {
        (&host_side, &device_side)
    } else {
        (&device_side, &host_side)
    };
    // SAFETY: whole-buffer descriptors of live memory, synchronized before `host` is released.
    unsafe { api.copy(from, to, StreamHandle::NULL) }.expect("whole-buffer transfer");
    api.sync_stream(tvm_ffi::Device(device), StreamHandle::NULL)
        .expect("whole-buffer transfer sync");
}

/// Whether `to`'s elements lie inside a device allocation of `len` bytes when its data pointer is
/// `shift` bytes from the allocation's start (an empty tensor: its first byte within or at the
/// end of the allocation).
fn device_inside(to: &Side, shift: i64, len: usize) -> bool {
    match to.extent() {
        None => {
            let at = i128::from(shift) + i128::from(to.byte_offset);
            (0..=len as i128).contains(&at)
        }
        Some((low, high)) => {
            let (low, high) = (low + i128::from(shift), high + i128::from(shift));
            low >= 0 && high <= len as i128
        }
    }
}

/// Frees a test device allocation when dropped, so that a failing input does not exhaust the
/// simulated memory for the inputs after it.
struct FreeOnDrop(*mut c_void);

impl Drop for FreeOnDrop {
    fn drop(&mut self) {
        let device = tvm_ffi::Device::new(abi::kDLExtDev, 0);
        // SAFETY: allocated by `copy_to_test_device`, freed once.
        let freed = unsafe { test_device().free(device, self.0) };
        if !std::thread::panicking() {
            freed.expect("test device free");
        }
    }
}

/// Strided host copies: `check_copy_shapes` answers exactly as the documented rules say; when
/// both sides' elements lie inside their buffers, `copy_host_strided` writes exactly what a
/// naive element-by-element copy writes (no byte outside the destination's elements changes,
/// the source is untouched), on separate buffers or on one shared buffer whose element ranges
/// do not overlap; the strict test device performs the same copy or refuses an out-of-bounds
/// device descriptor.
pub fn strided_copy(data: &[u8]) {
    let mut input = Input::new(data);
    let ndim = match input.u8() % 16 {
        15 => -1,
        n => i32::from(n % 6),
    };
    let count = usize::try_from(ndim).unwrap_or(0);
    let shape: Vec<i64> = (0..count).map(|_| input.i64_mostly(0, 4)).collect();
    let from_dtype = read_dtype(&mut input);
    let to_dtype = if input.u8().is_multiple_of(16) {
        read_dtype(&mut input)
    } else {
        from_dtype
    };
    let mut from = read_side(&mut input, &shape, ndim, from_dtype);
    let mut to_shape = shape.clone();
    if input.u8().is_multiple_of(16) && !to_shape.is_empty() {
        let i = input.below(to_shape.len());
        to_shape[i] = input.i64_mostly(0, 4);
    }
    let mut to = read_side(&mut input, &to_shape, ndim, to_dtype);
    let shared = input.u8().is_multiple_of(4);
    let device_shift = match input.u8() % 4 {
        0 => None,
        1 => Some(input.i64_mostly(-16, 16)),
        _ => Some(0),
    };

    let mut src = pattern(from.buffer_len, 0x11);
    let mut dst = pattern(to.buffer_len, 0x77);
    let src_desc = from.descriptor(src.as_mut_ptr());
    let dst_desc = to.descriptor(dst.as_mut_ptr());
    // SAFETY: valid descriptors: dims point at `ndim` values (or are unused).
    let checked = unsafe { check_copy_shapes(&src_desc, &dst_desc) };
    let expected = expected_nbytes(&from, &to);
    match (&checked, expected) {
        (Ok(n), Some(e)) => assert_eq!(*n, e, "bytes of {from:?}"),
        (Err(err), None) => assert!(err.is_kind("ValueError"), "{err:?}"),
        _ => panic!("check_copy_shapes answered {checked:?}, expected {expected:?}"),
    }
    if checked.is_err() || from.null_data || to.null_data {
        return;
    }
    let elements = from
        .dims()
        .iter()
        .try_fold(1i128, |acc, d| acc.checked_mul(i128::from(*d)));
    // Copies of more elements only run where they must be refused (out of bounds on the device).
    let small = elements.is_some_and(|n| n <= MAX_ELEMENTS);

    if shared && small {
        // One buffer for both sides: the destination's elements must not overlap the source's.
        let len = from.buffer_len.max(to.buffer_len);
        from.buffer_len = len;
        to.buffer_len = len;
        if !from.fits(len) || !to.fits(len) {
            return;
        }
        let disjoint = match (from.extent(), to.extent()) {
            (Some((a0, a1)), Some((b0, b1))) => a1 <= b0 || b1 <= a0,
            _ => true,
        };
        if !disjoint {
            return;
        }
        let mut buffer = pattern(len, 0x23);
        let mut expected = buffer.clone();
        let snapshot = buffer.clone();
        reference_copy(&from, &snapshot, &to, &mut expected);
        let base = buffer.as_mut_ptr();
        let (s, d) = (from.descriptor(base), to.descriptor(base));
        // SAFETY: checked shapes; every element of both lies inside `buffer`.
        unsafe { copy_host_strided(&s, &d) };
        assert_eq!(
            buffer, expected,
            "shared-buffer copy differs: {from:?} -> {to:?}"
        );
        return;
    }

    if !from.fits(from.buffer_len) {
        return;
    }
    if small && to.fits(to.buffer_len) {
        let mut expected = dst.clone();
        reference_copy(&from, &src, &to, &mut expected);
        let src_before = src.clone();
        let s = from.descriptor(src.as_mut_ptr());
        let d = to.descriptor(dst.as_mut_ptr());
        // SAFETY: checked shapes; every element of both lies inside its buffer.
        unsafe { copy_host_strided(&s, &d) };
        assert_eq!(src, src_before, "the copy wrote into its source");
        assert_eq!(dst, expected, "strided copy differs: {from:?} -> {to:?}");
    }
    // The device side need not fit: the strict backend checks it against its allocation.

    if let Some(shift) = device_shift
        && to.buffer_len > 0
        && (small || !device_inside(&to, shift, to.buffer_len))
    {
        let mut device_expected = pattern(to.buffer_len, 0x40);
        let mut shifted = to.clone();
        shifted.byte_offset = shifted.byte_offset.wrapping_add(shift as u64);
        if small
            && shifted.fits(to.buffer_len)
            && i128::from(shift) + i128::from(to.byte_offset) >= 0
        {
            reference_copy(&from, &src, &shifted, &mut device_expected);
        }
        copy_to_test_device(&mut from, &mut src, &to, shift, &device_expected);
    }
}
