//! Modules of kind `cuda`: PTX, cubin or fatbin (or CUDA source, compiled through the global
//! function `tvm_callback_cuda_compile`), loaded with `cuModuleLoadDataEx` on each device at
//! the first launch there.

use std::ffi::c_void;
use std::sync::Arc;

use device_kit::driver::args::{KernelCall, TensorPlacement};
use device_kit::driver::module::KernelBackend;
use device_kit::driver::runtime::{RuntimeSource, VendorErrors};
use device_kit::driver::shared_calls::{Kernel, LoadedCode};
use tvm_ffi::abi;
use tvm_ffi::{Bytes, Device, Error, ErrorKind, Function, Result};

use crate::context::CudaBackend;
use crate::driver::CuModule;

/// The code formats a `cuda` module holds, which are also the extensions of its files.
pub const CODE_FORMATS: [&str; 3] = ["ptx", "cubin", "fatbin"];

/// `CU_JIT_ERROR_LOG_BUFFER` and `CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES`.
const JIT_ERROR_LOG_BUFFER: i32 = 5;
const JIT_ERROR_LOG_BUFFER_SIZE_BYTES: i32 = 6;
const JIT_LOG_BYTES: usize = 8192;

fn compile_source(code: Vec<u8>) -> Result<(String, Vec<u8>)> {
    let source = String::from_utf8(code)
        .map_err(|_| Error::new(ErrorKind::ValueError, "CUDA source is not UTF-8"))?;
    let compile = Function::get_global("tvm_callback_cuda_compile").ok_or_else(|| {
        Error::new(
            ErrorKind::RuntimeError,
            "a cuda module holds CUDA source, and no compiler is registered \
             (tvm_callback_cuda_compile): import tvm.support.nvcc",
        )
    })?;
    let binary: Bytes = compile.call((source,))?.cast()?;
    let binary = binary.as_bytes().to_vec();
    // PTX is text that starts with a comment; anything else is a cubin.
    let format = if binary.first() == Some(&b'/') {
        "ptx"
    } else {
        "cubin"
    };
    with_terminator(format, binary)
}

/// PTX gets the NUL that `cuModuleLoadData` needs to find its end.
fn with_terminator(format: &str, mut code: Vec<u8>) -> Result<(String, Vec<u8>)> {
    if format == "ptx" && code.last() != Some(&0) {
        code.push(0);
    }
    Ok((format.to_owned(), code))
}

impl KernelBackend for CudaBackend {
    fn kind(&self) -> &'static str {
        "cuda"
    }

    fn prepare(&self, format: &str, code: Vec<u8>) -> Result<(String, Vec<u8>)> {
        match format {
            "cuda" | "cu" => compile_source(code),
            _ if CODE_FORMATS.contains(&format) => with_terminator(format, code),
            _ => Err(Error::new(
                ErrorKind::ValueError,
                format!("a cuda module holds ptx, cubin, fatbin or cuda source, not {format:?}"),
            )),
        }
    }

    fn load(&self, device: Device, format: &str, code: &[u8]) -> Result<LoadedCode> {
        let runtime = self.runtime()?;
        runtime.bind(device)?;
        let mut log = vec![0u8; JIT_LOG_BYTES];
        let mut options = [JIT_ERROR_LOG_BUFFER, JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
        let mut values = [
            log.as_mut_ptr().cast::<c_void>(),
            JIT_LOG_BYTES as *mut c_void,
        ];
        let mut module: CuModule = std::ptr::null_mut();
        // SAFETY: the image is the whole code (PTX NUL-terminated); the option arrays hold two
        // entries each and the log buffer outlives the call.
        let rc = unsafe {
            (runtime.driver.api.module_load_data_ex)(
                &mut module,
                code.as_ptr().cast(),
                2,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        runtime
            .driver
            .check(rc, &format!("loading the {format} module on {device}"))
            .map_err(|e| {
                let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
                let log = String::from_utf8_lossy(&log[..end]);
                let log = log.trim();
                if log.is_empty() {
                    e
                } else {
                    Error::new(e.kind(), format!("{}; JIT log: {log}", e.message()))
                }
            })?;
        Ok(LoadedCode(module as usize))
    }

    /// Managed memory is reachable too, besides pinned host memory.
    #[inline]
    fn placement(&self, device: Device) -> TensorPlacement {
        match device.device_type() {
            abi::kDLCUDA => TensorPlacement::OnDevice,
            abi::kDLCUDAHost | abi::kDLCUDAManaged => TensorPlacement::Reachable,
            _ => TensorPlacement::Refused,
        }
    }

    #[inline]
    fn launch(&self, device: Device, kernel: Kernel, call: &mut KernelCall<'_>) -> Result<()> {
        self.runtime()?.launch(device, kernel, call)
    }
}

/// Registers the loaders of `cuda` modules (bytes, and `.ptx`/`.cubin`/`.fatbin` files).
pub fn register_module_loaders(backend: Arc<CudaBackend>) {
    device_kit::driver::module::register_loaders(backend, &CODE_FORMATS);
}
