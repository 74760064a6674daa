//! The backend API of compiled kernels: parallel loops on a thread pool, barriers among their
//! tasks, and workspaces.
//!
//! A library compiled by TVM does not link these functions: it holds `void*` slots named
//! `__TVMBackendParallelLaunch` and so on, which the loader fills from the context symbols
//! (`TVMFFIEnvModRegisterContextSymbol`). [`register_context_symbols`] registers every function
//! of [`context_functions`] there; with the `c-exports` feature (the standalone `libtvm_ffi.so`)
//! they are also exported by their C names, for C code that calls them directly.

mod affinity;
mod parallel;
mod thread_pool;
mod workspace;

use std::ffi::{c_char, c_int, c_void};

use tvm_ffi::abi::{self, TVMFFIObjectHandle};
use tvm_ffi::boundary::{ffi_boundary_result, ffi_status};
use tvm_ffi::{Any, AnyView, DataType, Device, ErrorKind, Function, Result};

pub use affinity::{Affinity, MAX_THREADS};
pub use parallel::{
    FTVMParallelLambda, TVMParallelGroupEnv, config_threadpool, num_threads, parallel_barrier,
    parallel_launch,
};
pub use workspace::{ALIGNMENT as WORKSPACE_ALIGNMENT, thread_workspace_blocks};

/// Allocates a kernel's workspace of `nbytes` on a device, aligned to 64 bytes: NULL with the
/// error raised on failure. Blocks are pooled per thread; free them on the allocating thread.
///
#[cfg_attr(
    feature = "c-exports",
    unsafe(export_name = "TVMBackendAllocWorkspace")
)]
pub extern "C" fn backend_alloc_workspace(
    device_type: c_int,
    device_id: c_int,
    nbytes: u64,
    dtype_code_hint: c_int,
    dtype_bits_hint: c_int,
) -> *mut c_void {
    ffi_boundary_result("TVMBackendAllocWorkspace", || {
        let dtype = DataType::new(dtype_code_hint as u8, dtype_bits_hint as u8, 1);
        workspace::alloc_workspace(Device::new(device_type, device_id), nbytes, dtype)
    })
}

/// Frees a workspace from [`backend_alloc_workspace`]: 0, or -1 with the error raised when the
/// calling thread did not allocate `ptr` on that device (such a pointer is refused, not freed).
#[cfg_attr(feature = "c-exports", unsafe(export_name = "TVMBackendFreeWorkspace"))]
pub extern "C" fn backend_free_workspace(
    device_type: c_int,
    device_id: c_int,
    ptr: *mut c_void,
) -> c_int {
    ffi_status("TVMBackendFreeWorkspace", || {
        workspace::free_workspace(Device::new(device_type, device_id), ptr)
    })
}

/// Runs `flambda(task_id, penv, cdata)` for the tasks of a parallel loop and waits for them: 0,
/// or -1 with the error a failed task raised.
///
/// # Safety
/// `flambda` is a task function and `cdata` what it expects.
#[cfg_attr(
    feature = "c-exports",
    unsafe(export_name = "TVMBackendParallelLaunch")
)]
pub unsafe extern "C" fn backend_parallel_launch(
    flambda: Option<FTVMParallelLambda>,
    cdata: *mut c_void,
    num_task: c_int,
) -> c_int {
    ffi_status("TVMBackendParallelLaunch", || {
        let Some(flambda) = flambda else {
            tvm_ffi::bail!(
                tvm_ffi::ErrorKind::ValueError,
                "TVMBackendParallelLaunch: flambda is NULL"
            );
        };
        parallel_launch(flambda, cdata, num_task)
    })
}

/// Waits until every task of the calling task's launch has reached the barrier.
///
/// # Safety
/// `penv` is the environment the launch passed to the calling task.
#[cfg_attr(
    feature = "c-exports",
    unsafe(export_name = "TVMBackendParallelBarrier")
)]
pub unsafe extern "C" fn backend_parallel_barrier(
    task_id: c_int,
    penv: *mut TVMParallelGroupEnv,
) -> c_int {
    // SAFETY: per the contract.
    ffi_status("TVMBackendParallelBarrier", || unsafe {
        parallel_barrier(task_id, penv)
    })
}

/// Finds `func_name` for generated code of the module whose context is `mod_node` (its imports,
/// then the global registry); the function is borrowed. The older name of
/// `TVMFFIEnvModLookupFromImports`.
///
/// # Safety
/// As for `TVMFFIEnvModLookupFromImports`.
#[cfg_attr(
    feature = "c-exports",
    unsafe(export_name = "TVMBackendGetFuncFromEnv")
)]
pub unsafe extern "C" fn backend_get_func_from_env(
    mod_node: *mut c_void,
    func_name: *const c_char,
    out: *mut TVMFFIObjectHandle,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { abi::TVMFFIEnvModLookupFromImports(mod_node, func_name, out) }
}

/// The functions compiled kernels find through their `__<name>` slots, by name: the backend
/// API, and the FFI functions Apache TVM's code generator also calls through slots.
pub fn context_functions() -> [(&'static str, *mut c_void); 10] {
    [
        (
            "TVMBackendAllocWorkspace",
            backend_alloc_workspace as *mut c_void,
        ),
        (
            "TVMBackendFreeWorkspace",
            backend_free_workspace as *mut c_void,
        ),
        (
            "TVMBackendParallelLaunch",
            backend_parallel_launch as *mut c_void,
        ),
        (
            "TVMBackendParallelBarrier",
            backend_parallel_barrier as *mut c_void,
        ),
        (
            "TVMBackendGetFuncFromEnv",
            backend_get_func_from_env as *mut c_void,
        ),
        ("TVMFFIFunctionCall", abi::TVMFFIFunctionCall as *mut c_void),
        (
            "TVMFFIEnvModLookupFromImports",
            abi::TVMFFIEnvModLookupFromImports as *mut c_void,
        ),
        (
            "TVMFFIHandleInitOnce",
            abi::TVMFFIHandleInitOnce as *mut c_void,
        ),
        (
            "TVMFFIErrorSetRaisedFromCStr",
            abi::TVMFFIErrorSetRaisedFromCStr as *mut c_void,
        ),
        (
            "TVMFFIErrorSetRaisedFromCStrParts",
            abi::TVMFFIErrorSetRaisedFromCStrParts as *mut c_void,
        ),
    ]
}

/// Registers [`context_functions`] as the context symbols `__<name>`.
pub(crate) fn register_context_symbols() {
    for (name, address) in context_functions() {
        let symbol = std::ffi::CString::new(format!("__{name}")).expect("no NUL in the names");
        // SAFETY: a NUL-terminated name and a function that lives as long as the process.
        unsafe { abi::TVMFFIEnvModRegisterContextSymbol(symbol.as_ptr(), address) };
    }
}

/// Registers `runtime.NumThreads` and `runtime.config_threadpool(affinity_mode, nthreads[,
/// cpus])` (Apache TVM's names; see [`Affinity::from_mode`] for the modes).
pub(crate) fn register_globals() {
    crate::register_typed("runtime.NumThreads", || num_threads().map(|n| n as i64));
    crate::register(
        "runtime.config_threadpool",
        Function::from_packed(config_threadpool_from_args),
    );
}

fn config_threadpool_from_args(args: &[AnyView<'_>]) -> Result<Any> {
    if !(2..=3).contains(&args.len()) {
        tvm_ffi::bail!(
            ErrorKind::TypeError,
            "runtime.config_threadpool takes (affinity_mode, nthreads[, cpus]), got {} arguments",
            args.len()
        );
    }
    let mode: i64 = args[0].cast()?;
    let nthreads: i64 = args[1].cast()?;
    let nthreads = usize::try_from(nthreads).map_err(|_| {
        tvm_ffi::Error::new(
            ErrorKind::ValueError,
            format!(
                "config_threadpool: nthreads must be 0 (the default) or positive, got {nthreads}"
            ),
        )
    })?;
    let cpus = match args.get(2) {
        Some(list) if list.is_none() => Vec::new(),
        Some(list) => {
            let list: tvm_ffi::Array = list.cast()?;
            list.as_slice()
                .iter()
                .map(|cpu| {
                    let cpu: i64 = cpu.cast()?;
                    usize::try_from(cpu).map_err(|_| {
                        tvm_ffi::Error::new(
                            ErrorKind::ValueError,
                            format!("config_threadpool: cpu {cpu} is not a CPU number"),
                        )
                    })
                })
                .collect::<Result<Vec<usize>>>()?
        }
        None => Vec::new(),
    };
    config_threadpool(Affinity::from_mode(mode, cpus)?, nthreads)?;
    Ok(Any::none())
}
