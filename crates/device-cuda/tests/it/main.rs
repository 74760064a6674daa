//! The CUDA backend against fake drivers built from C by the tests (`tests/fake`): every path
//! of the backend without a GPU.

mod driver;
mod kernels;
mod memory;
mod registry;

use std::ffi::{CString, c_char};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use device_common::DriverLibrary;
use device_cuda::{CudaBackend, CudaDeviceApi};
use tvm_ffi::Device;
use tvm_ffi::abi::{DLDataType, DLDevice, DLTensor, kDLCPU, kDLCUDA, kDLFloat};

use tvm_ffi_capi as _;

/// A fake driver and its kernels library, compiled into a directory of their own (tests run in
/// parallel: a shared output path would let one test load a file another is still writing).
pub struct Fake {
    /// The fake `libcuda`.
    pub driver: PathBuf,
    /// The directory of this build, for the test's own files.
    pub dir: PathBuf,
}

fn compile(source: &str, out: &Path, defines: &[String]) {
    let target = env!("DEVICE_CUDA_BUILD_TARGET");
    let compiler = cc::Build::new()
        .target(target)
        .host(target)
        .opt_level(1)
        .cargo_metadata(false)
        .get_compiler();
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fake")
        .join(source);
    let status = compiler
        .to_command()
        .args(["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(out)
        .args(defines)
        .arg(&source)
        .args(["-ldl", "-lpthread"])
        .status()
        .expect("the C compiler runs");
    assert!(status.success(), "compiling {} failed", source.display());
}

/// Builds the fake driver with extra `-D` switches (`FAKE_DEVICE_COUNT=0`, ...).
pub fn build_fake(defines: &[&str]) -> Fake {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir()
        .join(format!("device-cuda-tests-{}", std::process::id()))
        .join(NEXT.fetch_add(1, Ordering::Relaxed).to_string());
    std::fs::create_dir_all(&dir).unwrap();
    let kernels = dir.join("libfake_kernels.so");
    compile("kernels.c", &kernels, &[]);
    let mut flags: Vec<String> = defines.iter().map(|d| format!("-D{d}")).collect();
    flags.push(format!("-DFAKE_KERNELS_LIBRARY=\"{}\"", kernels.display()));
    let driver = dir.join("libcuda_fake.so");
    compile("libcuda_fake.c", &driver, &flags);
    Fake { driver, dir }
}

impl Fake {
    /// A backend over this fake (not registered).
    pub fn backend(&self) -> Arc<CudaBackend> {
        Arc::new(CudaBackend::with_library(&self.driver))
    }

    /// What the fake driver holds: "allocations", "host", "streams", "events", "modules",
    /// "contexts".
    pub fn live(&self, what: &str) -> i64 {
        let library = DriverLibrary::open(self.driver.to_str().unwrap()).unwrap();
        // SAFETY: the fake's `long fake_cuda_live(const char *)`.
        let live: unsafe extern "C" fn(*const c_char) -> i64 =
            unsafe { library.function("fake_cuda_live").unwrap() };
        let what = CString::new(what).unwrap();
        // SAFETY: a NUL-terminated name.
        unsafe { live(what.as_ptr()) }
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

/// A float32 descriptor of `data` on `device` (host data when the device is the CPU).
pub fn f32_tensor(
    data: *mut u8,
    device: Device,
    shape: &mut [i64],
    strides: Option<&mut [i64]>,
) -> DLTensor {
    DLTensor {
        data: data.cast(),
        device: DLDevice {
            device_type: device.device_type(),
            device_id: device.device_id(),
        },
        ndim: shape.len() as i32,
        dtype: DLDataType {
            code: kDLFloat,
            bits: 32,
            lanes: 1,
        },
        shape: shape.as_mut_ptr(),
        strides: strides.map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
        byte_offset: 0,
    }
}

/// The host.
pub fn cpu() -> Device {
    Device::new(kDLCPU, 0)
}
