//! Memory, copies through HIP (flat, between allocations, strided), streams and the event
//! hand-off.

use device_rocm::RocmHostDeviceApi;
use tvm_ffi::ErrorKind;

use super::*;

#[test]
fn allocations_are_released_and_refusals_name_the_reason() {
    let (fake, _backend, api) = fake_api();
    device_kit::testing::assert_allocations_released(&api, &fake, rocm(1));
    let err = api.alloc(rocm(0), 16, 1024, DataType::uint(8)).unwrap_err();
    assert!(
        err.is_kind(ErrorKind::ValueError)
            && err
                .message()
                .contains("HIP allocations are aligned to 256 bytes")
            && err.message().contains("1024"),
        "{err}"
    );
    let err = api
        .alloc(rocm(0), 3 << 30, 64, DataType::uint(8))
        .unwrap_err();
    assert!(
        err.is_kind(ErrorKind::MemoryError)
            && err
                .message()
                .contains("allocating 3221225472 bytes on rocm:0: hipErrorOutOfMemory (2)"),
        "{err}"
    );
    // SAFETY: not an allocation of HIP; HIP refuses it.
    let err = unsafe { api.free(rocm(0), 0x1234 as *mut _) }.unwrap_err();
    assert!(
        err.message()
            .contains("freeing 0x1234 on rocm:0: hipErrorInvalidValue"),
        "{err}"
    );
}

#[test]
fn pinned_host_memory_is_host_addressable() {
    let (fake, backend, _api) = fake_api();
    let host_api = RocmHostDeviceApi::new(backend);
    let pinned = Device::new(tvm_ffi::abi::kDLROCMHost, 1);
    let ptr = host_api.alloc(pinned, 16, 64, DataType::float(32)).unwrap();
    assert_eq!(fake.live("host"), 1);
    let mut data = [1f32, 2.0, 3.0, 4.0];
    let mut shape = [4i64];
    let from = f32_tensor(data.as_mut_ptr().cast(), cpu(), &mut shape, None);
    let to = f32_tensor(ptr.cast(), pinned, &mut shape, None);
    // SAFETY: both descriptors hold 4 floats.
    unsafe { host_api.copy(&from, &to, StreamHandle::NULL).unwrap() };
    // SAFETY: pinned memory of 4 floats, written above.
    let written = unsafe { std::slice::from_raw_parts(ptr as *const f32, 4) };
    assert_eq!(written, &data);
    // SAFETY: allocated above.
    unsafe { host_api.free(pinned, ptr).unwrap() };
    assert_eq!(fake.live("host"), 0);
}

#[test]
fn copies_queue_on_their_stream_until_it_is_synchronized() {
    let (fake, _backend, api) = fake_api();
    device_kit::testing::assert_copies_wait_for_their_stream(&api, &fake, rocm(1));
}

#[test]
fn a_strided_host_view_is_staged_compact_on_the_device() {
    let (fake, _backend, api) = fake_api();
    let memory = alloc(&api, rocm(1), 6);
    let mut input = [1f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    // The transpose of a 2x3 host matrix, read through strides (1, 2).
    let (mut matrix, mut strides) = ([2i64, 3], [1i64, 2]);
    let transposed = f32_tensor(
        input.as_mut_ptr().cast(),
        cpu(),
        &mut matrix,
        Some(&mut strides),
    );
    let compact = f32_tensor(memory, rocm(1), &mut matrix, None);
    // SAFETY: both views cover 6 floats of their buffers.
    unsafe { api.copy(&transposed, &compact, StreamHandle::NULL).unwrap() };
    let mut back = [0f32; 6];
    transfer(&api, rocm(1), &mut back, memory, false, StreamHandle::NULL);
    assert_eq!(back, [1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);
    // SAFETY: allocated above, released once.
    unsafe { api.free(rocm(1), memory.cast()).unwrap() };
    assert_eq!(fake.live("allocations"), 0);
}

#[test]
fn a_copy_outside_an_allocation_is_a_hip_error() {
    let (_fake, _backend, api) = fake_api();
    device_kit::testing::assert_copies_past_an_allocation_fail(
        &api,
        rocm(0),
        "hipErrorInvalidValue (1)",
    );
}

#[test]
fn the_hand_off_makes_the_consumer_stream_wait_for_the_producer() {
    let (fake, _backend, api) = fake_api();
    device_kit::testing::assert_stream_hand_off(&api, &fake, rocm(0));
}
