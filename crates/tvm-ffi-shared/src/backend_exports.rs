//! The backend API of compiled kernels under its C names (`tvm/runtime/c_backend_api.h`), for C
//! code that calls it directly. Kernels compiled by TVM reach the same functions through their
//! `__TVMBackend*` slots, which the runtime fills from its context symbols.

use std::ffi::{c_char, c_int, c_void};

use tvm_ffi::abi::TVMFFIObjectHandle;
use tvm_runtime::backend::{self, FTVMParallelLambda, TVMParallelGroupEnv};

/// See [`backend::backend_alloc_workspace`].
#[unsafe(no_mangle)]
pub extern "C" fn TVMBackendAllocWorkspace(
    device_type: c_int,
    device_id: c_int,
    nbytes: u64,
    dtype_code_hint: c_int,
    dtype_bits_hint: c_int,
) -> *mut c_void {
    backend::backend_alloc_workspace(
        device_type,
        device_id,
        nbytes,
        dtype_code_hint,
        dtype_bits_hint,
    )
}

/// See [`backend::backend_free_workspace`].
#[unsafe(no_mangle)]
pub extern "C" fn TVMBackendFreeWorkspace(
    device_type: c_int,
    device_id: c_int,
    ptr: *mut c_void,
) -> c_int {
    backend::backend_free_workspace(device_type, device_id, ptr)
}

/// See [`backend::backend_parallel_launch`].
///
/// # Safety
/// As for [`backend::backend_parallel_launch`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMBackendParallelLaunch(
    flambda: Option<FTVMParallelLambda>,
    cdata: *mut c_void,
    num_task: c_int,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { backend::backend_parallel_launch(flambda, cdata, num_task) }
}

/// See [`backend::backend_parallel_barrier`].
///
/// # Safety
/// As for [`backend::backend_parallel_barrier`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMBackendParallelBarrier(
    task_id: c_int,
    penv: *mut TVMParallelGroupEnv,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { backend::backend_parallel_barrier(task_id, penv) }
}

/// See [`backend::backend_get_func_from_env`].
///
/// # Safety
/// As for [`backend::backend_get_func_from_env`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMBackendGetFuncFromEnv(
    mod_node: *mut c_void,
    func_name: *const c_char,
    out: *mut TVMFFIObjectHandle,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { backend::backend_get_func_from_env(mod_node, func_name, out) }
}
