//! Kernel launches in a loop, for counting their cost with callgrind (`scripts/launch-cost.sh`):
//! `cuda_launch_cost <driver> <packed|bare> <launches>`.
//!
//! Both modes launch `add_one(x, n)` on a grid of 1 x 1 on the null stream of `cuda:0` of the
//! driver at `<driver>` (the fake of device-kit's `fake/`, or a real `libcuda.so.1`): `packed` through
//! the module's packed function (argument reading, device choice, the kernel cache, argument
//! addresses, `cuLaunchKernel`), `bare` by calling `cuLaunchKernel` itself with prepared
//! arguments. The work queued is never waited for: what is counted is the launch calls.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::Arc;

use device_cuda::CudaBackend;
use device_kit::driver::launch::launch_kernel;
use device_kit::driver::module::{DeviceModule, KernelBackend};
use device_kit::driver::runtime::RuntimeSource;
use device_kit::driver::shared_ops::SharedOps;
use device_kit::kernel::LaunchDims;
use device_kit::testing::{add_one_info, launch_cost_args, launch_packed};
use tvm_ffi::{Device, Result};
use tvm_runtime::Module;

use tvm_ffi_capi as _;

const PTX: &str = ".version 7.0\n.target sm_52\n.visible .entry add_one(.param .u64 x) { ret; }\n";

fn main() -> Result<()> {
    let (driver, mode, launches) = launch_cost_args("cuda_launch_cost", "driver");
    let backend = Arc::new(CudaBackend::with_library(driver));
    let device = Device::new(tvm_ffi::abi::kDLCUDA, 0);
    let runtime = backend.runtime()?;
    let data = runtime.alloc_device(device, 4, 64)?;
    match mode.as_str() {
        "packed" => {
            let functions = BTreeMap::from([("add_one".to_owned(), add_one_info())]);
            let module = DeviceModule::new(backend.clone(), "ptx", functions, PTX.into())?;
            launch_packed(Module::new(module), data, launches)?;
        }
        "bare" => {
            let code = backend.load(device, "ptx", &[PTX.as_bytes(), b"\0"].concat())?;
            let function = runtime.kernel(device, code, "add_one")?.handle();
            let (mut x, mut n) = (data, 1i32);
            let mut params = [
                (&mut x as *mut u64).cast::<c_void>(),
                (&mut n as *mut i32).cast::<c_void>(),
            ];
            let (launch, dims) = (runtime.driver.api.launch_kernel, LaunchDims::default());
            let (stream, extra) = (std::ptr::null_mut(), std::ptr::null_mut());
            for _ in 0..launches {
                // SAFETY: a kernel of a module loaded on cuda:0, whose context the load made
                // current; `params` points at the two argument values.
                let rc = unsafe {
                    launch_kernel(launch, function, &dims, stream, params.as_mut_ptr(), extra)
                };
                assert_eq!(rc, 0, "cuLaunchKernel failed");
            }
        }
        other => panic!("mode {other:?} is neither packed nor bare"),
    }
    Ok(())
}
