//! The HIP runtime (`libamdhip64.so`), opened at run time: its entry points, its error codes
//! turned into errors that carry HIP's name and text for them, and what is learned once when it
//! loads (versions, device count).

use std::ffi::{CStr, c_char, c_void};

use device_kit::driver::DriverLibrary;
use device_kit::driver::runtime::{RuntimeNames, VendorErrors, describe_code};
use device_kit::driver::shared_calls::{SharedCallNames, SharedCalls};
use device_kit::driver_table;
use tvm_ffi::abi::{kDLROCM, kDLROCMHost};

/// `hipStream_t`.
pub type HipStream = *mut c_void;
/// `hipModule_t`.
pub type HipModule = *mut c_void;
/// `hipFunction_t`.
pub type HipFunction = *mut c_void;

/// `hipSuccess`.
pub const HIP_SUCCESS: i32 = 0;
/// `hipErrorOutOfMemory`.
pub const HIP_ERROR_OUT_OF_MEMORY: i32 = 2;
/// `hipErrorNoDevice`: what `hipGetDeviceCount` says on a machine with HIP and no GPU.
pub const HIP_ERROR_NO_DEVICE: i32 = 100;
/// `hipErrorInvalidDevice`: what `hipInit` says there (ROCm 5.2).
pub const HIP_ERROR_INVALID_DEVICE: i32 = 101;

/// The oldest runtime served: HIP 5.0 (`hipRuntimeGetVersion` form, major * 10^7 + minor *
/// 10^5 + patch), the first to number device attributes as this backend reads them.
pub const MIN_RUNTIME_VERSION: i32 = 50_000_000;

/// `hipMemcpyKind` values.
pub mod copy_kind {
    /// `hipMemcpyHostToDevice`.
    pub const HOST_TO_DEVICE: i32 = 1;
    /// `hipMemcpyDeviceToHost`.
    pub const DEVICE_TO_HOST: i32 = 2;
    /// `hipMemcpyDeviceToDevice`.
    pub const DEVICE_TO_DEVICE: i32 = 3;
}

driver_table! {
    /// The HIP runtime entry points the backend calls.
    pub struct HipFunctions {
        required {
            init: "hipInit" => fn(u32) -> i32;
            driver_get_version: "hipDriverGetVersion" => fn(*mut i32) -> i32;
            runtime_get_version: "hipRuntimeGetVersion" => fn(*mut i32) -> i32;
            get_device_count: "hipGetDeviceCount" => fn(*mut i32) -> i32;
            set_device: "hipSetDevice" => fn(i32) -> i32;
            get_device: "hipGetDevice" => fn(*mut i32) -> i32;
            malloc: "hipMalloc" => fn(*mut *mut c_void, usize) -> i32;
            free: "hipFree" => fn(*mut c_void) -> i32;
            host_malloc: "hipHostMalloc" => fn(*mut *mut c_void, usize, u32) -> i32;
            host_free: "hipHostFree" => fn(*mut c_void) -> i32;
            memcpy_async: "hipMemcpyAsync" =>
                fn(*mut c_void, *const c_void, usize, i32, HipStream) -> i32;
            module_load_data: "hipModuleLoadData" => fn(*mut HipModule, *const c_void) -> i32;
            module_launch_kernel: "hipModuleLaunchKernel" => fn(
                HipFunction, u32, u32, u32, u32, u32, u32, u32, HipStream,
                *mut *mut c_void, *mut *mut c_void
            ) -> i32;
            get_error_name: "hipGetErrorName" => fn(i32) -> *const c_char;
            get_error_string: "hipGetErrorString" => fn(i32) -> *const c_char;
        }
        optional {
            // Cooperative launches (`tirx.use_cooperative_launch`), arguments as an array of
            // their addresses.
            module_launch_cooperative_kernel: "hipModuleLaunchCooperativeKernel" => fn(
                HipFunction, u32, u32, u32, u32, u32, u32, u32, HipStream, *mut *mut c_void
            ) -> i32;
            // The properties struct of ROCm 6 (`hipDeviceProp_tR0600`), absent from ROCm 5.
            get_device_properties_r0600: "hipGetDevicePropertiesR0600" =>
                fn(*mut u8, i32) -> i32;
            // The unversioned symbol, which fills the ROCm 5 layout (`hipDeviceProp_t` R0000).
            get_device_properties: "hipGetDeviceProperties" => fn(*mut u8, i32) -> i32;
        }
    }
}

/// The names the HIP runtime is looked up by, in order.
pub const LIBRARY_CANDIDATES: [&str; 3] =
    ["libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"];
/// The environment variable naming the HIP runtime library to use instead.
pub const LIBRARY_OVERRIDE_VAR: &str = "TVM_ROCM_DRIVER";

/// The names of the runtime and of its devices.
pub const RUNTIME_NAMES: RuntimeNames = RuntimeNames {
    what: "HIP runtime",
    override_var: LIBRARY_OVERRIDE_VAR,
    candidates: &LIBRARY_CANDIDATES,
    device_type: kDLROCM,
    host_device_type: kDLROCMHost,
    name: "rocm",
    host_name: "rocm_host",
};

/// HIP's names of the entry points CUDA and HIP have in one shape.
pub const SHARED_CALL_NAMES: SharedCallNames = SharedCallNames {
    device_get_attribute: "hipDeviceGetAttribute",
    device_get_name: "hipDeviceGetName",
    device_total_mem: "hipDeviceTotalMem",
    mem_get_info: "hipMemGetInfo",
    stream_create_with_flags: "hipStreamCreateWithFlags",
    stream_destroy: "hipStreamDestroy",
    stream_synchronize: "hipStreamSynchronize",
    stream_wait_event: "hipStreamWaitEvent",
    event_create_with_flags: "hipEventCreateWithFlags",
    event_record: "hipEventRecord",
    event_destroy: "hipEventDestroy",
    module_unload: "hipModuleUnload",
    module_get_function: "hipModuleGetFunction",
};

/// "5.2.21153" from 50221153.
pub fn version_text(version: i32) -> String {
    format!(
        "{}.{}.{}",
        version / 10_000_000,
        version / 100_000 % 100,
        version % 100_000
    )
}

/// The loaded HIP runtime.
#[derive(Debug)]
pub struct HipLibrary {
    library: DriverLibrary,
    /// Its entry points.
    pub api: HipFunctions,
    /// The entry points shared with CUDA.
    pub calls: SharedCalls,
    /// `hipRuntimeGetVersion`.
    pub runtime_version: i32,
    /// `hipDriverGetVersion`.
    pub driver_version: i32,
    /// Devices present (0 when HIP sees none).
    pub device_count: i32,
    /// Why HIP sees no device, when it says so.
    pub no_device_reason: Option<String>,
}

impl HipLibrary {
    /// Opens and initializes HIP in `library`: every required entry point present, a runtime
    /// from [`MIN_RUNTIME_VERSION`] on, `hipInit` done and the devices counted. No device is not
    /// an error (the reason is kept).
    pub fn load(library: DriverLibrary) -> Result<HipLibrary, String> {
        let api = HipFunctions::load(&library)?;
        let calls = SharedCalls::load(&library, &SHARED_CALL_NAMES)?;
        let (mut runtime_version, mut driver_version) = (0, 0);
        // SAFETY: out-parameters for ints.
        unsafe {
            (api.runtime_get_version)(&mut runtime_version);
            (api.driver_get_version)(&mut driver_version);
        }
        if runtime_version < MIN_RUNTIME_VERSION {
            return Err(format!(
                "the HIP runtime {} is version {}, older than {}, the oldest this runtime supports",
                library.name(),
                version_text(runtime_version),
                version_text(MIN_RUNTIME_VERSION)
            ));
        }
        let mut hip = HipLibrary {
            library,
            api,
            calls,
            runtime_version,
            driver_version,
            device_count: 0,
            no_device_reason: None,
        };
        // SAFETY: hipInit takes flags, which must be 0.
        let rc = unsafe { (api.init)(0) };
        if rc == HIP_ERROR_NO_DEVICE || rc == HIP_ERROR_INVALID_DEVICE {
            hip.no_device_reason = Some(hip.describe(rc));
            return Ok(hip);
        }
        hip.check(rc, "hipInit")
            .map_err(|e| e.message().to_string())?;
        let mut count = 0;
        // SAFETY: an out-parameter for an int.
        let rc = unsafe { (api.get_device_count)(&mut count) };
        if rc == HIP_ERROR_NO_DEVICE {
            hip.no_device_reason = Some(hip.describe(rc));
            return Ok(hip);
        }
        hip.check(rc, "hipGetDeviceCount")
            .map_err(|e| e.message().to_string())?;
        hip.device_count = count;
        Ok(hip)
    }

    /// The library HIP was loaded from.
    pub fn library_name(&self) -> &str {
        self.library.name()
    }
}

impl VendorErrors for HipLibrary {
    const OUT_OF_MEMORY: i32 = HIP_ERROR_OUT_OF_MEMORY;

    /// "hipErrorX (code): text" for a result code.
    fn describe(&self, rc: i32) -> String {
        let read = |text: *const c_char| {
            (!text.is_null()).then(|| {
                // SAFETY: HIP returns NULL (checked) or a static NUL-terminated string.
                unsafe { CStr::from_ptr(text) }
                    .to_string_lossy()
                    .into_owned()
            })
        };
        // SAFETY: both take any code.
        let (name, text) = unsafe {
            (
                (self.api.get_error_name)(rc),
                (self.api.get_error_string)(rc),
            )
        };
        describe_code(rc, read(name), read(text), "unknown HIP error")
    }
}
