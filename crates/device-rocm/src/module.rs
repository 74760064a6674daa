//! Modules of HSACO code objects, loaded with `hipModuleLoadData` on each device at the first
//! launch there, and launches with `hipModuleLaunchKernel`: the arguments as one blob in C
//! struct layout, handed over in `extra` (`HIP_LAUNCH_PARAM_BUFFER_POINTER`/`_SIZE`/`_END`);
//! cooperative launches with `hipModuleLaunchCooperativeKernel`, which takes the arguments as
//! an array of their addresses only.
//!
//! The module kind is `hip`, as TVM's ROCm modules are saved; their serialized form loads
//! through `ffi.Module.load_from_bytes.hip` and the aliases `.hsaco` and `.rocm`.

use std::ffi::c_void;
use std::sync::Arc;

use device_kit::driver::args::KernelCall;
use device_kit::driver::launch::{launch_cooperative, launch_kernel};
use device_kit::driver::module::{KernelBackend, register_bytes_loader, register_loaders};
use device_kit::driver::runtime::{GpuRuntime, RuntimeSource, VendorErrors};
use device_kit::driver::shared_calls::{Kernel, LoadedCode};
use device_kit::kernel::LaunchDims;
use tvm_ffi::{Device, Error, ErrorKind, Result};
use tvm_runtime::device::current_stream;

use crate::hip::{HIP_SUCCESS, HipModule};
use crate::runtime::{HipRuntime, RocmBackend};

/// The code format a module holds, which is also the extension of its files.
pub const CODE_FORMAT: &str = "hsaco";
/// The module kind.
pub const MODULE_KIND: &str = "hip";

/// `HIP_LAUNCH_PARAM_BUFFER_POINTER`, `HIP_LAUNCH_PARAM_BUFFER_SIZE` and
/// `HIP_LAUNCH_PARAM_END` (3, not 0 as in CUDA).
const LAUNCH_PARAM_BUFFER_POINTER: usize = 1;
const LAUNCH_PARAM_BUFFER_SIZE: usize = 2;
const LAUNCH_PARAM_END: usize = 3;

/// The launch tags HIP cannot honour, named for the error.
fn unsupported_launch(dims: &LaunchDims) -> Option<&'static str> {
    if dims.cluster != [1; 3] || dims.preferred_cluster != [1; 3] {
        Some("thread block clusters (clusterCtaIdx / preferredClusterCtaIdx)")
    } else if dims.programmatic_dependent_launch {
        Some("programmatic dependent launch (tirx.use_programtic_dependent_launch)")
    } else {
        None
    }
}

impl KernelBackend for RocmBackend {
    fn kind(&self) -> &'static str {
        MODULE_KIND
    }

    fn prepare(&self, format: &str, code: Vec<u8>) -> Result<(String, Vec<u8>)> {
        if format != CODE_FORMAT {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "a hip module holds an HSACO code object (format \"hsaco\"), not {format:?}"
            );
        }
        Ok((format.to_owned(), code))
    }

    fn load(&self, device: Device, format: &str, code: &[u8]) -> Result<LoadedCode> {
        let runtime = self.runtime()?;
        runtime.bind(device)?;
        let mut module: HipModule = std::ptr::null_mut();
        // SAFETY: the image is the whole code object, alive across the call.
        let rc = unsafe { (runtime.hip.api.module_load_data)(&mut module, code.as_ptr().cast()) };
        let what = format!("loading the {format} module on {device}");
        runtime.hip.check(rc, &what)?;
        Ok(LoadedCode(module as usize))
    }

    #[inline]
    fn launch(&self, device: Device, kernel: Kernel, call: &mut KernelCall<'_>) -> Result<()> {
        if let Some(what) = unsupported_launch(&call.dims) {
            return Err(Error::new(
                ErrorKind::ValueError,
                format!(
                    "kernel `{}` asks for {what}, which the ROCm backend does not support",
                    call.kernel()
                ),
            ));
        }
        self.runtime()?.launch(device, kernel, call)
    }
}

impl HipRuntime {
    /// Launches `kernel` on `device`, which is current (as [`HipRuntime::launch_device`]
    /// leaves it), with the arguments and dimensions of `call`, on the calling thread's current
    /// stream of `device`: `hipModuleLaunchKernel` with the arguments as one aligned blob, or
    /// `hipModuleLaunchCooperativeKernel` with an array of their addresses for the cooperative
    /// tag.
    pub fn launch(&self, device: Device, kernel: Kernel, call: &mut KernelCall<'_>) -> Result<()> {
        let api = &self.hip.api;
        let function = kernel.handle();
        let dims = call.dims;
        let stream = current_stream(device);
        // In both launches: a kernel of code loaded on this device, which is current; the
        // arguments (blob and size, or addresses and values) are alive across the call (HIP
        // copies them at launch); the stream belongs to this device.
        let rc = if dims.cooperative {
            let launch = api.module_launch_cooperative_kernel.ok_or_else(|| {
                Error::new(
                    ErrorKind::RuntimeError,
                    "a cooperative launch needs hipModuleLaunchCooperativeKernel, which this HIP \
                     runtime lacks",
                )
            })?;
            call.with_addresses(|params| {
                // SAFETY: as above.
                unsafe { launch_cooperative(launch, function, &dims, stream.0, params) }
            })
        } else {
            call.with_aligned_blob(|blob| {
                let mut size = blob.len();
                let mut extra = [
                    LAUNCH_PARAM_BUFFER_POINTER as *mut c_void,
                    blob.as_mut_ptr().cast(),
                    LAUNCH_PARAM_BUFFER_SIZE as *mut c_void,
                    (&mut size as *mut usize).cast(),
                    LAUNCH_PARAM_END as *mut c_void,
                ];
                let (launch, params) = (api.module_launch_kernel, std::ptr::null_mut());
                // SAFETY: as above; `extra` describes the blob and its size.
                unsafe {
                    launch_kernel(
                        launch,
                        function,
                        &dims,
                        stream.0,
                        params,
                        extra.as_mut_ptr(),
                    )
                }
            })
        };
        if rc == HIP_SUCCESS {
            return Ok(());
        }
        Err(self.launch_error(rc, device, call))
    }

    /// The error of a failed launch: HIP's, with the kernel and its dimensions (made only on
    /// failure: launches are hot).
    #[cold]
    fn launch_error(&self, rc: i32, device: Device, call: &KernelCall<'_>) -> Error {
        self.hip.error(rc, &call.launch_failure("ROCm", device))
    }
}

/// Registers the loaders of `hip` modules: the serialized form under `hip`, `hsaco` and
/// `rocm`, and `.hsaco` files with their `.tvm_meta.json`.
pub fn register_module_loaders(backend: Arc<RocmBackend>) {
    register_loaders(Arc::clone(&backend), &[CODE_FORMAT]);
    for alias in [CODE_FORMAT, "rocm"] {
        register_bytes_loader(Arc::clone(&backend), alias);
    }
}
