//! The launch entry points CUDA's driver API and HIP have in the same shape
//! (`cuLaunchKernel`/`hipModuleLaunchKernel`, and their cooperative forms), called with the
//! dimensions of a launch.

use std::ffi::c_void;

use crate::kernel::LaunchDims;

/// A launch: the kernel, the grid (x, y, z), the block (x, y, z), bytes of dynamic shared
/// memory, the stream, the arguments as an array of their addresses, and `extra` (the
/// arguments as one blob, with its size). Returns the vendor's result code.
pub type LaunchKernelFn = unsafe extern "C" fn(
    *mut c_void,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
    *mut c_void,
    *mut *mut c_void,
    *mut *mut c_void,
) -> i32;

/// A cooperative launch: as [`LaunchKernelFn`] without `extra`.
pub type LaunchCooperativeFn = unsafe extern "C" fn(
    *mut c_void,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
    *mut c_void,
    *mut *mut c_void,
) -> i32;

/// Launches `function` with `dims` on `stream` through `launch`.
///
/// # Safety
/// `launch` is the vendor's entry point, `function` a kernel of code loaded on the current
/// device, `stream` a stream of that device, and `params` or `extra` (one of them not null)
/// describe the kernel's arguments, alive across the call.
#[inline]
pub unsafe fn launch_kernel(
    launch: LaunchKernelFn,
    function: *mut c_void,
    dims: &LaunchDims,
    stream: *mut c_void,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> i32 {
    let ([gx, gy, gz], [bx, by, bz]) = (dims.grid, dims.block);
    let shared = dims.dyn_shared_memory;
    // SAFETY: guaranteed by the caller.
    unsafe {
        launch(
            function, gx, gy, gz, bx, by, bz, shared, stream, params, extra,
        )
    }
}

/// Launches `function` cooperatively with `dims` on `stream` through `launch`.
///
/// # Safety
/// As for [`launch_kernel`], with the arguments in `params`.
#[inline]
pub unsafe fn launch_cooperative(
    launch: LaunchCooperativeFn,
    function: *mut c_void,
    dims: &LaunchDims,
    stream: *mut c_void,
    params: *mut *mut c_void,
) -> i32 {
    let ([gx, gy, gz], [bx, by, bz]) = (dims.grid, dims.block);
    let shared = dims.dyn_shared_memory;
    // SAFETY: guaranteed by the caller.
    unsafe { launch(function, gx, gy, gz, bx, by, bz, shared, stream, params) }
}
