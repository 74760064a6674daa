//! The raw entry of a call from Python: a call whose arguments are all plain values (read by
//! [`plain::read`], the same dispatch the general path starts with), wrapped runtime objects,
//! numpy arrays or a callable of a type seen before, made with raw interpreter calls only.
//!
//! It runs outside PyO3's entry trampoline, so PyO3 does not count the thread as attached: a
//! `Py<T>` dropped here would be queued for PyO3's next entry instead of released. Nothing on
//! this path makes or drops one; whatever could (an error, a result of another type) is handed
//! to [`Python::attach`], which counts the thread as attached for that part. An argument the
//! path does not take sends the whole call, before anything has run, to the general path.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicPtr, Ordering};

use pyo3::ffi;
use pyo3::prelude::*;
use tvm_ffi::abi::{self, TVMFFIAny};
use tvm_ffi::string::MAX_SMALL_LEN;
use tvm_ffi::{Any, AnyView, Function};

use super::ints::new_int;
use super::plain::{self, Plain};
use super::{Kind, any_to_py, cached_kind};
use crate::callback::{Lent, lend};
use crate::errors::raise_error;
use crate::objects::PyObjectRef;
use crate::refcount;

/// The most arguments a fast call takes (more go the general way). The per-call arrays sized by
/// it are left uninitialized, so a call pays only for the arguments it has.
const MAX_ARGS: usize = 64;

/// `tvm.ffi.Object`, set when the module loads (NULL before: no wrapped object is fast then).
static OBJECT_TYPE: AtomicPtr<ffi::PyTypeObject> = AtomicPtr::new(std::ptr::null_mut());

/// Records the type of wrapped runtime objects (at module load).
pub(crate) fn set_object_type(ty: *mut ffi::PyTypeObject) {
    OBJECT_TYPE.store(ty, Ordering::Relaxed);
}

/// Strings (longer than the inline ones) and tensors made for the arguments, dropped after
/// the call.
struct Owned {
    items: [MaybeUninit<Any>; MAX_ARGS],
    len: usize,
}

impl Owned {
    /// Drops the strings (out of line: most calls make none).
    #[inline(never)]
    fn release(&mut self) {
        for item in &mut self.items[..self.len] {
            // SAFETY: the first `len` items were written by `view` and are dropped once here.
            unsafe { item.assume_init_drop() };
        }
        self.len = 0;
    }
}

impl Drop for Owned {
    #[inline]
    fn drop(&mut self) {
        if self.len != 0 {
            self.release();
        }
    }
}

/// Writes the view of one argument into `slot`: `false` (and nothing written) when the argument
/// needs the general path (which then also raises any error the argument causes). Leaves no
/// error set. The view is stored where the callee reads it, never built elsewhere and copied:
/// a 16-byte copy of a value just written as two 8-byte halves stalls store-to-load forwarding.
///
/// # Safety
/// `obj` is a live object; the thread holds the interpreter lock.
#[inline(always)]
unsafe fn view(
    py: Python<'_>,
    obj: *mut ffi::PyObject,
    slot: &mut MaybeUninit<TVMFFIAny>,
    owned: &mut Owned,
    lent: &mut Option<Lent>,
) -> bool {
    // SAFETY: per the contract.
    let ty = unsafe { ffi::Py_TYPE(obj) };
    // SAFETY: per the contract; `ty` is the object's type.
    let Some(plain) = (unsafe { plain::read(obj, ty) }) else {
        // SAFETY: as above.
        return unsafe { object_view(py, obj, ty, slot, owned, lent) };
    };
    // Longer bytes are borrowed on the general path, which keeps a byte array for the view.
    if matches!(plain, Plain::Bytes(bytes) if bytes.len() > MAX_SMALL_LEN) {
        return false;
    }
    // A string that does not fit in memory takes the general path, which raises `MemoryError`.
    let Ok(value) = plain.to_any() else {
        return false;
    };
    if !value.is_object() {
        slot.write(value.into_raw());
        return true;
    }
    slot.write(*value.as_raw());
    owned.items[owned.len].write(value);
    owned.len += 1;
    true
}

/// [`view`] for the other types: a wrapped runtime object, or a Python callable (of a type
/// classified before), which borrows the lent function (out of line: the plain values stay in
/// a small frame).
///
/// # Safety
/// As for [`view`]; `ty` is the type of `obj`.
#[inline(never)]
unsafe fn object_view(
    py: Python<'_>,
    obj: *mut ffi::PyObject,
    ty: *mut ffi::PyTypeObject,
    slot: &mut MaybeUninit<TVMFFIAny>,
    owned: &mut Owned,
    lent: &mut Option<Lent>,
) -> bool {
    let object_type = OBJECT_TYPE.load(Ordering::Relaxed);
    if object_type.is_null() {
        return false;
    }
    // SAFETY: per the contract.
    unsafe {
        let bound = Borrowed::from_ptr(py, obj);
        // The type of the last callable first (never a wrapped object's or numpy's type: the
        // kind cache holds neither).
        if lent.is_none() && LAST_CALLABLE_TYPE.load(Ordering::Relaxed) == ty {
            slot.write(lend_for(&bound, lent));
            return true;
        }
        if crate::dlpack::is_numpy_array(&bound) {
            // A numpy array its struct or buffer describes, as a tensor sharing its memory;
            // any other goes the general way. (A failed buffer export drops its error here,
            // queued for PyO3's next entry: the general path, entered at once.)
            let Some(tensor) = crate::dlpack::from_numpy_array(&bound) else {
                return false;
            };
            let tensor: Any = tensor.into();
            slot.write(*tensor.as_raw());
            owned.items[owned.len].write(tensor);
            owned.len += 1;
            return true;
        }
        if ffi::PyType_IsSubtype(ty, object_type) == 0 {
            if lent.is_none() && is_callable_type(py, ty) {
                slot.write(lend_for(&bound, lent));
                return true;
            }
            return false;
        }
        let wrapped = bound.cast_unchecked::<PyObjectRef>();
        let value = wrapped.get().any();
        // An instance not bound to an object (made by hand) raises on the general path.
        if value.is_none() {
            return false;
        }
        slot.write(*value.as_raw());
        true
    }
}

/// Lends the function for `callable` into `lent` and returns its view.
#[inline]
fn lend_for(callable: &Bound<'_, PyAny>, lent: &mut Option<Lent>) -> TVMFFIAny {
    let loan = lend(callable);
    let view = loan.view();
    *lent = Some(loan);
    view
}

/// The last type found to be a callable's in the kind cache (types in the cache stay alive, so
/// the address names one type): a loop passing the same kind of function skips the lookup.
static LAST_CALLABLE_TYPE: AtomicPtr<ffi::PyTypeObject> = AtomicPtr::new(std::ptr::null_mut());

/// Whether `ty` was classified as a callable's type.
#[inline]
fn is_callable_type(py: Python<'_>, ty: *mut ffi::PyTypeObject) -> bool {
    if LAST_CALLABLE_TYPE.load(Ordering::Relaxed) == ty {
        return true;
    }
    let callable = cached_kind(py, ty) == Some(Kind::Callable);
    if callable {
        LAST_CALLABLE_TYPE.store(ty, Ordering::Relaxed);
    }
    callable
}

/// Calls `function` without arguments: the new result, or NULL with the error set. (Its own
/// small frame: [`try_call`]'s argument arrays are set up out of line.)
///
/// # Safety
/// The thread holds the interpreter lock.
#[inline]
pub(crate) unsafe fn call_without_args(function: &Function) -> *mut ffi::PyObject {
    let mut result = Any::none();
    let status = {
        let _holding = crate::gil_holder::Holding::enter();
        function.call_packed_into(&[], &mut result)
    };
    match status {
        // SAFETY: per the contract.
        Ok(()) => unsafe { to_python(&mut result) },
        Err(error) => raise(error),
    }
}

/// Calls `function` with `args` if every argument takes the fast path: the new result, or NULL
/// with the error set; `None` (and nothing done) when some argument does not. (Out of line: its
/// argument arrays would otherwise make every caller's frame large, the no-argument call's too.)
///
/// # Safety
/// `args` are live objects; the thread holds the interpreter lock.
#[inline(never)]
pub(crate) unsafe fn try_call(
    py: Python<'_>,
    function: &Function,
    args: &[*mut ffi::PyObject],
) -> Option<*mut ffi::PyObject> {
    if args.len() > MAX_ARGS {
        return None;
    }
    let mut owned = Owned {
        items: [const { MaybeUninit::uninit() }; MAX_ARGS],
        len: 0,
    };
    // The function lent for a callable argument.
    let mut lent = None;
    let mut slots = [const { MaybeUninit::<TVMFFIAny>::uninit() }; MAX_ARGS];
    for (slot, &arg) in slots.iter_mut().zip(args) {
        // SAFETY: per the contract.
        if !unsafe { view(py, arg, slot, &mut owned, &mut lent) } {
            if let Some(loan) = lent.take() {
                loan.give_back(py);
            }
            return None;
        }
    }
    // SAFETY: the first `args.len()` slots were written above; `AnyView` is a transparent
    // `TVMFFIAny`; the views borrow `args` (a `str`'s UTF-8 form lives as long as the `str`) and
    // `owned`, both alive for the call.
    let views =
        unsafe { std::slice::from_raw_parts(slots.as_ptr().cast::<AnyView<'_>>(), args.len()) };
    let mut result = Any::none();
    let status = {
        let _holding = crate::gil_holder::Holding::enter();
        function.call_packed_into(views, &mut result)
    };
    // The strings are dropped in place (a move of `owned` would copy it).
    if owned.len != 0 {
        owned.release();
    }
    if let Some(loan) = lent.take() {
        loan.give_back(py);
    }
    Some(match status {
        // SAFETY: the thread holds the interpreter lock.
        Ok(()) => unsafe { to_python(&mut result) },
        Err(error) => raise(error),
    })
}

/// A returned value as a new Python object: plain values by raw interpreter calls (read in
/// place, see [`Function::call_packed_into`]), the rest through [`any_to_py`] (attached; taken
/// out of `value`, which is left none).
///
/// # Safety
/// The thread holds the interpreter lock.
#[inline(always)]
unsafe fn to_python(value: &mut Any) -> *mut ffi::PyObject {
    // SAFETY: per the contract.
    match unsafe { plain_to_python(value.as_raw()) } {
        Some(object) => object,
        None => other_to_python(std::mem::replace(value, Any::none())),
    }
}

/// A plain value (`None`, bool, int, float, string, bytes) as a new Python object (NULL with
/// the error set if the interpreter fails to make it), or `None` for any other value. The
/// hottest (`None`, int, float) are matched inline, the rest out of line.
///
/// # Safety
/// `raw` is a live value; the thread holds the interpreter lock.
#[inline(always)]
pub(crate) unsafe fn plain_to_python(raw: &TVMFFIAny) -> Option<*mut ffi::PyObject> {
    // SAFETY: each arm reads the payload member its type index selects; the interpreter calls
    // return a new reference, or NULL with the error set.
    unsafe {
        Some(match raw.type_index {
            abi::kTVMFFINone => {
                let none = ffi::Py_None();
                refcount::incref(none);
                none
            }
            abi::kTVMFFIInt => new_int(raw.payload.v_int64),
            abi::kTVMFFIFloat => ffi::PyFloat_FromDouble(raw.payload.v_float64),
            _ => return other_plain_to_python(raw),
        })
    }
}

/// [`plain_to_python`] for bools, strings and bytes.
///
/// # Safety
/// As for [`plain_to_python`].
#[inline(never)]
unsafe fn other_plain_to_python(raw: &TVMFFIAny) -> Option<*mut ffi::PyObject> {
    // SAFETY: each arm reads the payload member its type index selects, in place (a copy of the
    // 16 bytes a callee has just stored in parts would stall store-to-load forwarding); the
    // interpreter calls return a new reference, or NULL with the error set.
    unsafe {
        Some(match raw.type_index {
            abi::kTVMFFIBool => {
                ffi::PyBool_FromLong(std::ffi::c_long::from(raw.payload.v_int64 != 0))
            }
            abi::kTVMFFISmallStr | abi::kTVMFFIStr => {
                let bytes = tvm_ffi::string::bytes_of_raw(raw).unwrap_or_default();
                // Bytes that are not UTF-8 survive as surrogate escapes, as on the general path.
                ffi::PyUnicode_DecodeUTF8(
                    bytes.as_ptr().cast(),
                    bytes.len() as ffi::Py_ssize_t,
                    c"surrogateescape".as_ptr(),
                )
            }
            abi::kTVMFFISmallBytes | abi::kTVMFFIBytes => {
                let bytes = tvm_ffi::string::bytes_of_raw(raw).unwrap_or_default();
                ffi::PyBytes_FromStringAndSize(
                    bytes.as_ptr().cast(),
                    bytes.len() as ffi::Py_ssize_t,
                )
            }
            _ => return None,
        })
    }
}

/// A Python object of a plain built-in type (see [`plain::read`]) as an owning value, or `None`
/// (and no error set) for any other object.
///
/// # Safety
/// `obj` is a live object; the thread holds the interpreter lock.
#[inline]
pub(crate) unsafe fn plain_from_python(obj: *mut ffi::PyObject) -> Option<Any> {
    // SAFETY: per the contract, with the object's own type.
    unsafe { plain::read(obj, ffi::Py_TYPE(obj)) }.and_then(|plain| plain.to_any().ok())
}

/// [`to_python`] for the other types.
#[cold]
#[inline(never)]
fn other_to_python(value: Any) -> *mut ffi::PyObject {
    Python::attach(|py| match any_to_py(py, value) {
        Ok(object) => object.into_ptr(),
        Err(err) => {
            err.restore(py);
            std::ptr::null_mut()
        }
    })
}

/// Raises the Python exception for a runtime error: NULL with the error set.
#[cold]
#[inline(never)]
fn raise(error: tvm_ffi::Error) -> *mut ffi::PyObject {
    Python::attach(|py| raise_error(py, error).restore(py));
    std::ptr::null_mut()
}
