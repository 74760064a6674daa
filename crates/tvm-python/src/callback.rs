//! Python callables as runtime functions.
//!
//! A callable passed as an argument gets a function that is lent for the call ([`lend`]): when
//! the call returns and no native code kept the function, its reference to the callable is
//! dropped and the function is parked for the next argument that needs one, so passing a Python
//! function to a native function again and again allocates nothing. A callable converted for
//! good (`convert`, `register_global_func`) gets a function of its own.

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, Ordering};

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tvm_ffi::abi::TVMFFIAny;
use tvm_ffi::{Any, AnyView, Function};

use crate::convert::{any_to_py, plain_from_python, plain_to_python, py_to_any};
use crate::errors::{error_from_py, raise_error};
use crate::function_type::VectorCall;
use crate::refcount;

/// The Python callable a function calls: one strong reference, or NULL while the function is
/// parked for reuse.
///
/// Every access but the final drop happens with the interpreter lock held, which orders them:
/// plain loads and stores suffice (a swap would be a locked instruction on every loan).
struct Target(AtomicPtr<ffi::PyObject>);

impl Target {
    /// A target holding a new strong reference to `callable`.
    fn new(callable: &Bound<'_, PyAny>) -> Arc<Target> {
        Arc::new(Target(AtomicPtr::new(callable.clone().into_ptr())))
    }

    /// Points a parked (empty) target at `callable`, with a new strong reference.
    #[inline]
    fn set(&self, callable: &Bound<'_, PyAny>) {
        debug_assert!(
            self.0.load(Ordering::Relaxed).is_null(),
            "only an empty target is set"
        );
        // SAFETY: a live object, and the thread holds the interpreter lock (`Bound`).
        unsafe { refcount::incref(callable.as_ptr()) };
        self.0.store(callable.as_ptr(), Ordering::Release);
    }

    /// Drops the reference to the callable (the thread is attached: `py`).
    fn clear(&self, _py: Python<'_>) {
        let callable = self.0.load(Ordering::Relaxed);
        self.0.store(std::ptr::null_mut(), Ordering::Release);
        if !callable.is_null() {
            // SAFETY: the target owned this strong reference; the thread is attached.
            unsafe { refcount::decref(callable) };
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
/// comes back owned (stored straight into the caller's result slot), and an exception becomes
/// an error that carries it.
fn function_for(target: Arc<Target>) -> Function {
    Function::from_packed_into(move |args: &[AnyView<'_>], result: &mut Any| {
        // Every recursion between Python and native code passes through a callback (a call from
        // Python runs no Python code of its own on its fast path), so the native stack is
        // checked here.
        let attached = crate::gil_holder::check_callback_thread("a Python callback")
            .map_err(|message| tvm_ffi::Error::new(tvm_ffi::ErrorKind::RuntimeError, message))?;
        crate::stack::check_in_callback("in a Python callback", attached)?;
        let run = |py: Python<'_>| {
            let _python = crate::gil_holder::Holding::run_python();
            let _counted = crate::exit_gate::enter_callback();
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
            // This thread is inside a native call that holds the interpreter lock. Plain
            // arguments and results take raw interpreter calls; anything else runs attached
            // in PyO3's count (the call may have come through the fast path, which PyO3 does
            // not count), so that objects released by the callback are freed at once.
            // SAFETY: the thread holds the interpreter lock.
            if let Some(outcome) = unsafe { call_plain(&target, args, result) } {
                return outcome;
            }
            Some(Python::attach(run))
        } else {
            Python::try_attach(run)
        };
        // A callback reached while the interpreter shuts down (from a native finalizer, say)
        // cannot run; it fails quietly instead of aborting the process.
        *result = outcome.unwrap_or_else(|| {
            Err(tvm_ffi::Error::with_backtrace(
                tvm_ffi::ErrorKind::RuntimeError,
                "a Python callback was called while the interpreter is shutting down",
                "",
            ))
        })?;
        Ok(())
    })
}

/// The most arguments [`call_plain`] takes.
const MAX_PLAIN_ARGS: usize = 3;

/// Calls the target's callable with plain arguments (see [`plain_to_python`]) by raw interpreter
/// calls, and converts a plain result back the same way (any other result, or an exception,
/// attached) into `result`: `None`, with nothing left done, when an argument is not plain or the
/// target is empty.
///
/// # Safety
/// The thread holds the interpreter lock.
unsafe fn call_plain(
    target: &Target,
    args: &[AnyView<'_>],
    result: &mut Any,
) -> Option<tvm_ffi::Result<()>> {
    let count = args.len();
    if count > MAX_PLAIN_ARGS {
        return None;
    }
    let callable = target.0.load(Ordering::Acquire);
    if callable.is_null() {
        return None;
    }
    let _python = crate::gil_holder::Holding::run_python();
    let _counted = crate::exit_gate::enter_callback();
    let mut objects = [std::ptr::null_mut::<ffi::PyObject>(); MAX_PLAIN_ARGS];
    // SAFETY: the thread holds the interpreter lock; the target holds a strong reference to the
    // callable while the function can be called; each object made here is released once below.
    unsafe {
        for (index, arg) in args.iter().enumerate() {
            match plain_to_python(arg.as_raw()) {
                Some(object) if !object.is_null() => objects[index] = object,
                made => {
                    release(&objects[..index]);
                    // Not plain: the general path takes the call, nothing done here.
                    return made.map(|_| Err(pending_error()));
                }
            }
        }
        let returned = call_objects(callable, &objects[..count]);
        release(&objects[..count]);
        if returned.is_null() {
            return Some(Err(pending_error()));
        }
        let outcome = match plain_from_python(returned) {
            Some(value) => {
                *result = value;
                Ok(())
            }
            None => other_from_python(returned).map(|value| *result = value),
        };
        refcount::decref(returned);
        Some(outcome)
    }
}

/// The interpreter's `PyObject_Vectorcall` if it exports it (looked up at module load), or NULL.
/// Every supported version exports it, but it is part of the stable ABI only from 3.12, so this
/// abi3 extension (3.11 and later) does not link to it.
static VECTORCALL: AtomicPtr<std::ffi::c_void> = AtomicPtr::new(std::ptr::null_mut());

/// Looks up `PyObject_Vectorcall` (at module load; without it callbacks take the varargs call).
pub(crate) fn find_vectorcall() {
    // SAFETY: a lookup by NUL-terminated name in the process's global scope.
    let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"PyObject_Vectorcall".as_ptr()) };
    VECTORCALL.store(symbol, Ordering::Relaxed);
}

/// Calls `callable` with up to [`MAX_PLAIN_ARGS`] positional arguments: a new reference, or NULL
/// with the error set. `PyObject_Vectorcall` where found (no argument tuple, no varargs walk),
/// the stable ABI's calls otherwise.
///
/// # Safety
/// The thread holds the interpreter lock; `callable` and `objects` are live.
unsafe fn call_objects(
    callable: *mut ffi::PyObject,
    objects: &[*mut ffi::PyObject],
) -> *mut ffi::PyObject {
    let vectorcall = VECTORCALL.load(Ordering::Relaxed);
    // SAFETY: per the contract; a non-NULL `vectorcall` is the interpreter's function, of the
    // documented signature, called with a count (no offset flag, no keywords) matching `objects`.
    unsafe {
        if !vectorcall.is_null() {
            let vectorcall: VectorCall = std::mem::transmute(vectorcall);
            return vectorcall(
                callable,
                objects.as_ptr(),
                objects.len(),
                std::ptr::null_mut(),
            );
        }
        let null = std::ptr::null_mut::<ffi::PyObject>();
        match *objects {
            [] => ffi::PyObject_CallNoArgs(callable),
            [a] => ffi::PyObject_CallFunctionObjArgs(callable, a, null),
            [a, b] => ffi::PyObject_CallFunctionObjArgs(callable, a, b, null),
            [a, b, c] => ffi::PyObject_CallFunctionObjArgs(callable, a, b, c, null),
            _ => unreachable!("at most {MAX_PLAIN_ARGS} arguments"),
        }
    }
}

/// Releases the objects made for [`call_plain`]'s arguments.
///
/// # Safety
/// The thread holds the interpreter lock; each entry is a reference owned by the caller.
unsafe fn release(objects: &[*mut ffi::PyObject]) {
    for &object in objects {
        // SAFETY: per the contract.
        unsafe { refcount::decref(object) };
    }
}

/// The pending Python exception as a runtime error (attached).
#[cold]
#[inline(never)]
fn pending_error() -> tvm_ffi::Error {
    Python::attach(|py| error_from_py(py, PyErr::fetch(py)))
}

/// A callback's result of another than a plain type, converted attached.
#[cold]
#[inline(never)]
fn other_from_python(result: *mut ffi::PyObject) -> tvm_ffi::Result<Any> {
    Python::attach(|py| {
        // SAFETY: a live object; the caller keeps its reference until this returns.
        let result = unsafe { Bound::from_borrowed_ptr(py, result) };
        py_to_any(&result).map_err(|err| error_from_py(py, err))
    })
}

/// Calls `callable` with runtime arguments and converts its result back: the general path, for
/// arguments and results other than plain values ([`call_plain`] takes those), through PyO3.
fn call_python(callable: &Bound<'_, PyAny>, args: &[AnyView<'_>]) -> PyResult<Any> {
    let py = callable.py();
    let objects = args
        .iter()
        .map(|arg| any_to_py(py, arg.try_to_owned().map_err(|e| raise_error(py, e))?))
        .collect::<PyResult<Vec<_>>>()?;
    let result = callable.call1(PyTuple::new(py, objects)?)?;
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
static PARKED: Parked = Parked(UnsafeCell::new(None));

/// A slot for one lent function, touched only with the interpreter lock held (a `Python` token
/// is required), which serializes every access: no lock of its own.
struct Parked(UnsafeCell<Option<Lent>>);

// SAFETY: see `Parked`: each access holds the interpreter lock and completes without running
// Python code (taking leaves nothing to drop; putting only fills an empty slot).
unsafe impl Sync for Parked {}

impl Parked {
    /// Takes the parked function, if any.
    #[inline]
    fn take(&self, _py: Python<'_>) -> Option<Lent> {
        // SAFETY: see `Parked`.
        unsafe { (*self.0.get()).take() }
    }

    /// Parks `lent` if the slot is empty (otherwise `lent` is dropped by the caller).
    fn put(&self, _py: Python<'_>, lent: Lent) -> Option<Lent> {
        // SAFETY: see `Parked`; nothing is dropped inside the access.
        let slot = unsafe { &mut *self.0.get() };
        if slot.is_some() {
            return Some(lent);
        }
        *slot = Some(lent);
        None
    }
}

/// A function calling `callable`, lent until [`Lent::give_back`]: the parked one pointed at
/// `callable`, or a new one. (Inline: a caller that stores the loan gets it built in place,
/// never copied out of a returned value.)
#[inline]
pub(crate) fn lend(callable: &Bound<'_, PyAny>) -> Lent {
    match PARKED.take(callable.py()) {
        Some(lent) => {
            lent.target.set(callable);
            lent
        }
        None => new_loan(callable),
    }
}

/// [`lend`] when no function is parked.
#[cold]
#[inline(never)]
fn new_loan(callable: &Bound<'_, PyAny>) -> Lent {
    let target = Target::new(callable);
    Lent {
        function: function_for(target.clone()).into(),
        target,
    }
}

impl Lent {
    /// A view of the function, valid while `self` lives.
    #[inline]
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
        // A slot already taken (a second callable argument's loan) leaves this one to drop.
        drop(PARKED.put(py, self));
    }
}
