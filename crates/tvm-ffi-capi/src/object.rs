//! Reference counting, opaque objects, the (dormant) custom allocator, value ownership and
//! the version query.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

use tvm_ffi::any::AnyView;
use tvm_ffi::boundary::{ffi_boundary, ffi_status};
use tvm_ffi::error::{Error, ErrorKind};
use tvm_ffi::object::{Object, alloc_object, dec_ref, inc_ref};
use tvm_ffi_sys::{
    TVMFFIAny, TVMFFICustomAllocator, TVMFFIObjectHandle, TVMFFIOpaqueObjectCell, TVMFFIVersion,
    kTVMFFIOpaquePyObject, kTVMFFIRawStr,
};

use crate::args::out_arg;

/// Reports the ABI version this runtime implements.
///
/// # Safety
/// `out` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIGetVersion(out: *mut TVMFFIVersion) {
    ffi_boundary("TVMFFIGetVersion", || {
        // SAFETY: per the contract.
        if let Some(out) = unsafe { out.as_mut() } {
            *out = TVMFFIVersion {
                major: tvm_ffi_sys::TVM_FFI_VERSION_MAJOR,
                minor: tvm_ffi_sys::TVM_FFI_VERSION_MINOR,
                patch: tvm_ffi_sys::TVM_FFI_VERSION_PATCH,
            };
        }
    })
}

/// Adds a strong reference.
///
/// # Safety
/// `obj` is a live object (NULL is rejected with a `ValueError`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIObjectIncRef(obj: TVMFFIObjectHandle) -> c_int {
    ffi_status("TVMFFIObjectIncRef", || {
        if obj.is_null() {
            return Err(null_object());
        }
        // SAFETY: per the contract.
        unsafe { inc_ref(obj.cast()) };
        Ok(())
    })
}

/// The error of [`TVMFFIObjectIncRef`] for NULL, out of line.
#[cold]
#[inline(never)]
fn null_object() -> Error {
    Error::new(ErrorKind::ValueError, "TVMFFIObjectIncRef: NULL object")
}

/// Drops a strong reference; NULL is a no-op.
///
/// # Safety
/// `obj` is NULL or a live object whose reference the caller gives up.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIObjectDecRef(obj: TVMFFIObjectHandle) -> c_int {
    ffi_status("TVMFFIObjectDecRef", || {
        if !obj.is_null() {
            // SAFETY: per the contract.
            unsafe { dec_ref(obj.cast()) };
        }
        Ok(())
    })
}

#[repr(C)]
struct OpaqueObj {
    base: Object,
    cell: TVMFFIOpaqueObjectCell,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
}

impl Drop for OpaqueObj {
    fn drop(&mut self) {
        if let Some(deleter) = self.deleter {
            // SAFETY: the object owns the handle and releases it exactly once.
            unsafe { deleter(self.cell.handle) };
        }
    }
}

/// Wraps a foreign handle (a Python object) as an `ffi.OpaquePyObject`.
///
/// # Safety
/// `deleter(handle)` is safe to call once when the object dies; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIObjectCreateOpaque(
    handle: *mut c_void,
    type_index: i32,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    out: *mut TVMFFIObjectHandle,
) -> c_int {
    ffi_status("TVMFFIObjectCreateOpaque", || {
        // SAFETY: per the contract.
        let out = unsafe { out_arg(out, "out")? };
        if type_index != kTVMFFIOpaquePyObject {
            tvm_ffi::bail!(
                ErrorKind::RuntimeError,
                "opaque objects must have type index {kTVMFFIOpaquePyObject}, got {type_index}"
            );
        }
        let value = OpaqueObj {
            base: Object::header(),
            cell: TVMFFIOpaqueObjectCell { handle },
            deleter,
        };
        // SAFETY: repr(C) with the header first; Drop releases the handle.
        *out = unsafe { alloc_object(value, 0, type_index) }
            .as_ptr()
            .cast();
        Ok(())
    })
}

/// The default allocator record: no hook (objects are allocated by their producers).
struct DefaultAllocator(std::cell::UnsafeCell<TVMFFICustomAllocator>);

// SAFETY: the record is never written by this runtime; callers only read it.
unsafe impl Sync for DefaultAllocator {}

static DEFAULT_ALLOCATOR: DefaultAllocator =
    DefaultAllocator(std::cell::UnsafeCell::new(TVMFFICustomAllocator {
        allocate: None,
        context: std::ptr::null_mut(),
    }));
static CUSTOM_ALLOCATOR: AtomicPtr<TVMFFICustomAllocator> = AtomicPtr::new(std::ptr::null_mut());

/// The custom object allocator; recorded for compatibility, objects are allocated by their
/// producers.
#[unsafe(no_mangle)]
pub extern "C" fn TVMFFIGetCustomAllocator() -> *mut TVMFFICustomAllocator {
    ffi_boundary("TVMFFIGetCustomAllocator", || {
        let custom = CUSTOM_ALLOCATOR.load(Ordering::Acquire);
        if custom.is_null() {
            DEFAULT_ALLOCATOR.0.get()
        } else {
            custom
        }
    })
}

/// Records a custom allocator (NULL restores the default).
///
/// # Safety
/// `allocator` is NULL or outlives the process's use of it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFISetCustomAllocator(allocator: *mut TVMFFICustomAllocator) -> c_int {
    ffi_status("TVMFFISetCustomAllocator", || {
        CUSTOM_ALLOCATOR.store(allocator, Ordering::Release);
        Ok(())
    })
}

/// Converts a borrowed value into an owned one.
///
/// # Safety
/// `view` is a valid value; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIAnyViewToOwnedAny(
    view: *const TVMFFIAny,
    out: *mut TVMFFIAny,
) -> c_int {
    ffi_status("TVMFFIAnyViewToOwnedAny", || {
        // SAFETY: per the contract.
        let (view, out) = unsafe {
            (
                crate::args::non_null(view, "any_view")?,
                out_arg(out, "out")?,
            )
        };
        if view.type_index == kTVMFFIRawStr {
            // SAFETY: a raw string value holds a NUL-terminated string (or NULL, an error
            // reported by the general path below).
            let text = unsafe { view.payload.v_c_str };
            if !text.is_null() {
                // SAFETY: as above; the string is valid for the call.
                let bytes = unsafe { std::ffi::CStr::from_ptr(text) }.to_bytes();
                *out = tvm_ffi::String::try_from_bytes(bytes)?
                    .into_any()
                    .into_raw();
                return Ok(());
            }
        }
        // SAFETY: the value is valid for the call.
        let view = unsafe { AnyView::from_raw(*view) };
        *out = view.try_to_owned()?.into_raw();
        Ok(())
    })
}
