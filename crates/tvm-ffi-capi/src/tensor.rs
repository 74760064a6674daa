//! DLPack import and export, views, and allocation through the environment's allocator.

use std::ffi::{c_char, c_int, c_void};

use tvm_ffi::any::Any;
use tvm_ffi::boundary::{ffi_boundary_result, ffi_status};
use tvm_ffi::error::{ErrorKind, Result};
use tvm_ffi::object::{ObjectCore, ObjectRef};
use tvm_ffi::tensor::{Tensor, TensorObj};
use tvm_ffi_sys::{DLManagedTensor, DLManagedTensorVersioned, DLTensor, TVMFFIObjectHandle};

use crate::args::out_arg;

/// Imports a legacy DLPack tensor; on success the tensor owns `from`.
///
/// # Safety
/// `from` is a valid managed tensor; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFITensorFromDLPack(
    from: *mut DLManagedTensor,
    require_alignment: i32,
    require_contiguous: i32,
    out: *mut TVMFFIObjectHandle,
) -> c_int {
    ffi_status("TVMFFITensorFromDLPack", || {
        // SAFETY: per the contract.
        let out = unsafe { crate::args::non_null(from, "from").and(out_arg(out, "out"))? };
        // SAFETY: per the contract; ownership moves only on success.
        let tensor =
            unsafe { Tensor::from_dlpack(from, require_alignment, require_contiguous != 0)? };
        *out = tensor.into_raw_handle();
        Ok(())
    })
}

/// Imports a versioned DLPack tensor; on success the tensor owns `from`.
///
/// # Safety
/// `from` is a valid managed tensor; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFITensorFromDLPackVersioned(
    from: *mut DLManagedTensorVersioned,
    require_alignment: i32,
    require_contiguous: i32,
    out: *mut TVMFFIObjectHandle,
) -> c_int {
    ffi_status("TVMFFITensorFromDLPackVersioned", || {
        // SAFETY: per the contract.
        let out = unsafe { crate::args::non_null(from, "from").and(out_arg(out, "out"))? };
        // SAFETY: per the contract; ownership moves only on success.
        let tensor = unsafe {
            Tensor::from_dlpack_versioned(from, require_alignment, require_contiguous != 0)?
        };
        *out = tensor.into_raw_handle();
        Ok(())
    })
}

/// A tensor argument, borrowed for the call (no reference count changes), or a `TypeError`
/// naming its type.
fn tensor_arg(handle: TVMFFIObjectHandle) -> Result<std::mem::ManuallyDrop<Tensor>> {
    if handle.is_null() {
        tvm_ffi::bail!(ErrorKind::ValueError, "tensor handle must not be NULL");
    }
    // SAFETY: a non-NULL handle is a live object lent for the call.
    let type_index = unsafe { (*handle.cast::<tvm_ffi_sys::TVMFFIObject>()).type_index };
    if !TensorObj::is_instance(type_index) {
        tvm_ffi::bail!(
            ErrorKind::TypeError,
            "expected ffi.Tensor, got {}",
            tvm_ffi::types::type_key_of(type_index)
        );
    }
    // SAFETY: a live tensor lent for the call; the caller's reference is viewed, never
    // released (ManuallyDrop), so it stays the caller's.
    let obj = unsafe { ObjectRef::<TensorObj>::from_raw(handle.cast()) };
    Ok(std::mem::ManuallyDrop::new(Tensor::from_object(obj)))
}

/// Exports a tensor as a legacy DLPack tensor holding one reference to it.
///
/// # Safety
/// `from` is a live tensor; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFITensorToDLPack(
    from: TVMFFIObjectHandle,
    out: *mut *mut DLManagedTensor,
) -> c_int {
    ffi_status("TVMFFITensorToDLPack", || {
        // SAFETY: per the contract.
        let out = unsafe { out_arg(out, "out")? };
        let tensor = tensor_arg(from)?;
        *out = tensor.to_dlpack();
        Ok(())
    })
}

/// Exports a tensor as a versioned DLPack tensor holding one reference to it.
///
/// # Safety
/// `from` is a live tensor; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFITensorToDLPackVersioned(
    from: TVMFFIObjectHandle,
    out: *mut *mut DLManagedTensorVersioned,
) -> c_int {
    ffi_status("TVMFFITensorToDLPackVersioned", || {
        // SAFETY: per the contract.
        let out = unsafe { out_arg(out, "out")? };
        let tensor = tensor_arg(from)?;
        *out = tensor.to_dlpack_versioned();
        Ok(())
    })
}

/// A tensor sharing `source`'s data with `prototype`'s descriptor (shape and strides copied;
/// strides must be non-NULL when ndim > 0).
///
/// # Safety
/// `source` is a live object; `prototype` is valid; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFITensorCreateUnsafeView(
    source: TVMFFIObjectHandle,
    prototype: *const DLTensor,
    out: *mut TVMFFIObjectHandle,
) -> c_int {
    ffi_status("TVMFFITensorCreateUnsafeView", || {
        // SAFETY: per the contract.
        let (prototype, out) = unsafe {
            (
                crate::args::non_null(prototype, "prototype")?,
                out_arg(out, "out")?,
            )
        };
        if source.is_null() {
            tvm_ffi::bail!(ErrorKind::ValueError, "source must not be NULL");
        }
        // SAFETY: the source is a live object lent for the call; the view keeps a reference.
        let source = Any::from_object(unsafe {
            ObjectRef::<tvm_ffi::object::Object>::from_borrowed(source.cast())
        });
        // SAFETY: per the contract, the prototype describes memory the source keeps alive.
        let tensor = unsafe { Tensor::view_of(source, prototype)? };
        *out = tensor.into_raw_handle();
        Ok(())
    })
}

unsafe extern "C" fn forward_error(_ctx: *mut c_void, kind: *const c_char, message: *const c_char) {
    // SAFETY: the allocator passes NUL-terminated strings (the callee has its own boundary).
    unsafe { crate::error::TVMFFIErrorSetRaisedFromCStr(kind, message) };
}

/// Allocates a tensor through the environment's DLPack allocator.
///
/// # Safety
/// `prototype` is valid; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIEnvTensorAlloc(
    prototype: *mut DLTensor,
    out: *mut TVMFFIObjectHandle,
) -> c_int {
    ffi_boundary_result("TVMFFIEnvTensorAlloc", || {
        let Some(allocator) = crate::env::TVMFFIEnvGetDLPackManagedTensorAllocator() else {
            tvm_ffi::bail!(
                ErrorKind::RuntimeError,
                "TVMFFIEnvTensorAlloc: allocator is nullptr, install one with \
                 TVMFFIEnvSetDLPackManagedTensorAllocator"
            );
        };
        let mut managed = std::ptr::null_mut();
        // SAFETY: the allocator follows its contract; errors are forwarded to the error slot.
        let rc = unsafe {
            allocator(
                prototype,
                &mut managed,
                std::ptr::null_mut(),
                Some(forward_error),
            )
        };
        if rc != 0 {
            // The allocator raised its error through `forward_error`.
            return Ok(rc);
        }
        if managed.is_null() {
            tvm_ffi::bail!(
                ErrorKind::RuntimeError,
                "TVMFFIEnvTensorAlloc: allocator returned NULL"
            );
        }
        // SAFETY: the allocator handed us an owned managed tensor.
        let rc = unsafe { TVMFFITensorFromDLPackVersioned(managed, 0, 0, out) };
        if rc != 0 {
            // SAFETY: on failure ownership stayed with us; release it.
            unsafe {
                if let Some(deleter) = (*managed).deleter {
                    deleter(managed);
                }
            }
        }
        Ok(rc)
    })
}

const _: () = assert!(std::mem::size_of::<TensorObj>() == 72);
