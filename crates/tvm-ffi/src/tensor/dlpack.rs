//! DLPack import and export: tensors from `DLManagedTensor`/`DLManagedTensorVersioned`
//! producers (taking ownership only once every check has passed), managed tensors that hold a
//! reference to a tensor, and views that share another object's data.

use std::ffi::c_void;

use crate::abi::{
    DLManagedTensor, DLManagedTensorVersioned, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
    DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION, DLPackVersion,
    DLTensor,
};
use crate::any::Any;
use crate::boundary::ffi_boundary;
use crate::error::{ErrorKind, Result};
use crate::object::dec_ref;
use crate::spare_block::{self, BlockKind};

use super::{Tensor, TensorOwner, check_import, import_tensor, make_tensor, read_dims};

/// Wraps an imported descriptor; `owner` runs only once every check has passed.
///
/// # Safety
/// `t` is a valid descriptor.
#[inline]
unsafe fn import(
    t: &DLTensor,
    require_alignment: i32,
    require_contiguous: bool,
    owner: impl FnOnce() -> TensorOwner,
    read_only: bool,
) -> Result<Tensor> {
    // SAFETY: guaranteed by the caller.
    let (shape, strides) = unsafe { read_dims(t)? };
    check_import(t, shape, strides, require_alignment, require_contiguous)?;
    Ok(import_tensor(t, shape, strides, owner(), read_only))
}

/// Bytes of one export record block: the larger of the two record layouts, so that both
/// exports share the spare block.
const RECORD_SIZE: usize = {
    let versioned = size_of::<DLManagedTensorVersioned>();
    let legacy = size_of::<DLManagedTensor>();
    if versioned > legacy {
        versioned
    } else {
        legacy
    }
};

/// A block of [`RECORD_SIZE`] bytes (8-byte aligned) for an export record: this thread's
/// spare one (a consumer that lets go of an export soon, the common case, gave it back), or a
/// new one.
fn alloc_record() -> *mut c_void {
    spare_block::take(BlockKind::ExportRecord, RECORD_SIZE)
}

/// Gives back a block of [`alloc_record`] (kept as this thread's spare or freed).
///
/// # Safety
/// `block` came from [`alloc_record`] and nothing refers to it any more.
unsafe fn free_record(block: *mut c_void) {
    // SAFETY: guaranteed by the caller.
    unsafe { spare_block::give_back(BlockKind::ExportRecord, block, RECORD_SIZE) }
}

unsafe extern "C" fn release_legacy(managed: *mut DLManagedTensor) {
    ffi_boundary("the deleter of a DLManagedTensor", || {
        // SAFETY: made by `Tensor::to_dlpack` in a block of `alloc_record`, released once; the
        // context holds a reference.
        unsafe {
            let tensor = (*managed).manager_ctx;
            free_record(managed.cast());
            dec_ref(tensor.cast());
        }
    })
}

unsafe extern "C" fn release_versioned(managed: *mut DLManagedTensorVersioned) {
    ffi_boundary("the deleter of a DLManagedTensorVersioned", || {
        // SAFETY: made by `Tensor::to_dlpack_versioned` in a block of `alloc_record`, released
        // once; the context holds a reference.
        unsafe {
            let tensor = (*managed).manager_ctx;
            free_record(managed.cast());
            dec_ref(tensor.cast());
        }
    })
}

impl Tensor {
    /// Imports a legacy DLPack tensor. On success the tensor owns `managed` (and calls its
    /// deleter when released); on error the caller still owns it. `require_alignment` (bytes,
    /// 0 for none) and `require_contiguous` are checked first.
    ///
    /// # Safety
    /// `managed` points at a valid managed tensor.
    pub unsafe fn from_dlpack(
        managed: *mut DLManagedTensor,
        require_alignment: i32,
        require_contiguous: bool,
    ) -> Result<Tensor> {
        // SAFETY: guaranteed by the caller.
        let descriptor = unsafe { &(*managed).dl_tensor };
        // SAFETY: as above.
        unsafe {
            import(
                descriptor,
                require_alignment,
                require_contiguous,
                || TensorOwner::Managed(managed),
                false,
            )
        }
    }

    /// Imports a versioned DLPack tensor, keeping its read-only flag; ownership as for
    /// [`Tensor::from_dlpack`]. Another major version or padded sub-byte data is a `ValueError`.
    ///
    /// # Safety
    /// `managed` points at a valid versioned managed tensor.
    pub unsafe fn from_dlpack_versioned(
        managed: *mut DLManagedTensorVersioned,
        require_alignment: i32,
        require_contiguous: bool,
    ) -> Result<Tensor> {
        // SAFETY: guaranteed by the caller.
        let record = unsafe { &*managed };
        if record.version.major != DLPACK_MAJOR_VERSION {
            crate::bail!(
                ErrorKind::ValueError,
                "unsupported DLPack major version {} (this runtime speaks {DLPACK_MAJOR_VERSION})",
                record.version.major
            );
        }
        if record.flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED != 0 {
            crate::bail!(
                ErrorKind::ValueError,
                "padded sub-byte DLPack tensors are not supported"
            );
        }
        let read_only = record.flags & DLPACK_FLAG_BITMASK_READ_ONLY != 0;
        // SAFETY: the descriptor is valid.
        unsafe {
            import(
                &record.dl_tensor,
                require_alignment,
                require_contiguous,
                || TensorOwner::Versioned(managed),
                read_only,
            )
        }
    }

    /// Exports the tensor as a legacy DLPack tensor holding one reference to it; the consumer
    /// releases it through its deleter.
    pub fn to_dlpack(&self) -> *mut DLManagedTensor {
        let record = alloc_record().cast::<DLManagedTensor>();
        // SAFETY: the block has room for the record and malloc's alignment.
        unsafe {
            record.write(DLManagedTensor {
                dl_tensor: *self.obj.dltensor(),
                manager_ctx: self.obj.clone().into_raw().cast::<c_void>(),
                deleter: Some(release_legacy),
            })
        };
        record
    }

    /// Exports the tensor as a versioned DLPack tensor (read-only flag kept) holding one
    /// reference to it; the consumer releases it through its deleter.
    pub fn to_dlpack_versioned(&self) -> *mut DLManagedTensorVersioned {
        let flags = if self.is_read_only() {
            DLPACK_FLAG_BITMASK_READ_ONLY
        } else {
            0
        };
        let record = alloc_record().cast::<DLManagedTensorVersioned>();
        // SAFETY: the block has room for the record and malloc's alignment.
        unsafe {
            record.write(DLManagedTensorVersioned {
                version: DLPackVersion {
                    major: DLPACK_MAJOR_VERSION,
                    minor: DLPACK_MINOR_VERSION,
                },
                dl_tensor: *self.obj.dltensor(),
                manager_ctx: self.obj.clone().into_raw().cast::<c_void>(),
                deleter: Some(release_versioned),
                flags,
            })
        };
        record
    }

    /// A tensor sharing `source`'s data with `prototype`'s descriptor (shape and strides are
    /// copied; strides must be given when `ndim > 0`). The view keeps `source` alive and is
    /// read-only when `source` is a read-only tensor.
    ///
    /// # Safety
    /// `prototype` is a valid descriptor whose data lies within memory `source` keeps alive.
    pub unsafe fn view_of(source: Any, prototype: &DLTensor) -> Result<Tensor> {
        // SAFETY: the prototype is valid.
        let (shape, strides) = unsafe { read_dims(prototype)? };
        if !shape.is_empty() && strides.is_none() {
            crate::bail!(ErrorKind::ValueError, "a view prototype needs strides");
        }
        let read_only = source.try_as::<Tensor>().is_some_and(|t| t.is_read_only());
        Ok(make_tensor(
            prototype,
            shape,
            strides,
            TensorOwner::Source(source),
            read_only,
        ))
    }
}
