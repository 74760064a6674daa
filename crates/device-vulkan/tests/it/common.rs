//! Set-up shared by the tests: the registered backend, a second one forced onto the staging
//! path, shaders compiled from `tests/shaders/*.comp` at test time, and raw descriptors.

use std::ffi::c_void;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use device_kit::buffer::BufferBackend;
use device_vulkan::{VulkanBackend, VulkanDeviceApi, VulkanOptions};
use tvm_ffi::abi::{DLDataType, DLDevice, DLTensor};
use tvm_ffi::{DataType, Device};
use tvm_runtime::device::DeviceApi;

/// Options of the tests' backends: validation on in debug builds.
fn options(force_staging: bool) -> VulkanOptions {
    VulkanOptions {
        validation: cfg!(debug_assertions),
        force_staging,
        loader: None,
    }
}

/// Whether a Vulkan device is present; prints the reason to skip when not.
fn usable(api: &VulkanDeviceApi) -> bool {
    match api.device_names() {
        Ok(names) if !names.is_empty() => true,
        Ok(_) => {
            eprintln!("skipped: the Vulkan driver lists no device");
            false
        }
        Err(e) => {
            eprintln!("skipped: {e}");
            false
        }
    }
}

/// The backend registered for `kDLVulkan` (with the module loaders), if a device is present.
pub fn api() -> Option<Arc<VulkanDeviceApi>> {
    static API: OnceLock<Arc<VulkanDeviceApi>> = OnceLock::new();
    let api = API.get_or_init(|| {
        tvm_runtime::init();
        let backend = Arc::new(VulkanBackend::new(options(false)));
        let registered = device_vulkan::register_backend(backend).expect("registered once");
        Arc::new(VulkanDeviceApi::new(registered))
    });
    usable(api).then(|| Arc::clone(api))
}

/// A backend of its own that treats memory as not host-visible, if a device is present.
pub fn staged_api() -> Option<&'static VulkanDeviceApi> {
    static API: OnceLock<VulkanDeviceApi> = OnceLock::new();
    let api = API.get_or_init(|| VulkanDeviceApi::new(Arc::new(VulkanBackend::new(options(true)))));
    usable(api).then_some(api)
}

/// Fails if the validation layer reported anything to `api`.
pub fn assert_quiet(api: &VulkanDeviceApi) {
    let messages = api.validation_messages();
    assert!(messages.is_empty(), "validation messages: {messages:#?}");
}

/// Device 0.
pub fn vulkan0() -> Device {
    Device::vulkan(0)
}

/// A scratch directory of this test process.
pub fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tvm-vulkan-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// Compiles `tests/shaders/<name>.comp` with `glslangValidator` (entry point `name`) into a
/// `.spv` file; `None` (printing why) when the compiler is not installed.
pub fn compile_shader(name: &str) -> Option<PathBuf> {
    let source =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/shaders/{name}.comp"));
    // A directory per compilation: tests run in parallel, and one must never read a shader
    // another is still writing.
    static COMPILATIONS: AtomicUsize = AtomicUsize::new(0);
    let dir = scratch_dir().join(COMPILATIONS.fetch_add(1, Ordering::Relaxed).to_string());
    std::fs::create_dir_all(&dir).expect("a shader directory");
    let out = dir.join(format!("{name}.spv"));
    let result = Command::new("glslangValidator")
        .args([
            "-V",
            "--target-env",
            "vulkan1.1",
            "-e",
            name,
            "--source-entrypoint",
            "main",
            "-o",
        ])
        .arg(&out)
        .arg(&source)
        .output();
    match result {
        Ok(o) if o.status.success() => Some(out),
        Ok(o) => panic!(
            "glslangValidator failed on {name}: {}",
            String::from_utf8_lossy(&o.stdout)
        ),
        Err(e) => {
            eprintln!("skipped: glslangValidator is not installed ({e}; Debian: glslang-tools)");
            None
        }
    }
}

/// The words of a compiled shader.
pub fn shader_words(name: &str) -> Option<Vec<u32>> {
    let bytes = std::fs::read(compile_shader(name)?).expect("compiled shader");
    Some(
        bytes
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect(),
    )
}

/// A descriptor of `data` with borrowed `shape` and `strides`.
pub fn descriptor(
    data: *mut c_void,
    device: Device,
    dtype: DataType,
    shape: &mut [i64],
    strides: Option<&mut [i64]>,
    byte_offset: u64,
) -> DLTensor {
    DLTensor {
        data,
        device: DLDevice {
            device_type: device.device_type(),
            device_id: device.device_id(),
        },
        ndim: shape.len() as i32,
        dtype: DLDataType::from(dtype),
        shape: shape.as_mut_ptr(),
        strides: strides.map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
        byte_offset,
    }
}

/// Memory of `api` on device 0, freed on drop.
pub struct Allocation<'a> {
    pub api: &'a dyn DeviceApi,
    pub ptr: *mut c_void,
}

impl<'a> Allocation<'a> {
    pub fn new(api: &'a dyn DeviceApi, nbytes: usize) -> Allocation<'a> {
        let ptr = api
            .alloc(vulkan0(), nbytes, 64, DataType::uint(8))
            .expect("allocation");
        Allocation { api, ptr }
    }
}

impl Drop for Allocation<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated by `api` on device 0 in `new`, freed once.
        unsafe { self.api.free(vulkan0(), self.ptr) }.expect("free");
    }
}
