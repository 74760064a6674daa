//! Copies host↔device and device↔device with strides and byte offsets, on host-mapped memory
//! and on the staging path; round trips of every dtype.

use tvm_ffi::{DataType, Tensor};
use tvm_runtime::device::{DeviceApi, StreamHandle, TensorDeviceExt, empty_on};

use crate::common::{Allocation, api, assert_quiet, descriptor, staged_api, vulkan0};

/// Strided and offset copies through `api`, checked element by element.
fn check_strided_copies(api: &dyn DeviceApi) {
    let cpu = tvm_ffi::Device::cpu(0);
    let f32 = DataType::float(32);
    let a = Allocation::new(api, 8 * 4);
    let b = Allocation::new(api, 8 * 4);
    // Host 2x3 row-major matrix read transposed (3x2, strides 1,3) into `a` at byte offset 8.
    let mut host: Vec<f32> = (0..6).map(|v| v as f32).collect();
    let (mut shape, mut strides, mut dshape) = ([3i64, 2], [1i64, 3], [3i64, 2]);
    let from = descriptor(
        host.as_mut_ptr().cast(),
        cpu,
        f32,
        &mut shape,
        Some(&mut strides),
        0,
    );
    let to = descriptor(a.ptr, vulkan0(), f32, &mut dshape, None, 8);
    let copy = |from, to| {
        // SAFETY: the descriptors describe live memory; the stream is synchronized below.
        unsafe { api.copy(from, to, StreamHandle::NULL) }.unwrap();
        api.sync_stream(vulkan0(), StreamHandle::NULL).unwrap();
    };
    copy(&from, &to);
    // Back to the host, the whole buffer `a` as 8 floats (the first two never written: 0).
    let mut whole = [8i64];
    let mut back = vec![-1f32; 8];
    let a_all = descriptor(a.ptr, vulkan0(), f32, &mut whole, None, 0);
    let mut hshape = [8i64];
    let host_back = descriptor(back.as_mut_ptr().cast(), cpu, f32, &mut hshape, None, 0);
    // The fresh allocation's first two floats are whatever the driver gave; set them.
    let mut zeros = [0f32; 2];
    let mut zshape = [2i64];
    let zero_src = descriptor(zeros.as_mut_ptr().cast(), cpu, f32, &mut zshape, None, 0);
    let mut z2 = [2i64];
    let zero_dst = descriptor(a.ptr, vulkan0(), f32, &mut z2, None, 0);
    copy(&zero_src, &zero_dst);
    copy(&a_all, &host_back);
    assert_eq!(back, [0.0, 0.0, 0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    // Device to device: `a` (offset 8) read transposed again into `b`, which gives the original.
    let (mut s3, mut st3, mut d3) = ([2i64, 3], [1i64, 2], [2i64, 3]);
    let a_t = descriptor(a.ptr, vulkan0(), f32, &mut s3, Some(&mut st3), 8);
    let b_c = descriptor(b.ptr, vulkan0(), f32, &mut d3, None, 0);
    copy(&a_t, &b_c);
    // Compact device-to-device (a queued buffer copy): `b`'s six floats into `a` at offset 8.
    let (mut s6, mut d6) = ([6i64], [6i64]);
    let b6 = descriptor(b.ptr, vulkan0(), f32, &mut s6, None, 0);
    let a6 = descriptor(a.ptr, vulkan0(), f32, &mut d6, None, 8);
    copy(&b6, &a6);
    copy(&a_all, &host_back);
    assert_eq!(back, [0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    // Reading past the end of `b` is refused, naming the range.
    let mut past = [8i64];
    let b_past = descriptor(b.ptr, vulkan0(), f32, &mut past, None, 4);
    // SAFETY: the descriptors describe memory of the right devices; the copy is refused.
    let err = unsafe { api.copy(&b_past, &host_back, StreamHandle::NULL) }.unwrap_err();
    assert!(err.message().contains("4..36"), "{err}");
}

#[test]
fn strided_copies_on_host_mapped_memory() {
    let Some(api) = api() else { return };
    let probe = crate::common::Allocation::new(api.as_ref(), 4);
    assert!(
        api.is_host_mapped(probe.ptr).unwrap(),
        "lavapipe memory is host-visible"
    );
    check_strided_copies(api.as_ref());
    assert_quiet(&api);
}

#[test]
fn strided_copies_through_staging_buffers() {
    let Some(api) = staged_api() else { return };
    let probe = crate::common::Allocation::new(api, 4);
    assert!(!api.is_host_mapped(probe.ptr).unwrap());
    check_strided_copies(api);
    assert_quiet(api);
}

macro_rules! round_trip {
    ($($t:ty),*) => {$({
        let values: Vec<$t> = (0..37).map(|i| (i * 3 % 11) as $t).collect();
        let tensor = empty_on(&[37], DataType(<$t as tvm_ffi::tensor::Element>::DTYPE), vulkan0())
            .unwrap();
        tensor.copy_from_slice(&values).unwrap();
        let back = tensor.copy_to(vulkan0()).unwrap().to_vec::<$t>().unwrap();
        assert_eq!(back, values, "{}", stringify!($t));
    })*};
}

#[test]
fn every_dtype_round_trips_through_the_device() {
    let Some(api) = api() else { return };
    round_trip!(i8, u8, i16, u16, i32, u32, i64, u64, f32, f64);
    let host = Tensor::from_slice(&[1.5f32, -2.0, 3.25, 0.0], &[2, 2]).unwrap();
    let on_device = host.copy_to(vulkan0()).unwrap();
    assert_eq!(on_device.device(), vulkan0());
    assert_eq!(on_device.to_vec::<f32>().unwrap(), [1.5, -2.0, 3.25, 0.0]);
    let empty = empty_on(&[0, 3], DataType::float(32), vulkan0()).unwrap();
    assert!(empty.to_vec::<f32>().unwrap().is_empty());
    assert_quiet(&api);
}
