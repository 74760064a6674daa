//! Memory, copies (flat, strided, offset, between devices), streams and the event hand-off.

use device_cuda::CudaHostDeviceApi;
use tvm_ffi::{DataType, ErrorKind};
use tvm_runtime::device::{DeviceApi, StreamHandle};

use super::*;

fn floats(n: usize) -> Vec<f32> {
    (0..n).map(|v| v as f32).collect()
}

/// Allocates `n` floats on `device`.
fn alloc(api: &CudaDeviceApi, device: Device, n: usize) -> *mut u8 {
    api.alloc(device, n * 4, 64, DataType::float(32))
        .unwrap()
        .cast()
}

#[test]
fn allocations_are_freed_and_refusals_name_the_reason() {
    let (fake, _backend, api) = fake_api();
    device_kit::testing::assert_allocations_released(&api, &fake.build, cuda(0));
    let err = api.alloc(cuda(0), 16, 512, DataType::uint(8)).unwrap_err();
    assert!(
        err.is_kind(ErrorKind::ValueError) && err.message().contains("512"),
        "{err}"
    );
    let err = api
        .alloc(cuda(0), 2 << 30, 64, DataType::uint(8))
        .unwrap_err();
    assert!(err.is_kind(ErrorKind::MemoryError), "{err}");
    assert!(
        err.message()
            .contains("CUDA_ERROR_OUT_OF_MEMORY (2): out of memory")
            && err
                .message()
                .contains("allocating 2147483648 bytes on cuda:0"),
        "{err}"
    );
    // SAFETY: not an allocation of the driver.
    let err = unsafe { api.free(cuda(0), 0x1234 as *mut _) }.unwrap_err();
    assert!(err.message().contains("CUDA_ERROR_INVALID_VALUE"), "{err}");
}

#[test]
fn pinned_host_memory_is_host_addressable() {
    let (fake, backend, _api) = fake_api();
    let host_api = CudaHostDeviceApi::new(backend);
    let pinned = Device::new(3, 0);
    let ptr = host_api.alloc(pinned, 16, 64, DataType::float(32)).unwrap();
    assert_eq!(fake.live("host"), 1);
    let mut data = floats(4);
    let mut shape = [4i64];
    let from = f32_tensor(data.as_mut_ptr().cast(), cpu(), &mut shape, None);
    let to = f32_tensor(ptr.cast(), pinned, &mut shape, None);
    // SAFETY: both descriptors hold 4 floats.
    unsafe { host_api.copy(&from, &to, StreamHandle::NULL).unwrap() };
    // SAFETY: pinned memory of 4 floats, written above.
    let written = unsafe { std::slice::from_raw_parts(ptr as *const f32, 4) };
    assert_eq!(written, &data[..]);
    // SAFETY: allocated above.
    unsafe { host_api.free(pinned, ptr).unwrap() };
    assert_eq!(fake.live("host"), 0);
}

#[test]
fn flat_copies_round_trip_and_stay_queued_until_the_stream_is_synchronized() {
    let (fake, _backend, api) = fake_api();
    device_kit::testing::assert_copies_wait_for_their_stream(&api, &fake.build, cuda(0));
}

#[test]
fn strided_and_offset_copies_go_through_host_staging() {
    let (_fake, _backend, api) = fake_api();
    let device = alloc(&api, cuda(1), 12);
    // Fill the device with markers, then write a 2x3 matrix transposed into columns 1.. of a
    // 3x4 device matrix (strides 1, 4 read as shape 3x2 ... ) at a byte offset.
    let mut markers = vec![-1f32; 12];
    let mut flat = [12i64];
    let host_markers = f32_tensor(markers.as_mut_ptr().cast(), cpu(), &mut flat, None);
    let device_flat = f32_tensor(device, cuda(1), &mut flat, None);
    let mut source = floats(6);
    let (mut shape, mut host_strides, mut device_strides) = ([2i64, 3], [1i64, 2], [4i64, 1]);
    let host_view = f32_tensor(
        source.as_mut_ptr().cast(),
        cpu(),
        &mut shape,
        Some(&mut host_strides),
    );
    let mut device_view = f32_tensor(device, cuda(1), &mut shape, Some(&mut device_strides));
    device_view.byte_offset = 4;
    let mut back = vec![0f32; 12];
    let host_back = f32_tensor(back.as_mut_ptr().cast(), cpu(), &mut flat, None);
    // SAFETY: every descriptor's elements lie in its buffer.
    unsafe {
        api.copy(&host_markers, &device_flat, StreamHandle::NULL)
            .unwrap();
        api.copy(&host_view, &device_view, StreamHandle::NULL)
            .unwrap();
        api.copy(&device_flat, &host_back, StreamHandle::NULL)
            .unwrap();
    }
    api.sync_stream(cuda(1), StreamHandle::NULL).unwrap();
    // Row r, column c of the host view is source[r + 2c]; it lands at 1 + 4r + c.
    assert_eq!(
        back,
        [
            -1.0, 0.0, 2.0, 4.0, -1.0, 1.0, 3.0, 5.0, -1.0, -1.0, -1.0, -1.0
        ]
    );
    // And back out of the strided device view into a compact host tensor.
    let mut out = vec![0f32; 6];
    let host_out = f32_tensor(out.as_mut_ptr().cast(), cpu(), &mut shape, None);
    // SAFETY: as above.
    unsafe {
        api.copy(&device_view, &host_out, StreamHandle::NULL)
            .unwrap()
    };
    api.sync_stream(cuda(1), StreamHandle::NULL).unwrap();
    assert_eq!(out, [0.0, 2.0, 4.0, 1.0, 3.0, 5.0]);
    // SAFETY: allocated above.
    unsafe { api.free(cuda(1), device.cast()).unwrap() };
}

#[test]
fn a_copy_outside_an_allocation_is_a_driver_error() {
    let (_fake, _backend, api) = fake_api();
    device_kit::testing::assert_copies_past_an_allocation_fail(
        &api,
        cuda(0),
        "CUDA_ERROR_INVALID_VALUE (1)",
    );
}

#[test]
fn stream_hand_off_makes_the_consumer_wait_for_the_producer() {
    let (fake, _backend, api) = fake_api();
    device_kit::testing::assert_stream_hand_off(&api, &fake.build, cuda(0));
}
