//! DLPack import and export, views, and allocation through the environment's allocator.

use std::ffi::{c_char, c_int, c_void};

use crate::abi::{
    DLManagedTensor, DLManagedTensorVersioned, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
    DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION, DLPackVersion,
    DLTensor, TVMFFIObjectHandle,
};
use crate::any::Any;
use crate::error::{Error, ErrorKind, Result};
use crate::object::{ObjectCore, ObjectRef, dec_ref};
use crate::tensor::{Tensor, TensorObj, TensorOwner, check_import, make_tensor, read_dims};

use super::{guard, out_arg};

/// Wraps an imported descriptor; the owner is taken only once every check has passed.
///
/// # Safety
/// `t` is a valid descriptor.
unsafe fn import(
    t: &DLTensor,
    require_alignment: i32,
    require_contiguous: c_int,
    owner: impl FnOnce() -> TensorOwner,
    read_only: bool,
) -> Result<Tensor> {
    // SAFETY: guaranteed by the caller.
    let (shape, strides) = unsafe { read_dims(t)? };
    check_import(
        t,
        shape,
        strides,
        require_alignment,
        require_contiguous != 0,
    )?;
    Ok(make_tensor(t, shape, strides, owner(), read_only))
}

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
    guard(|| {
        // SAFETY: per the contract.
        let (managed, out) = unsafe { (super::non_null(from, "from")?, out_arg(out, "out")?) };
        // SAFETY: the descriptor is valid.
        let tensor = unsafe {
            import(
                &managed.dl_tensor,
                require_alignment,
                require_contiguous,
                || TensorOwner::Managed(from),
                false,
            )?
        };
        *out = tensor.as_object().clone().into_raw().cast();
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
    guard(|| {
        // SAFETY: per the contract.
        let (managed, out) = unsafe { (super::non_null(from, "from")?, out_arg(out, "out")?) };
        if managed.version.major != DLPACK_MAJOR_VERSION {
            crate::bail!(
                ErrorKind::ValueError,
                "unsupported DLPack major version {} (this runtime speaks {DLPACK_MAJOR_VERSION})",
                managed.version.major
            );
        }
        if managed.flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED != 0 {
            crate::bail!(
                ErrorKind::ValueError,
                "padded sub-byte DLPack tensors are not supported"
            );
        }
        let read_only = managed.flags & DLPACK_FLAG_BITMASK_READ_ONLY != 0;
        // SAFETY: the descriptor is valid.
        let tensor = unsafe {
            import(
                &managed.dl_tensor,
                require_alignment,
                require_contiguous,
                || TensorOwner::Versioned(from),
                read_only,
            )?
        };
        *out = tensor.as_object().clone().into_raw().cast();
        Ok(())
    })
}

/// A new reference to a tensor argument, or a `TypeError` naming its type.
fn tensor_arg(handle: TVMFFIObjectHandle) -> Result<ObjectRef<TensorObj>> {
    if handle.is_null() {
        crate::bail!(ErrorKind::ValueError, "tensor handle must not be NULL");
    }
    // SAFETY: a non-NULL handle is a live object lent for the call.
    let type_index = unsafe { (*handle.cast::<crate::abi::TVMFFIObject>()).type_index };
    if !TensorObj::is_instance(type_index) {
        crate::bail!(
            ErrorKind::TypeError,
            "expected ffi.Tensor, got {}",
            crate::types::type_key_of(type_index)
        );
    }
    // SAFETY: a live tensor lent for the call; the new reference is ours.
    Ok(unsafe { ObjectRef::from_borrowed(handle.cast()) })
}

unsafe extern "C" fn release_legacy(managed: *mut DLManagedTensor) {
    // SAFETY: allocated by `TVMFFITensorToDLPack`, released once; the context holds a reference.
    unsafe {
        let managed = Box::from_raw(managed);
        dec_ref(managed.manager_ctx.cast());
    }
}

unsafe extern "C" fn release_versioned(managed: *mut DLManagedTensorVersioned) {
    // SAFETY: allocated by `TVMFFITensorToDLPackVersioned`, released once.
    unsafe {
        let managed = Box::from_raw(managed);
        dec_ref(managed.manager_ctx.cast());
    }
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
    guard(|| {
        // SAFETY: per the contract.
        let out = unsafe { out_arg(out, "out")? };
        let tensor = tensor_arg(from)?;
        let managed = Box::new(DLManagedTensor {
            dl_tensor: *tensor.dltensor(),
            manager_ctx: tensor.into_raw().cast::<c_void>(),
            deleter: Some(release_legacy),
        });
        *out = Box::into_raw(managed);
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
    guard(|| {
        // SAFETY: per the contract.
        let out = unsafe { out_arg(out, "out")? };
        let tensor = tensor_arg(from)?;
        let flags = if crate::tensor::is_read_only(tensor.as_raw()) {
            DLPACK_FLAG_BITMASK_READ_ONLY
        } else {
            0
        };
        let managed = Box::new(DLManagedTensorVersioned {
            version: DLPackVersion {
                major: DLPACK_MAJOR_VERSION,
                minor: DLPACK_MINOR_VERSION,
            },
            dl_tensor: *tensor.dltensor(),
            manager_ctx: tensor.into_raw().cast::<c_void>(),
            deleter: Some(release_versioned),
            flags,
        });
        *out = Box::into_raw(managed);
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
    guard(|| {
        // SAFETY: per the contract.
        let (prototype, out) = unsafe {
            (
                super::non_null(prototype, "prototype")?,
                out_arg(out, "out")?,
            )
        };
        if source.is_null() {
            crate::bail!(ErrorKind::ValueError, "source must not be NULL");
        }
        // SAFETY: the prototype is valid.
        let (shape, strides) = unsafe { read_dims(prototype)? };
        if !shape.is_empty() && strides.is_none() {
            crate::bail!(ErrorKind::ValueError, "a view prototype needs strides");
        }
        // SAFETY: the source is a live object lent for the call; the view keeps a reference.
        let source = Any::from_object(unsafe {
            ObjectRef::<crate::object::Object>::from_borrowed(source.cast())
        });
        let read_only = source.try_as::<Tensor>().is_some_and(|t| t.is_read_only());
        let tensor = make_tensor(
            prototype,
            shape,
            strides,
            TensorOwner::Source(source),
            read_only,
        );
        *out = tensor.as_object().clone().into_raw().cast();
        Ok(())
    })
}

unsafe extern "C" fn forward_error(_ctx: *mut c_void, kind: *const c_char, message: *const c_char) {
    // SAFETY: the allocator passes NUL-terminated strings.
    unsafe { super::error::TVMFFIErrorSetRaisedFromCStr(kind, message) };
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
    let Some(allocator) = super::env::TVMFFIEnvGetDLPackManagedTensorAllocator() else {
        return guard(|| {
            Err(Error::new(
                ErrorKind::RuntimeError,
                "TVMFFIEnvTensorAlloc: allocator is nullptr, install one with \
                 TVMFFIEnvSetDLPackManagedTensorAllocator",
            ))
        });
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
        return rc;
    }
    if managed.is_null() {
        return guard(|| {
            Err(Error::new(
                ErrorKind::RuntimeError,
                "TVMFFIEnvTensorAlloc: allocator returned NULL",
            ))
        });
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
    rc
}

const _: () = assert!(std::mem::size_of::<TensorObj>() == 72);
