//! Python callables as runtime functions.
//!
//! A callable passed as an argument gets a function that is lent for the call ([`lend`]): when
//! the call returns and no native code kept the function, its reference to the callable is
//! dropped and the function is parked for the next argument that needs one, so passing a Python
//! function to a native function again and again allocates nothing. A callable converted for
//! good (`convert`, `register_global_func`) gets a function of its own.

use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::ffi;
use pyo3::prelude::*;
use tvm_ffi::abi::TVMFFIAny;
use tvm_ffi::{Any, AnyView, Function};

use crate::convert::{any_to_py, py_to_any};
use crate::errors::{error_from_py, raise_error};
use crate::function_type::ARGUMENTS_OFFSET;

// `PyObject_Vectorcall` is exported by the interpreter since 3.11 but declared by the limited
// API only from 3.12 (the API this abi3 extension is built against is 3.11's).
unsafe extern "C" {
    fn PyObject_Vectorcall(
        callable: *mut ffi::PyObject,
        args: *const *mut ffi::PyObject,
        nargsf: usize,
        kwnames: *mut ffi::PyObject,
    ) -> *mut ffi::PyObject;
}

/// The Python callable a function calls: one strong reference, or NULL while the function is
/// parked for reuse.
struct Target(AtomicPtr<ffi::PyObject>);

impl Target {
    /// A target holding a new strong reference to `callable`.
    fn new(callable: &Bound<'_, PyAny>) -> Arc<Target> {
        Arc::new(Target(AtomicPtr::new(callable.clone().into_ptr())))
    }

    /// Points a parked (empty) target at `callable`, with a new strong reference.
    fn set(&self, callable: &Bound<'_, PyAny>) {
        let previous = self.0.swap(callable.clone().into_ptr(), Ordering::AcqRel);
        debug_assert!(previous.is_null(), "only an empty target is set");
    }

    /// Drops the reference to the callable (the thread is attached: `py`).
    fn clear(&self, _py: Python<'_>) {
        let callable = self.0.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !callable.is_null() {
            // SAFETY: the target owned this strong reference; the thread is attached.
            unsafe { ffi::Py_DecRef(callable) };
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let callable = std::mem::replace(self.0.get_mut(), std::ptr::null_mut());
        if !callable.is_null() {
            // Released on any thread, attached for the moment of the release (after the
            // interpreter has shut down the object is gone with it).
            let _ = Python::try_attach(|_py| {
                // SAFETY: the target owned this strong reference; the thread is attached.
                unsafe { ffi::Py_DecRef(callable) }
            });
        }
    }
}

/// A function calling the callable of `target`: arguments become Python objects, the result
/// comes back owned, and an exception becomes an error that carries it.
fn function_for(target: Arc<Target>) -> Function {
    Function::from_packed(move |args: &[AnyView<'_>]| {
        let attached = crate::holder::check_callback_thread("a Python callback")
            .map_err(|message| tvm_ffi::Error::new(tvm_ffi::ErrorKind::RuntimeError, message))?;
        let run = |py: Python<'_>| {
            let _python = crate::holder::Holding::run_python();
            let callable = target.0.load(Ordering::Acquire);
            if callable.is_null() {
                return Err(tvm_ffi::Error::new(
                    tvm_ffi::ErrorKind::RuntimeError,
                    "a Python callback was called after the call that lent it returned",
                ));
            }
            // SAFETY: the target holds a strong reference while the function can be called.
            let callable = unsafe { Bound::from_borrowed_ptr(py, callable) };
            call_python(&callable, args).map_err(|err| error_from_py(py, err))
        };
        let outcome = if attached {
            // SAFETY: this thread is inside a native call that holds the interpreter lock.
            Some(run(unsafe { Python::assume_attached() }))
        } else {
            Python::try_attach(run)
        };
        // A callback reached while the interpreter shuts down (from a native finalizer, say)
        // cannot run; it fails quietly instead of aborting the process.
        outcome.unwrap_or_else(|| {
            Err(tvm_ffi::Error::with_backtrace(
                tvm_ffi::ErrorKind::RuntimeError,
                "a Python callback was called while the interpreter is shutting down",
                "",
            ))
        })
    })
}

/// Argument objects of one vectorcall: slot 0 is left free for the callee
/// (`PY_VECTORCALL_ARGUMENTS_OFFSET`: a bound method puts `self` there without copying), the
/// others hold strong references, or NULL where none was written yet.
struct PyArgs<'a>(&'a mut [*mut ffi::PyObject]);

impl Drop for PyArgs<'_> {
    fn drop(&mut self) {
        for &object in &self.0[1..] {
            if !object.is_null() {
                // SAFETY: a strong reference written in `call_python`, which runs (and drops
                // this) attached to the interpreter.
                unsafe { ffi::Py_DecRef(object) };
            }
        }
    }
}

/// Calls `callable` with runtime arguments and converts its result back.
fn call_python(callable: &Bound<'_, PyAny>, args: &[AnyView<'_>]) -> PyResult<Any> {
    const INLINE: usize = 6;
    let py = callable.py();
    let mut inline = [std::ptr::null_mut(); INLINE + 1];
    let mut heap = Vec::new();
    let objects = PyArgs(if args.len() <= INLINE {
        &mut inline[..=args.len()]
    } else {
        heap.resize(args.len() + 1, std::ptr::null_mut());
        &mut heap
    });
    for (slot, arg) in objects.0[1..].iter_mut().zip(args) {
        let owned = arg.try_to_owned().map_err(|e| raise_error(py, e))?;
        *slot = any_to_py(py, owned)?.into_ptr();
    }
    // SAFETY: slots 1 to `args.len()` hold live objects and slot 0 is free for the callee, as
    // the offset flag says; the result is a new reference or NULL with an error.
    let result = unsafe {
        let raw = PyObject_Vectorcall(
            callable.as_ptr(),
            objects.0.as_ptr().add(1),
            args.len() | ARGUMENTS_OFFSET,
            std::ptr::null_mut(),
        );
        Bound::from_owned_ptr_or_err(py, raw)?
    };
    py_to_any(&result)
}

/// A function of its own for a Python callable.
pub(crate) fn callable_to_function(callable: &Bound<'_, PyAny>) -> Function {
    function_for(Target::new(callable))
}

/// A function lent to one call for a Python callable argument (see the module docs).
pub(crate) struct Lent {
    /// The function (an `Any`, so that the call can view it as it is).
    function: Any,
    target: Arc<Target>,
}

/// The parked function, if any: one is enough for the common case of one callable argument.
static PARKED: Mutex<Option<Lent>> = Mutex::new(None);

/// A function calling `callable`, lent until [`Lent::give_back`]: the parked one pointed at
/// `callable`, or a new one.
pub(crate) fn lend(callable: &Bound<'_, PyAny>) -> Lent {
    let parked = PARKED.try_lock().ok().and_then(|mut slot| slot.take());
    match parked {
        Some(lent) => {
            lent.target.set(callable);
            lent
        }
        None => {
            let target = Target::new(callable);
            Lent {
                function: function_for(target.clone()).into(),
                target,
            }
        }
    }
}

impl Lent {
    /// A view of the function, valid while `self` lives.
    pub(crate) fn view(&self) -> TVMFFIAny {
        *self.function.as_raw()
    }

    /// Ends the loan: a function that native code did not keep drops its callable and is parked
    /// for the next loan; one that was kept lives on as its owners' (still calling the callable).
    pub(crate) fn give_back(self, py: Python<'_>) {
        // One strong reference (this one) and no weak reference besides the strong refs' own:
        // nothing else can reach the function, so it can be pointed at another callable.
        let unique = self
            .function
            .as_object::<tvm_ffi::Object>()
            .is_some_and(|header| header.strong_count() == 1 && header.weak_count() == 1);
        if !unique {
            return;
        }
        self.target.clear(py);
        if let Ok(mut slot) = PARKED.try_lock() {
            if slot.is_none() {
                *slot = Some(self);
            }
        }
    }
}
