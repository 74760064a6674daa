//! Opaque objects (`ffi.OpaquePyObject`, index 74): a foreign handle (in practice a Python
//! object) wrapped as an object, released by the deleter it was created with when the object
//! dies. The runtime never looks inside the handle; it only hands it back.

use std::ffi::c_void;

use crate::abi::{self, TVMFFIOpaqueObjectCell, kTVMFFIOpaquePyObject};
use crate::error::{Error, ErrorKind, Result};
use crate::object::{Object, ObjectCore, ObjectRef};

/// The view of an opaque object shared by every producer: header plus the handle cell (the
/// producer may keep more after it, such as its deleter).
#[repr(C)]
pub struct OpaqueObj {
    base: Object,
    cell: TVMFFIOpaqueObjectCell,
}

// SAFETY: the handle is a plain address owned by the object; what it may be used for, and on
// which thread, is the business of the layer that made it (as in C).
unsafe impl Send for OpaqueObj {}
// SAFETY: as above; the object offers no mutation.
unsafe impl Sync for OpaqueObj {}

// SAFETY: repr(C) with the header first; `ffi.OpaquePyObject` has the static index 74, and no
// type derives from it.
unsafe impl ObjectCore for OpaqueObj {
    const TYPE_KEY: &'static str = "ffi.OpaquePyObject";
    fn type_index() -> i32 {
        kTVMFFIOpaquePyObject
    }
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFIOpaquePyObject
    }
}

/// A strong reference to an opaque object.
pub type Opaque = ObjectRef<OpaqueObj>;

impl OpaqueObj {
    /// The foreign handle the object holds (borrowed: the object keeps it until it dies).
    pub fn handle(&self) -> *mut c_void {
        self.cell.handle
    }

    /// Wraps `handle` as a new opaque object, which calls `deleter(handle)` once when it dies.
    /// If the object cannot be made, `deleter(handle)` runs before the error returns, so the
    /// handle is given up either way.
    ///
    /// # Safety
    /// Calling `deleter(handle)` once, on whichever thread drops the last reference, is sound.
    pub unsafe fn create(
        handle: *mut c_void,
        deleter: unsafe extern "C" fn(*mut c_void),
    ) -> Result<Opaque> {
        let mut out = std::ptr::null_mut();
        // SAFETY: `out` is writable; the deleter contract is forwarded from the caller.
        let rc = unsafe {
            abi::TVMFFIObjectCreateOpaque(handle, kTVMFFIOpaquePyObject, Some(deleter), &mut out)
        };
        if rc != 0 || out.is_null() {
            // SAFETY: no object took the handle, so it is released here, once.
            unsafe { deleter(handle) };
            return Err(Error::take_raised_or(
                ErrorKind::RuntimeError,
                "TVMFFIObjectCreateOpaque",
            ));
        }
        // SAFETY: a successful create hands over one reference to a new opaque object.
        Ok(unsafe { ObjectRef::from_raw(out.cast()) })
    }
}
