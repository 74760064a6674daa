//! Checks of streams every driver-API backend passes over its fake driver: copies wait on their
//! stream, and one stream hands its work to another through an event.

use tvm_ffi::abi::kDLCPU;
use tvm_ffi::{DataType, Device};
use tvm_runtime::device::{DeviceApi, StreamHandle};

use super::{FakeDriver, f32_tensor};
use crate::driver::device_api::GpuDeviceApi;
use crate::driver::runtime::RuntimeSource;

/// The host.
pub fn cpu() -> Device {
    Device::new(kDLCPU, 0)
}

/// `n` floats of memory on `device`.
pub fn alloc_floats(api: &dyn DeviceApi, device: Device, n: usize) -> *mut u8 {
    api.alloc(device, n * 4, 64, DataType::float(32))
        .unwrap()
        .cast()
}

/// Copies `host.len()` floats between the host and `memory` on `device` (to the device when
/// `to_device`) on `stream`, then waits for the stream.
pub fn transfer(
    api: &dyn DeviceApi,
    device: Device,
    host: &mut [f32],
    memory: *mut u8,
    to_device: bool,
    stream: StreamHandle,
) {
    let mut shape = [host.len() as i64];
    let on_host = f32_tensor(host.as_mut_ptr().cast(), cpu(), &mut shape, None);
    let on_device = f32_tensor(memory, device, &mut shape, None);
    let (from, to) = if to_device {
        (&on_host, &on_device)
    } else {
        (&on_device, &on_host)
    };
    // SAFETY: both hold `host.len()` floats; the stream is synchronized before returning.
    unsafe { api.copy(from, to, stream).unwrap() };
    api.sync_stream(device, stream).unwrap();
}

/// Checks that copies host to `device`, between two of its allocations and back stay queued
/// on their stream until it is synchronized, then arrive whole; the stream and memory are
/// released in `fake`.
pub fn assert_copies_wait_for_their_stream<B: RuntimeSource>(
    api: &GpuDeviceApi<B>,
    fake: &FakeDriver,
    device: Device,
) {
    let stream = api.create_stream(device).unwrap();
    let (first, second) = (alloc_floats(api, device, 6), alloc_floats(api, device, 6));
    let mut input = [1f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let mut output = [0f32; 6];
    let mut shape = [6i64];
    let host_in = f32_tensor(input.as_mut_ptr().cast(), cpu(), &mut shape, None);
    let host_out = f32_tensor(output.as_mut_ptr().cast(), cpu(), &mut shape, None);
    let on_first = f32_tensor(first, device, &mut shape, None);
    let on_second = f32_tensor(second, device, &mut shape, None);
    // SAFETY: every descriptor holds 6 floats, alive until the stream is synchronized.
    unsafe {
        api.copy(&host_in, &on_first, stream).unwrap();
        api.copy(&on_first, &on_second, stream).unwrap();
        api.copy(&on_second, &host_out, stream).unwrap();
    }
    assert_eq!(output, [0.0; 6], "nothing ran before the synchronization");
    api.sync_stream(device, stream).unwrap();
    assert_eq!(output, input);
    // SAFETY: created and allocated above, released once.
    unsafe {
        api.free_stream(device, stream).unwrap();
        api.free(device, first.cast()).unwrap();
        api.free(device, second.cast()).unwrap();
    }
    assert_eq!((fake.live("streams"), fake.live("allocations")), (0, 0));
}

/// Checks that `sync_stream_from_to` makes a consumer stream of `device` wait for the copy a
/// producer stream queued (without it the consumer reads first), and that the event of the
/// hand-off is released in `fake`.
pub fn assert_stream_hand_off<B: RuntimeSource>(
    api: &GpuDeviceApi<B>,
    fake: &FakeDriver,
    device: Device,
) {
    let producer = api.create_stream(device).unwrap();
    let consumer = api.create_stream(device).unwrap();
    let memory = alloc_floats(api, device, 3);
    let mut zeros = [0f32; 3];
    transfer(api, device, &mut zeros, memory, true, StreamHandle::NULL);
    let mut input = [7f32, 8.0, 9.0];
    let mut shape = [3i64];
    let host_in = f32_tensor(input.as_mut_ptr().cast(), cpu(), &mut shape, None);
    let on_device = f32_tensor(memory, device, &mut shape, None);
    // SAFETY: both hold 3 floats; `input` outlives the synchronization below.
    unsafe { api.copy(&host_in, &on_device, producer).unwrap() };
    let mut seen = [0f32; 3];
    transfer(api, device, &mut seen, memory, false, consumer);
    assert_eq!(
        seen, [0.0; 3],
        "without the hand-off the consumer runs first"
    );
    api.sync_stream_from_to(device, producer, consumer).unwrap();
    transfer(api, device, &mut seen, memory, false, consumer);
    assert_eq!(seen, input);
    assert_eq!(fake.live("events"), 0, "the hand-off's event is released");
    // SAFETY: created and allocated above, released once.
    unsafe {
        api.free_stream(device, producer).unwrap();
        api.free_stream(device, consumer).unwrap();
        api.free(device, memory.cast()).unwrap();
    }
}

/// Checks that a copy reaching past an allocation on `device`, either way, is the vendor's
/// error (`invalid_value`: "hipErrorInvalidValue (1)") naming the copy.
pub fn assert_copies_past_an_allocation_fail<B: RuntimeSource>(
    api: &GpuDeviceApi<B>,
    device: Device,
    invalid_value: &str,
) {
    let memory = alloc_floats(api, device, 2);
    let mut data = [0f32; 8];
    let mut shape = [8i64];
    let host = f32_tensor(data.as_mut_ptr().cast(), cpu(), &mut shape, None);
    let too_long = f32_tensor(memory, device, &mut shape, None);
    for (from, to, expected) in [
        (
            &host,
            &too_long,
            format!("copying 32 bytes from the host to {device}"),
        ),
        (
            &too_long,
            &host,
            format!("copying 32 bytes from {device} to the host"),
        ),
    ] {
        // SAFETY: the host side holds 8 floats; the vendor checks the device side.
        let err = unsafe { api.copy(from, to, StreamHandle::NULL) }.unwrap_err();
        let expected = format!("{expected}: {invalid_value}");
        assert!(err.message().contains(&expected), "{err}");
    }
    // SAFETY: allocated above.
    unsafe { api.free(device, memory.cast()).unwrap() };
}
