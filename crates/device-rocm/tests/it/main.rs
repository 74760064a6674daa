//! The ROCm backend against a fake HIP runtime built from C by the tests (`libhip_fake.c`
//! of device-kit's `fake`): every path of the backend without a GPU.

mod driver;
mod kernels;
mod memory;
mod registry;

use std::sync::Arc;

pub use device_kit::testing::f32_tensor;
use device_kit::testing::{FakeDriver, fake_sources};
use device_rocm::{RocmBackend, RocmDeviceApi};
use tvm_ffi::abi::{kDLCPU, kDLROCM};
use tvm_ffi::{DataType, Device};
use tvm_runtime::device::{DeviceApi, StreamHandle};

use tvm_ffi_capi as _;

/// Builds the fake HIP runtime with extra `-D` switches (`FAKE_DEVICE_COUNT=0`, ...).
pub fn build_fake(defines: &[&str]) -> FakeDriver {
    let source = fake_sources().join("libhip_fake.c");
    FakeDriver::build(
        "device-rocm-tests",
        &source,
        "libamdhip64_fake.so",
        "fake_hip_live",
        defines,
    )
}

/// A backend over `fake` (not registered).
pub fn backend(fake: &FakeDriver) -> Arc<RocmBackend> {
    Arc::new(RocmBackend::with_library(&fake.library))
}

/// A fake with two devices, its backend and its device API.
pub fn fake_api() -> (FakeDriver, Arc<RocmBackend>, RocmDeviceApi) {
    let fake = build_fake(&[]);
    let backend = backend(&fake);
    let api = RocmDeviceApi::new(backend.clone());
    (fake, backend, api)
}

/// Device `rocm:id`.
pub fn rocm(id: i32) -> Device {
    Device::new(kDLROCM, id)
}

/// The host.
pub fn cpu() -> Device {
    Device::new(kDLCPU, 0)
}

/// `n` floats of memory on `device`.
pub fn alloc(api: &RocmDeviceApi, device: Device, n: usize) -> *mut u8 {
    api.alloc(device, n * 4, 64, DataType::float(32))
        .unwrap()
        .cast()
}

/// Copies `host.len()` floats between the host and `device` memory on `stream`, then waits.
pub fn transfer(
    api: &RocmDeviceApi,
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
