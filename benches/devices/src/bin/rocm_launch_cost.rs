//! Kernel launches in a loop, for counting their cost with callgrind (`scripts/launch-cost.sh`):
//! `rocm_launch_cost <runtime> <packed|bare> <launches>`.
//!
//! Both modes launch `add_one(x, n)` on a grid of 1 x 1 on the null stream of `rocm:0` of the
//! HIP runtime at `<runtime>` (the fake of device-kit's `fake/`: the code object is the fake's text
//! image): `packed` through the `hip` module's packed function (argument reading, device
//! choice, the kernel cache, the aligned argument blob, `hipModuleLaunchKernel`), `bare` by
//! calling `hipModuleLaunchKernel` itself with a prepared blob. The work queued is never waited
//! for: what is counted is the launch calls.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::Arc;

use device_kit::driver::launch::launch_kernel;
use device_kit::driver::module::{DeviceModule, KernelBackend};
use device_kit::driver::runtime::{GpuRuntime, RuntimeSource};
use device_kit::driver::shared_ops::SharedOps;
use device_kit::kernel::LaunchDims;
use device_kit::testing::{add_one_info, launch_cost_args, launch_packed};
use device_rocm::RocmBackend;
use tvm_ffi::{Device, Result};
use tvm_runtime::Module;

use tvm_ffi_capi as _;

const HSACO: &str = "amdgcn-amd-amdhsa--gfx90a\n.entry add_one(\n\0";

/// `HIP_LAUNCH_PARAM_BUFFER_POINTER`, `_SIZE` and `_END`.
const BUFFER_POINTER: usize = 1;
const BUFFER_SIZE: usize = 2;
const END: usize = 3;

fn main() -> Result<()> {
    let (library, mode, launches) = launch_cost_args("rocm_launch_cost", "runtime");
    let backend = Arc::new(RocmBackend::with_library(library));
    let device = Device::new(tvm_ffi::abi::kDLROCM, 0);
    let runtime = backend.runtime()?;
    let data = runtime.alloc_device(device, 4, 64)?;
    if mode == "packed" {
        let functions = BTreeMap::from([("add_one".to_owned(), add_one_info())]);
        let code = HSACO.as_bytes().into();
        let module = DeviceModule::new(backend.clone(), "hsaco", functions, code)?;
        return launch_packed(Module::new(module), data, launches);
    }
    assert_eq!(mode, "bare", "mode {mode:?} is neither packed nor bare");
    let code = backend.load(device, "hsaco", HSACO.as_bytes())?;
    let function = runtime.kernel(device, code, "add_one")?.handle();
    // `x` (a pointer) at 0 and `n` (an int32) at 8: 12 bytes in C struct layout.
    let mut blob = [0u8; 12];
    blob[..8].copy_from_slice(&data.to_le_bytes());
    blob[8..].copy_from_slice(&1i32.to_le_bytes());
    let mut size = blob.len();
    let mut extra = [
        BUFFER_POINTER as *mut c_void,
        blob.as_mut_ptr().cast(),
        BUFFER_SIZE as *mut c_void,
        (&mut size as *mut usize).cast(),
        END as *mut c_void,
    ];
    let launch = runtime.hip.api.module_launch_kernel;
    let (dims, stream, params) = (
        LaunchDims::default(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    for _ in 0..launches {
        // SAFETY: a kernel of code loaded on rocm:0, which the load made current; `extra`
        // describes the argument blob and its size.
        let rc =
            unsafe { launch_kernel(launch, function, &dims, stream, params, extra.as_mut_ptr()) };
        assert_eq!(rc, 0, "hipModuleLaunchKernel failed");
    }
    Ok(())
}
