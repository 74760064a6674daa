//! Function objects made from C safe-call pointers, calls, and the C functions of the global
//! function registry (lookup and registration).

use std::ffi::{c_int, c_void};

use tvm_ffi::any::AnyView;
use tvm_ffi::boundary::{ffi_boundary_result, ffi_status};
use tvm_ffi::error::{Error, ErrorKind, Result};
use tvm_ffi::function::{Function, FunctionObj};
use tvm_ffi::object::{ObjectRef, alloc_object};
use tvm_ffi_sys::{
    TVMFFIAny, TVMFFIByteArray, TVMFFIMethodInfo, TVMFFIObjectHandle, TVMFFISafeCallType,
    kTVMFFIFunction,
};

use crate::args::{bytes_arg, non_null, out_arg, text_arg};
use crate::registry::Overwrite;

/// A function object that forwards to a C safe-call with a user `self` pointer.
#[repr(C)]
struct ExternFunctionObj {
    function: FunctionObj,
    self_: *mut c_void,
    safe_call: TVMFFISafeCallType,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
}

impl Drop for ExternFunctionObj {
    fn drop(&mut self) {
        if let Some(deleter) = self.deleter {
            // SAFETY: the object owns `self_` and releases it exactly once.
            unsafe { deleter(self.self_) };
        }
    }
}

unsafe extern "C" fn extern_trampoline(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> c_int {
    ffi_boundary_result("the safe-call trampoline of a C function", || {
        // SAFETY: the trampoline is installed only on `ExternFunctionObj`, and `handle` is that
        // object.
        let obj = unsafe { &*handle.cast::<ExternFunctionObj>() };
        match obj.safe_call {
            // SAFETY: forwarded per the safe-call convention.
            Some(call) => Ok(unsafe { call(obj.self_, args, num_args, result) }),
            None => Err(missing_safe_call()),
        }
    })
}

/// The error of a function object without a safe-call.
fn missing_safe_call() -> Error {
    Error::new(ErrorKind::InternalError, "function without safe_call")
}

/// Creates a function object from a C safe-call. With NULL `self_` and `deleter` the callee
/// receives the function object as its handle; otherwise it receives `self_`.
///
/// # Safety
/// `safe_call` follows the safe-call convention; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIFunctionCreate(
    self_: *mut c_void,
    safe_call: TVMFFISafeCallType,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    out: *mut TVMFFIObjectHandle,
) -> c_int {
    ffi_status("TVMFFIFunctionCreate", || {
        // SAFETY: per the contract.
        let out = unsafe { out_arg(out, "out")? };
        if safe_call.is_none() {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "TVMFFIFunctionCreate: safe_call must not be NULL"
            );
        }
        let ptr = if self_.is_null() && deleter.is_none() {
            // SAFETY: FunctionObj is repr(C) with the header first and owns nothing.
            unsafe { alloc_object(FunctionObj::new(safe_call), 0, kTVMFFIFunction) }
                .cast::<c_void>()
        } else {
            let value = ExternFunctionObj {
                function: FunctionObj::new(Some(extern_trampoline)),
                self_,
                safe_call,
                deleter,
            };
            // SAFETY: repr(C) with the header first; Drop runs the user deleter.
            unsafe { alloc_object(value, 0, kTVMFFIFunction) }.cast::<c_void>()
        };
        *out = ptr.as_ptr();
        Ok(())
    })
}

/// Calls a function object: forwards to its cell's safe-call with the object as handle.
///
/// The call is never a tail call: this function's frame stays on the stack while the callee
/// runs, because backtraces end at it (the boundary between a foreign caller and the call). An
/// optimized build otherwise jumps to the safe-call, and an error raised inside showed the
/// caller's frames too.
///
/// # Safety
/// `func` is a live function object; `args` holds `num_args` values; `result` is valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIFunctionCall(
    func: TVMFFIObjectHandle,
    args: *mut TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> c_int {
    ffi_boundary_result("TVMFFIFunctionCall", || {
        // SAFETY: per the contract, `func` is a function object.
        let cell = unsafe { (*func.cast::<FunctionObj>()).cell() };
        match cell.safe_call {
            Some(call) => {
                // SAFETY: forwarded per the safe-call convention.
                let status = unsafe { call(func, args, num_args, result) };
                // Emits nothing, but comes after the call, so the call has to return here.
                std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
                Ok(status)
            }
            None => Err(missing_safe_call()),
        }
    })
}

/// Looks up a global function; `*out` is an owned reference, or NULL when absent (rc 0).
///
/// # Safety
/// `name` is a valid byte array; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIFunctionGetGlobal(
    name: *const TVMFFIByteArray,
    out: *mut TVMFFIObjectHandle,
) -> c_int {
    ffi_status("TVMFFIFunctionGetGlobal", || {
        // SAFETY: per the contract.
        let (name, out) = unsafe { (bytes_arg(name, "name")?, out_arg(out, "out")?) };
        // A name that is not UTF-8 names no function: absent, like any other missing name.
        *out = crate::global_registry()
            .get_bytes(name)
            .map_or(std::ptr::null_mut(), |f| {
                f.as_object().clone().into_raw().cast()
            });
        Ok(())
    })
}

/// Borrows a function argument as a `Function`, or a `TypeError`.
fn function_arg(handle: TVMFFIObjectHandle) -> Result<Function> {
    if handle.is_null() {
        tvm_ffi::bail!(ErrorKind::ValueError, "function handle must not be NULL");
    }
    // SAFETY: a non-NULL handle is a live object lent for the call.
    let obj = unsafe { ObjectRef::<tvm_ffi::object::Object>::from_borrowed(handle.cast()) };
    let key = obj.header().type_key();
    obj.downcast::<FunctionObj>()
        .map(Function::from_object)
        .map_err(|_| {
            Error::new(
                ErrorKind::TypeError,
                format!("expected ffi.Function, got {key}"),
            )
        })
}

/// Registers `f` as the global `name` (retained).
///
/// # Safety
/// `name` is a valid byte array; `f` is a live function object.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIFunctionSetGlobal(
    name: *const TVMFFIByteArray,
    f: TVMFFIObjectHandle,
    allow_override: c_int,
) -> c_int {
    ffi_status("TVMFFIFunctionSetGlobal", || {
        // SAFETY: per the contract.
        let name = unsafe { text_arg(name, "name")? };
        let function = function_arg(f)?;
        crate::global_registry().insert(
            name,
            function,
            String::new(),
            String::new(),
            Overwrite::from_c(allow_override),
        )
    })
}

/// Registers a global function from a method record (name, doc and metadata copied).
///
/// # Safety
/// `info` is a valid method record holding a function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIFunctionSetGlobalFromMethodInfo(
    info: *const TVMFFIMethodInfo,
    allow_override: c_int,
) -> c_int {
    ffi_status("TVMFFIFunctionSetGlobalFromMethodInfo", || {
        // SAFETY: per the contract.
        let info = unsafe { non_null(info, "method info")? };
        // SAFETY: the record's arrays and value are valid for the call.
        let (name, doc, metadata, method) = unsafe {
            (
                text_arg(&info.name, "name")?,
                bytes_arg(&info.doc, "doc")?,
                bytes_arg(&info.metadata, "metadata")?,
                AnyView::from_raw(info.method),
            )
        };
        let function: Function = method.cast()?;
        crate::global_registry().insert(
            name,
            function,
            String::from_utf8_lossy(doc).into_owned(),
            String::from_utf8_lossy(metadata).into_owned(),
            Overwrite::from_c(allow_override),
        )
    })
}
