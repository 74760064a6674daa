//! Kernel launches on the calling thread's current stream: `cuLaunchKernel`,
//! `cuLaunchCooperativeKernel` for the cooperative tag, `cuLaunchKernelEx` for clusters and
//! programmatic dependent launch.

use device_kit::driver::args::KernelCall;
use device_kit::driver::launch::{launch_cooperative, launch_kernel};
use device_kit::driver::runtime::VendorErrors;
use device_kit::driver::shared_calls::Kernel;
use device_kit::kernel::LaunchDims;
use tvm_ffi::{Device, Error, ErrorKind, Result};
use tvm_runtime::device::current_stream;

use crate::context::CudaRuntime;
use crate::driver::{CUDA_SUCCESS, CuFunction, LaunchAttribute, LaunchConfigEx};

/// Dynamic shared memory above this needs the kernel's permission (`cuFuncSetAttribute`).
const DEFAULT_DYN_SHARED_MEMORY: u32 = 48 << 10;
/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
const FUNC_MAX_DYNAMIC_SHARED_SIZE: i32 = 8;

/// `CUlaunchAttributeID`s.
const ATTRIBUTE_COOPERATIVE: i32 = 2;
const ATTRIBUTE_CLUSTER_DIMENSION: i32 = 4;
const ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: i32 = 6;
const ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION: i32 = 11;

fn attribute(id: i32, values: &[u32]) -> LaunchAttribute {
    let mut value = [0u32; 16];
    value[..values.len()].copy_from_slice(values);
    LaunchAttribute {
        id,
        pad: [0; 4],
        value,
    }
}

/// The attributes of an extended launch.
fn extended_attributes(dims: &LaunchDims) -> Vec<LaunchAttribute> {
    let mut attributes = Vec::new();
    if dims.cluster != [1; 3] {
        attributes.push(attribute(ATTRIBUTE_CLUSTER_DIMENSION, &dims.cluster));
    }
    if dims.preferred_cluster != [1; 3] {
        attributes.push(attribute(
            ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION,
            &dims.preferred_cluster,
        ));
    }
    if dims.programmatic_dependent_launch {
        attributes.push(attribute(ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, &[1]));
    }
    if !attributes.is_empty() && dims.cooperative {
        attributes.push(attribute(ATTRIBUTE_COOPERATIVE, &[1]));
    }
    attributes
}

fn missing(entry_point: &str, needs: &str) -> Error {
    Error::new(
        ErrorKind::RuntimeError,
        format!("{needs} needs {entry_point}, which this CUDA driver lacks"),
    )
}

/// Whether the launch needs `cuLaunchKernelEx` (clusters, programmatic dependent launch).
fn needs_extended_launch(dims: &LaunchDims) -> bool {
    dims.cluster != [1; 3] || dims.preferred_cluster != [1; 3] || dims.programmatic_dependent_launch
}

impl CudaRuntime {
    /// Launches `kernel` on `device`, whose context is current (as
    /// [`CudaRuntime::launch_device`] leaves it), with the arguments and dimensions of `call`,
    /// on the calling thread's current stream of `device`.
    pub fn launch(&self, device: Device, kernel: Kernel, call: &mut KernelCall<'_>) -> Result<()> {
        let api = &self.driver.api;
        let stream = current_stream(device);
        let function = kernel.handle();
        let LaunchDims {
            grid,
            block,
            dyn_shared_memory: shared,
            cooperative,
            ..
        } = call.dims;
        if shared > DEFAULT_DYN_SHARED_MEMORY {
            self.allow_dyn_shared_memory(function, call)?;
        }
        // Clusters and programmatic dependent launch take the extended launch.
        let mut extended =
            needs_extended_launch(&call.dims).then(|| extended_attributes(&call.dims));
        let dims = call.dims;
        // In the three launches below: a kernel of a module loaded on this device; `params`
        // holds one address per kernel argument, each pointing at its value, alive across the
        // call (the driver copies the values at launch); the stream belongs to this device.
        let rc = call.with_addresses(|params| -> Result<_> {
            if let Some(attributes) = &mut extended {
                let launch_ex = api.launch_kernel_ex.ok_or_else(|| {
                    missing("cuLaunchKernelEx", "a cluster or programmatic launch")
                })?;
                let config = LaunchConfigEx {
                    grid,
                    block,
                    shared_mem_bytes: shared,
                    stream: stream.0,
                    attrs: attributes.as_mut_ptr(),
                    num_attrs: attributes.len() as u32,
                };
                // SAFETY: as above; `config` and its attributes outlive the call.
                Ok(unsafe { launch_ex(&config, function, params, std::ptr::null_mut()) })
            } else if cooperative {
                let cooperative = api
                    .launch_cooperative_kernel
                    .ok_or_else(|| missing("cuLaunchCooperativeKernel", "a cooperative launch"))?;
                // SAFETY: as above.
                Ok(unsafe { launch_cooperative(cooperative, function, &dims, stream.0, params) })
            } else {
                let extra = std::ptr::null_mut();
                // SAFETY: as above.
                Ok(unsafe {
                    launch_kernel(api.launch_kernel, function, &dims, stream.0, params, extra)
                })
            }
        })?;
        if rc == CUDA_SUCCESS {
            return Ok(());
        }
        Err(self.launch_error(rc, device, call))
    }

    /// Lets `function` use more than 48 KiB of dynamic shared memory, as `call` asks.
    fn allow_dyn_shared_memory(&self, function: CuFunction, call: &KernelCall<'_>) -> Result<()> {
        let bytes = call.dims.dyn_shared_memory;
        let set =
            self.driver.api.func_set_attribute.ok_or_else(|| {
                missing("cuFuncSetAttribute", "more than 48 KiB of shared memory")
            })?;
        // SAFETY: a kernel of a module loaded on this device.
        let rc = unsafe { set(function, FUNC_MAX_DYNAMIC_SHARED_SIZE, bytes as i32) };
        self.driver.check(
            rc,
            &format!(
                "allowing kernel `{}` {bytes} bytes of dynamic shared memory",
                call.kernel()
            ),
        )
    }

    /// The error of a failed launch: the driver's, with the kernel and its dimensions (made
    /// only on failure: launches are hot).
    #[cold]
    fn launch_error(&self, rc: i32, device: Device, call: &KernelCall<'_>) -> Error {
        self.driver.error(rc, &call.launch_failure("CUDA", device))
    }
}
