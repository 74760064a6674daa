//! Reference counts changed in place, as CPython's own headers do it.
//!
//! The `abi3` build targets the stable ABI of 3.11. The 3.11 headers compile `Py_INCREF` and
//! `Py_DECREF` for that ABI to a plain increment and a decrement that calls `_Py_Dealloc` (part
//! of the stable ABI) at zero; PyO3 calls `_Py_IncRef`/`_Py_DecRef` instead, a call into the
//! interpreter for each. Later interpreters accept the in-place form from extensions of that ABI:
//! an immortal object's count (3.12 and later) starts far from zero, so balanced increments and
//! decrements leave it immortal. Free-threaded builds do not load abi3 extensions.
//!
//! A version-specific build (the 3.9 and 3.10 wheels) uses PyO3's inline forms, which are the
//! interpreter's own for that version.
//!
//! Only the hot paths use these, and only with the interpreter lock held.

use pyo3::ffi;

#[cfg(feature = "abi3")]
unsafe extern "C" {
    /// Deallocates an object whose count reached zero (stable ABI, "abi only").
    fn _Py_Dealloc(obj: *mut ffi::PyObject);
}

/// Adds a reference to `obj`.
///
/// # Safety
/// `obj` is a live object; the thread holds the interpreter lock.
#[inline(always)]
pub(crate) unsafe fn incref(obj: *mut ffi::PyObject) {
    #[cfg(feature = "abi3")]
    // SAFETY: per the contract: the lock serializes every change of the count.
    unsafe {
        (*obj).ob_refcnt += 1
    };
    #[cfg(not(feature = "abi3"))]
    // SAFETY: per the contract.
    unsafe {
        ffi::Py_INCREF(obj)
    };
}

/// Drops a reference to `obj`, deallocating it at zero.
///
/// # Safety
/// `obj` is a live object whose reference the caller gives up; the thread holds the
/// interpreter lock.
#[inline(always)]
pub(crate) unsafe fn decref(obj: *mut ffi::PyObject) {
    #[cfg(feature = "abi3")]
    // SAFETY: per the contract.
    unsafe {
        (*obj).ob_refcnt -= 1;
        if (*obj).ob_refcnt == 0 {
            _Py_Dealloc(obj);
        }
    }
    #[cfg(not(feature = "abi3"))]
    // SAFETY: per the contract.
    unsafe {
        ffi::Py_DECREF(obj)
    };
}
