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
    let stream = api.create_stream(rocm(1)).unwrap();
    let (first, second) = (alloc(&api, rocm(1), 6), alloc(&api, rocm(1), 6));
    let mut input = [1f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let mut output = [0f32; 6];
    let mut shape = [6i64];
    let host_in = f32_tensor(input.as_mut_ptr().cast(), cpu(), &mut shape, None);
    let host_out = f32_tensor(output.as_mut_ptr().cast(), cpu(), &mut shape, None);
    let on_first = f32_tensor(first, rocm(1), &mut shape, None);
    let on_second = f32_tensor(second, rocm(1), &mut shape, None);
    // SAFETY: every descriptor holds 6 floats, alive until the stream is synchronized.
    unsafe {
        api.copy(&host_in, &on_first, stream).unwrap();
        api.copy(&on_first, &on_second, stream).unwrap();
        api.copy(&on_second, &host_out, stream).unwrap();
    }
    assert_eq!(output, [0.0; 6], "nothing ran before the synchronization");
    api.sync_stream(rocm(1), stream).unwrap();
    assert_eq!(output, input);
    // A strided host view is staged: its transpose lands compact on the device.
    let (mut matrix, mut strides) = ([2i64, 3], [1i64, 2]);
    let transposed = f32_tensor(
        input.as_mut_ptr().cast(),
        cpu(),
        &mut matrix,
        Some(&mut strides),
    );
    let compact = f32_tensor(first, rocm(1), &mut matrix, None);
    // SAFETY: both views cover 6 floats of their buffers.
    unsafe { api.copy(&transposed, &compact, StreamHandle::NULL).unwrap() };
    let mut back = [0f32; 6];
    transfer(&api, rocm(1), &mut back, first, false, StreamHandle::NULL);
    assert_eq!(back, [1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);
    // SAFETY: created and allocated above, released once.
    unsafe {
        api.free_stream(rocm(1), stream).unwrap();
        api.free(rocm(1), first.cast()).unwrap();
        api.free(rocm(1), second.cast()).unwrap();
    }
    assert_eq!((fake.live("streams"), fake.live("allocations")), (0, 0));
}

#[test]
fn a_copy_outside_an_allocation_is_a_hip_error() {
    let (_fake, _backend, api) = fake_api();
    let device = alloc(&api, rocm(0), 2);
    let mut data = [0f32; 8];
    let mut shape = [8i64];
    let host = f32_tensor(data.as_mut_ptr().cast(), cpu(), &mut shape, None);
    let too_long = f32_tensor(device, rocm(0), &mut shape, None);
    // SAFETY: the host side holds 8 floats; HIP checks the device side.
    let err = unsafe { api.copy(&too_long, &host, StreamHandle::NULL) }.unwrap_err();
    assert!(
        err.message()
            .contains("copying 32 bytes from rocm:0 to the host: hipErrorInvalidValue (1)"),
        "{err}"
    );
    // SAFETY: allocated above.
    unsafe { api.free(rocm(0), device.cast()).unwrap() };
}

#[test]
fn the_hand_off_makes_the_consumer_stream_wait_for_the_producer() {
    let (fake, _backend, api) = fake_api();
    let producer = api.create_stream(rocm(0)).unwrap();
    let consumer = api.create_stream(rocm(0)).unwrap();
    let device = alloc(&api, rocm(0), 3);
    let mut zeros = [0f32; 3];
    transfer(&api, rocm(0), &mut zeros, device, true, StreamHandle::NULL);
    let mut input = [7f32, 8.0, 9.0];
    let mut shape = [3i64];
    let host_in = f32_tensor(input.as_mut_ptr().cast(), cpu(), &mut shape, None);
    let on_device = f32_tensor(device, rocm(0), &mut shape, None);
    // SAFETY: both hold 3 floats; `input` outlives the synchronization below.
    unsafe { api.copy(&host_in, &on_device, producer).unwrap() };
    let mut seen = [0f32; 3];
    transfer(&api, rocm(0), &mut seen, device, false, consumer);
    assert_eq!(
        seen, [0.0; 3],
        "without the hand-off the consumer runs first"
    );
    api.sync_stream_from_to(rocm(0), producer, consumer)
        .unwrap();
    transfer(&api, rocm(0), &mut seen, device, false, consumer);
    assert_eq!(seen, input);
    assert_eq!(fake.live("events"), 0, "the hand-off's event is released");
    // SAFETY: created and allocated above, released once.
    unsafe {
        api.free_stream(rocm(0), producer).unwrap();
        api.free_stream(rocm(0), consumer).unwrap();
        api.free(rocm(0), device.cast()).unwrap();
    }
}
