//! The ROCm backend against a fake HIP runtime built from C by the tests (`libhip_fake.c`
//! of device-kit's `fake`): every path of the backend without a GPU.

mod driver;
mod kernels;
mod memory;
mod registry;

use std::sync::Arc;

use device_kit::testing::{FakeDriver, fake_sources};
pub use device_kit::testing::{alloc_floats as alloc, cpu, f32_tensor, transfer};
use device_rocm::{RocmBackend, RocmDeviceApi};
use tvm_ffi::abi::kDLROCM;
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
