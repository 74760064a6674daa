//! Any Python object as a runtime value: an `ffi.OpaquePyObject` that holds a reference to it
//! and gives the same object back, hashed and compared by the object it holds.

use std::ffi::c_void;

use pyo3::ffi;
use pyo3::prelude::*;
use tvm_ffi::abi;
use tvm_ffi::containers::hash::{self, AnyHashHooks};
use tvm_ffi::{Any, AnyView, OpaqueObj, Result};

/// Releases the reference an opaque object holds on its Python object.
unsafe extern "C" fn release_py_object(handle: *mut c_void) {
    tvm_ffi::boundary::ffi_boundary("the deleter of an opaque Python object", || {
        // After the interpreter has shut down the object is gone with it: nothing to release.
        let _ = Python::try_attach(|_py| {
            // SAFETY: the handle holds the strong reference taken in `opaque`.
            unsafe { ffi::Py_DecRef(handle.cast()) };
        });
    })
}

/// Wraps any Python object as an `ffi.OpaquePyObject` that gives the same object back.
pub(crate) fn opaque(obj: &Bound<'_, PyAny>) -> Result<Any> {
    let handle = obj.clone().into_ptr();
    // SAFETY: the object holds the strong reference taken just now, which `release_py_object`
    // gives back once (attaching to the interpreter, from whichever thread).
    unsafe { OpaqueObj::create(handle.cast(), release_py_object) }.map(Any::from)
}

/// The Python object an opaque object holds (a new reference to it).
pub(crate) fn opaque_object<'py>(py: Python<'py>, opaque: &OpaqueObj) -> Bound<'py, PyAny> {
    // SAFETY: opaque objects hold a strong reference to a Python object (the handle of
    // `ffi.OpaquePyObject` is a `PyObject*` by the ABI), alive while the opaque object lives.
    unsafe { Bound::from_borrowed_ptr(py, opaque.handle().cast()) }
}

/// Map hashing and equality of opaque Python objects: by the Python object they hold, so the
/// same Python object wrapped twice is one map key and is found by `in`.
struct OpaqueHooks;

impl OpaqueHooks {
    /// The Python object held by a value of type `ffi.OpaquePyObject`, by address (NULL for
    /// any other value).
    fn handle(value: AnyView<'_>) -> *mut c_void {
        value
            .as_object::<OpaqueObj>()
            .map_or(std::ptr::null_mut(), OpaqueObj::handle)
    }
}

impl AnyHashHooks for OpaqueHooks {
    fn hash(value: AnyView<'_>) -> i64 {
        OpaqueHooks::handle(value) as i64
    }

    fn equal(a: AnyView<'_>, b: AnyView<'_>) -> bool {
        OpaqueHooks::handle(a) == OpaqueHooks::handle(b)
    }
}

/// Makes the runtime compare and hash opaque Python objects by the object they hold.
pub(crate) fn register_hooks() -> Result<()> {
    hash::register_hooks::<OpaqueHooks>(abi::kTVMFFIOpaquePyObject)
}
