//! Python ints on the fast paths, with CPython's cached small ints read and made by address.
//!
//! CPython keeps one object for each int from -5 to 256 in a static array, and every int of
//! that range it makes is one of them. When the module loads it checks that the array is laid
//! out as expected (one object per value, evenly spaced by a power of two); if so, an exact
//! `int` at an address inside the array is read by its offset, and a small result is the
//! array's object, with no call into the interpreter's conversions (which the limited API
//! does not inline). Any other layout, on any interpreter, leaves those calls in place.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use pyo3::ffi;

/// The smallest cached int.
const FIRST_VALUE: i64 = -5;
/// The largest cached int.
const LAST_VALUE: i64 = 256;
/// How many ints are cached.
const COUNT: usize = (LAST_VALUE - FIRST_VALUE + 1) as usize;

/// The address of the object for [`FIRST_VALUE`] (0: not checked, or not laid out as expected).
static FIRST: AtomicUsize = AtomicUsize::new(0);
/// The bytes spanned by the array (0 while [`FIRST`] is 0: no address is inside).
static SPAN: AtomicUsize = AtomicUsize::new(0);
/// log2 of the distance between two cached objects.
static SHIFT: AtomicU32 = AtomicU32::new(0);

/// Checks the interpreter's small-int array and enables the reads by address if it is laid out
/// as expected (called once, at module load, with the interpreter lock held).
///
/// # Safety
/// The thread holds the interpreter lock.
pub(crate) unsafe fn init() {
    let mut objects = [std::ptr::null_mut::<ffi::PyObject>(); COUNT];
    // SAFETY: per the contract; each new reference made here is released below.
    unsafe {
        for (object, value) in objects.iter_mut().zip(FIRST_VALUE..) {
            *object = ffi::PyLong_FromLongLong(value);
        }
        let layout = layout_of(&objects);
        for &object in &objects {
            if object.is_null() {
                ffi::PyErr_Clear();
            } else {
                ffi::Py_DecRef(object);
            }
        }
        if let Some((first, shift)) = layout {
            SHIFT.store(shift, Ordering::Relaxed);
            SPAN.store(COUNT << shift, Ordering::Relaxed);
            FIRST.store(first, Ordering::Relaxed);
        }
    }
}

/// The first address and the shift of the objects made for each small int, if they are
/// consecutive elements of one array (and the interpreter hands out the same object again).
///
/// # Safety
/// The thread holds the interpreter lock; `objects` are the objects for the cached values in
/// order (NULL where making one failed).
unsafe fn layout_of(objects: &[*mut ffi::PyObject; COUNT]) -> Option<(usize, u32)> {
    let first = objects[0] as usize;
    let stride = (objects[1] as usize).checked_sub(first)?;
    if first == 0 || !stride.is_power_of_two() || stride < std::mem::size_of::<ffi::PyObject>() {
        return None;
    }
    let shift = stride.trailing_zeros();
    for (index, (&object, value)) in objects.iter().zip(FIRST_VALUE..).enumerate() {
        if object as usize != first + (index << shift) {
            return None;
        }
        // SAFETY: per the contract: the thread holds the lock; a new reference, released at once.
        let again = unsafe { ffi::PyLong_FromLongLong(value) };
        // SAFETY: as above.
        unsafe {
            if again.is_null() {
                ffi::PyErr_Clear();
            } else {
                ffi::Py_DecRef(again);
            }
        }
        if again != object {
            return None;
        }
    }
    Some((first, shift))
}

/// The value of `obj`, an object of type exactly `int`, if it fits in 64 bits (`None`, with no
/// error set, otherwise).
///
/// # Safety
/// `obj` is a live object of type `int`; the thread holds the interpreter lock.
#[inline(always)]
pub(super) unsafe fn exact_int_value(obj: *mut ffi::PyObject) -> Option<i64> {
    let offset = (obj as usize).wrapping_sub(FIRST.load(Ordering::Relaxed));
    if offset < SPAN.load(Ordering::Relaxed) {
        // An int inside the array is its element at this offset.
        return Some((offset >> SHIFT.load(Ordering::Relaxed)) as i64 + FIRST_VALUE);
    }
    // SAFETY: per the contract.
    unsafe { int_value_by_call(obj) }
}

/// [`exact_int_value`] through the interpreter's conversion.
///
/// # Safety
/// As for [`exact_int_value`].
#[inline]
unsafe fn int_value_by_call(obj: *mut ffi::PyObject) -> Option<i64> {
    let mut overflow = 0;
    // SAFETY: per the contract.
    unsafe {
        let value = ffi::PyLong_AsLongLongAndOverflow(obj, &mut overflow);
        if overflow != 0 || (value == -1 && !ffi::PyErr_Occurred().is_null()) {
            ffi::PyErr_Clear();
            return None;
        }
        Some(value)
    }
}

/// A new reference to the Python int for `value` (NULL with the error set if the interpreter
/// fails to make one).
///
/// # Safety
/// The thread holds the interpreter lock.
#[inline(always)]
pub(super) unsafe fn new_int(value: i64) -> *mut ffi::PyObject {
    let index = value.wrapping_sub(FIRST_VALUE) as u64 as usize;
    let offset = index << SHIFT.load(Ordering::Relaxed);
    // `index < COUNT` first: a large index shifted could wrap below the span.
    if index < COUNT && offset < SPAN.load(Ordering::Relaxed) {
        let object = (FIRST.load(Ordering::Relaxed) + offset) as *mut ffi::PyObject;
        // SAFETY: the cached object for `value`, alive for the interpreter's lifetime; the
        // thread holds the lock.
        unsafe { crate::refcount::incref(object) };
        return object;
    }
    // SAFETY: per the contract.
    unsafe { ffi::PyLong_FromLongLong(value) }
}
