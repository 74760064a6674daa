//! The CUDA backend against fake drivers built from C by the tests (`libcuda_fake.c` of device-kit's `fake`): every path
//! of the backend without a GPU.

mod driver;
mod kernels;
mod memory;
mod registry;

use std::path::PathBuf;
use std::sync::Arc;

use device_cuda::{CudaBackend, CudaDeviceApi};
use device_kit::testing::{FakeDriver, fake_sources};
pub use device_kit::testing::{cpu, f32_tensor};
use tvm_ffi::Device;
use tvm_ffi::abi::kDLCUDA;

use tvm_ffi_capi as _;

/// A fake driver and its kernels library, compiled into a directory of its own.
pub struct Fake {
    /// The fake `libcuda`.
    pub driver: PathBuf,
    /// The directory of this build, for the test's own files.
    pub dir: PathBuf,
    /// The build, for the kit's checks.
    pub build: FakeDriver,
}

/// Builds the fake driver with extra `-D` switches (`FAKE_DEVICE_COUNT=0`, ...).
pub fn build_fake(defines: &[&str]) -> Fake {
    let source = fake_sources().join("libcuda_fake.c");
    let build = FakeDriver::build(
        "device-cuda-tests",
        &source,
        "libcuda_fake.so",
        "fake_cuda_live",
        defines,
    );
    Fake {
        driver: build.library.clone(),
        dir: build.dir.clone(),
        build,
    }
}

impl Fake {
    /// A backend over this fake (not registered).
    pub fn backend(&self) -> Arc<CudaBackend> {
        Arc::new(CudaBackend::with_library(&self.driver))
    }

    /// What the fake driver holds: "allocations", "host", "streams", "events", "modules",
    /// "contexts".
    pub fn live(&self, what: &str) -> i64 {
        self.build.live(what)
    }
}

/// A fake with two devices and its device API.
pub fn fake_api() -> (Fake, Arc<CudaBackend>, CudaDeviceApi) {
    let fake = build_fake(&[]);
    let backend = fake.backend();
    let api = CudaDeviceApi::new(backend.clone());
    (fake, backend, api)
}

/// Device `cuda:id`.
pub fn cuda(id: i32) -> Device {
    Device::new(kDLCUDA, id)
}
