//! The CUDA driver (`libcuda.so.1`), opened at run time: its entry points, its error codes
//! turned into errors that carry the driver's name and text for them, and what is learned once
//! when it loads (version, device count).

use std::ffi::{CStr, c_char, c_void};

use device_kit::driver::DriverLibrary;
use device_kit::driver::runtime::{RuntimeNames, VendorErrors, describe_code};
use device_kit::driver::shared_calls::{SharedCallNames, SharedCalls};
use device_kit::driver_table;
use tvm_ffi::abi::{kDLCUDA, kDLCUDAHost};

/// `CUcontext`.
pub type CuContext = *mut c_void;
/// `CUstream`.
pub type CuStream = *mut c_void;
/// `CUmodule`.
pub type CuModule = *mut c_void;
/// `CUfunction`.
pub type CuFunction = *mut c_void;
/// `CUdeviceptr`.
pub type CuDevicePtr = u64;

/// `CUDA_SUCCESS`.
pub const CUDA_SUCCESS: i32 = 0;
/// `CUDA_ERROR_OUT_OF_MEMORY`.
pub const CUDA_ERROR_OUT_OF_MEMORY: i32 = 2;
/// `CUDA_ERROR_NO_DEVICE`: what `cuInit` says on a machine with a driver and no GPU.
pub const CUDA_ERROR_NO_DEVICE: i32 = 100;

/// The oldest driver served: CUDA 11.0 (`cuDriverGetVersion` form, 1000 * major + 10 * minor).
pub const MIN_DRIVER_VERSION: i32 = 11000;

/// `CUlaunchAttribute`: an id and a 64-byte value.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug)]
pub struct LaunchAttribute {
    /// `CUlaunchAttributeID`.
    pub id: i32,
    /// Padding up to the value.
    pub pad: [u8; 4],
    /// `CUlaunchAttributeValue`, of which the backend uses an int or three unsigned ints.
    pub value: [u32; 16],
}

/// `CUlaunchConfig` of `cuLaunchKernelEx`.
#[repr(C)]
#[derive(Debug)]
pub struct LaunchConfigEx {
    /// Blocks per grid.
    pub grid: [u32; 3],
    /// Threads per block.
    pub block: [u32; 3],
    /// Bytes of dynamic shared memory.
    pub shared_mem_bytes: u32,
    /// The stream.
    pub stream: CuStream,
    /// The attributes.
    pub attrs: *mut LaunchAttribute,
    /// How many attributes.
    pub num_attrs: u32,
}

driver_table! {
    /// The driver API entry points the backend calls (the versioned names the header maps to).
    pub struct CudaFunctions {
        required {
            init: "cuInit" => fn(u32) -> i32;
            driver_get_version: "cuDriverGetVersion" => fn(*mut i32) -> i32;
            device_get_count: "cuDeviceGetCount" => fn(*mut i32) -> i32;
            primary_ctx_retain: "cuDevicePrimaryCtxRetain" => fn(*mut CuContext, i32) -> i32;
            primary_ctx_release: "cuDevicePrimaryCtxRelease_v2" => fn(i32) -> i32;
            ctx_set_current: "cuCtxSetCurrent" => fn(CuContext) -> i32;
            ctx_get_current: "cuCtxGetCurrent" => fn(*mut CuContext) -> i32;
            mem_alloc: "cuMemAlloc_v2" => fn(*mut CuDevicePtr, usize) -> i32;
            mem_free: "cuMemFree_v2" => fn(CuDevicePtr) -> i32;
            mem_alloc_host: "cuMemAllocHost_v2" => fn(*mut *mut c_void, usize) -> i32;
            mem_free_host: "cuMemFreeHost" => fn(*mut c_void) -> i32;
            memcpy_htod_async: "cuMemcpyHtoDAsync_v2" =>
                fn(CuDevicePtr, *const c_void, usize, CuStream) -> i32;
            memcpy_dtoh_async: "cuMemcpyDtoHAsync_v2" =>
                fn(*mut c_void, CuDevicePtr, usize, CuStream) -> i32;
            memcpy_dtod_async: "cuMemcpyDtoDAsync_v2" =>
                fn(CuDevicePtr, CuDevicePtr, usize, CuStream) -> i32;
            module_load_data_ex: "cuModuleLoadDataEx" =>
                fn(*mut CuModule, *const c_void, u32, *mut i32, *mut *mut c_void) -> i32;
            launch_kernel: "cuLaunchKernel" => fn(
                CuFunction, u32, u32, u32, u32, u32, u32, u32, CuStream,
                *mut *mut c_void, *mut *mut c_void
            ) -> i32;
            get_error_name: "cuGetErrorName" => fn(i32, *mut *const c_char) -> i32;
            get_error_string: "cuGetErrorString" => fn(i32, *mut *const c_char) -> i32;
        }
        optional {
            launch_cooperative_kernel: "cuLaunchCooperativeKernel" => fn(
                CuFunction, u32, u32, u32, u32, u32, u32, u32, CuStream, *mut *mut c_void
            ) -> i32;
            launch_kernel_ex: "cuLaunchKernelEx" => fn(
                *const LaunchConfigEx, CuFunction, *mut *mut c_void, *mut *mut c_void
            ) -> i32;
            func_set_attribute: "cuFuncSetAttribute" => fn(CuFunction, i32, i32) -> i32;
        }
    }
}

/// The names the driver is looked up by, in order.
pub const DRIVER_CANDIDATES: [&str; 2] = ["libcuda.so.1", "libcuda.so"];
/// The environment variable naming the driver library to use instead.
pub const DRIVER_OVERRIDE_VAR: &str = "TVM_CUDA_DRIVER";

/// The names of the driver and of its devices.
pub const RUNTIME_NAMES: RuntimeNames = RuntimeNames {
    what: "CUDA driver",
    override_var: DRIVER_OVERRIDE_VAR,
    candidates: &DRIVER_CANDIDATES,
    device_type: kDLCUDA,
    host_device_type: kDLCUDAHost,
    name: "cuda",
    host_name: "cuda_host",
};

/// The driver's names of the entry points CUDA and HIP have in one shape.
pub const SHARED_CALL_NAMES: SharedCallNames = SharedCallNames {
    device_get_attribute: "cuDeviceGetAttribute",
    device_get_name: "cuDeviceGetName",
    device_total_mem: "cuDeviceTotalMem_v2",
    mem_get_info: "cuMemGetInfo_v2",
    stream_create_with_flags: "cuStreamCreate",
    stream_destroy: "cuStreamDestroy_v2",
    stream_synchronize: "cuStreamSynchronize",
    stream_wait_event: "cuStreamWaitEvent",
    event_create_with_flags: "cuEventCreate",
    event_record: "cuEventRecord",
    event_destroy: "cuEventDestroy_v2",
    module_unload: "cuModuleUnload",
    module_get_function: "cuModuleGetFunction",
};

/// The loaded driver.
#[derive(Debug)]
pub struct CudaDriver {
    library: DriverLibrary,
    /// Its entry points.
    pub api: CudaFunctions,
    /// The entry points shared with HIP.
    pub calls: SharedCalls,
    /// `cuDriverGetVersion`.
    pub version: i32,
    /// Devices the driver sees (0 when `cuInit` found none).
    pub device_count: i32,
    /// Why there are no devices, when `cuInit` said so.
    pub no_device_reason: Option<String>,
}

/// "12.8" from 12080.
pub fn version_text(version: i32) -> String {
    format!("{}.{}", version / 1000, version % 1000 / 10)
}

impl CudaDriver {
    /// Opens and initializes the driver in `library`: every required entry point present, a
    /// version from [`MIN_DRIVER_VERSION`] on, `cuInit` done.
    pub fn load(library: DriverLibrary) -> Result<CudaDriver, String> {
        let api = CudaFunctions::load(&library)?;
        let calls = SharedCalls::load(&library, &SHARED_CALL_NAMES)?;
        let mut version = 0;
        // SAFETY: an out-parameter for an int.
        unsafe { (api.driver_get_version)(&mut version) };
        if version < MIN_DRIVER_VERSION {
            return Err(format!(
                "the CUDA driver {} is version {}, older than {}, the oldest this runtime supports",
                library.name(),
                version_text(version),
                version_text(MIN_DRIVER_VERSION)
            ));
        }
        let mut driver = CudaDriver {
            library,
            api,
            calls,
            version,
            device_count: 0,
            no_device_reason: None,
        };
        // SAFETY: cuInit takes flags, which must be 0.
        let rc = unsafe { (api.init)(0) };
        if rc == CUDA_ERROR_NO_DEVICE {
            driver.no_device_reason = Some(driver.describe(rc));
            return Ok(driver);
        }
        driver
            .check(rc, "cuInit")
            .map_err(|e| e.message().to_string())?;
        let mut count = 0;
        // SAFETY: an out-parameter for an int.
        let rc = unsafe { (api.device_get_count)(&mut count) };
        driver
            .check(rc, "cuDeviceGetCount")
            .map_err(|e| e.message().to_string())?;
        driver.device_count = count;
        Ok(driver)
    }

    /// The library the driver was loaded from.
    pub fn library_name(&self) -> &str {
        self.library.name()
    }

    fn error_text(&self, rc: i32, name: bool) -> Option<String> {
        let mut text: *const c_char = std::ptr::null();
        let describe = if name {
            self.api.get_error_name
        } else {
            self.api.get_error_string
        };
        // SAFETY: an out-parameter for a static string of the driver.
        let ok = unsafe { describe(rc, &mut text) } == CUDA_SUCCESS;
        (ok && !text.is_null()).then(|| {
            // SAFETY: on success the driver returns a NUL-terminated static string.
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned()
        })
    }
}

impl VendorErrors for CudaDriver {
    const OUT_OF_MEMORY: i32 = CUDA_ERROR_OUT_OF_MEMORY;

    /// "CUDA_ERROR_X (code): text" for a result code.
    fn describe(&self, rc: i32) -> String {
        let (name, text) = (self.error_text(rc, true), self.error_text(rc, false));
        describe_code(rc, name, text, "unknown CUDA error")
    }
}
