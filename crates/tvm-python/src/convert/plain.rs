//! The plain built-in values, read by the exact type of their object: the one type-keyed
//! dispatch every conversion of a Python value starts with, whichever entry it came through (a
//! call's raw path in [`super::fast`], the general path in [`super::py_to_view`] and
//! [`super::py_to_any`], a callback's result).
//!
//! `None`, `bool`, an `int` that fits in 64 bits, a `float`, a `str` with a UTF-8 form and
//! `bytes` are read with raw interpreter calls: no lookup, no Python code, no error set. Any
//! other object, including an `int` past 64 bits, a `str` with lone surrogates and subclasses of
//! the built-ins, is left to the conversions by kind, which handle it or raise the right error.

use pyo3::ffi;
use tvm_ffi::abi::TVMFFIAny;
use tvm_ffi::{Any, Result};

use super::ints::exact_int_value;
use super::scalars::{self, float_value, int_value};

/// A plain value, borrowing the Python object it was read from.
#[derive(Clone, Copy)]
pub(super) enum Plain<'a> {
    /// `None`.
    None,
    /// `True` or `False`.
    Bool(bool),
    /// An `int` of 64 bits.
    Int(i64),
    /// A `float`.
    Float(f64),
    /// A `str`'s UTF-8 form, which the interpreter caches on the object.
    Str(&'a str),
    /// The content of a `bytes`.
    Bytes(&'a [u8]),
}

/// Reads `obj`, of type `ty`, as a plain value if that type is exactly one of the built-ins and
/// the value has a plain form; `None` otherwise, with no error set. The hottest types are
/// checked first. (The caller passes the type it has read, for its own checks after this one.)
///
/// # Safety
/// `obj` is a live object that outlives `'a`, and `ty` its type; the thread holds the
/// interpreter lock.
#[inline(always)]
pub(super) unsafe fn read<'a>(
    obj: *mut ffi::PyObject,
    ty: *mut ffi::PyTypeObject,
) -> Option<Plain<'a>> {
    // SAFETY: per the contract; each call takes an object of the type just checked.
    unsafe {
        if ty == &raw mut ffi::PyLong_Type {
            return exact_int_value(obj).map(Plain::Int);
        }
        if ty == &raw mut ffi::PyFloat_Type {
            return Some(Plain::Float(ffi::PyFloat_AsDouble(obj)));
        }
        if obj == ffi::Py_None() {
            return Some(Plain::None);
        }
        if ty == &raw mut ffi::PyUnicode_Type {
            return utf8_of(obj).map(Plain::Str);
        }
        if ty == &raw mut ffi::PyBool_Type {
            return Some(Plain::Bool(obj == ffi::Py_True()));
        }
        if ty == &raw mut ffi::PyBytes_Type {
            return Some(Plain::Bytes(content_of(obj)));
        }
        None
    }
}

/// The UTF-8 form of a `str`, or `None` (no error set) for text with lone surrogates.
///
/// # Safety
/// `obj` is a live `str` that outlives `'a`; the thread holds the interpreter lock.
#[inline(always)]
unsafe fn utf8_of<'a>(obj: *mut ffi::PyObject) -> Option<&'a str> {
    let mut size: ffi::Py_ssize_t = 0;
    // SAFETY: per the contract. The interpreter keeps the UTF-8 form on the object, so it lives
    // as long as the object; it is valid UTF-8.
    unsafe {
        let data = ffi::PyUnicode_AsUTF8AndSize(obj, &mut size);
        if data.is_null() {
            ffi::PyErr_Clear();
            return None;
        }
        let bytes = std::slice::from_raw_parts(data.cast::<u8>(), size as usize);
        Some(std::str::from_utf8_unchecked(bytes))
    }
}

/// The content of a `bytes`, borrowed from it.
///
/// # Safety
/// `obj` is a live `bytes` that outlives `'a`; the thread holds the interpreter lock.
#[inline(always)]
unsafe fn content_of<'a>(obj: *mut ffi::PyObject) -> &'a [u8] {
    let mut data = std::ptr::null_mut();
    let mut size: ffi::Py_ssize_t = 0;
    // SAFETY: per the contract: a bytes object always yields its buffer of `size` bytes.
    unsafe {
        ffi::PyBytes_AsStringAndSize(obj, &mut data, &mut size);
        std::slice::from_raw_parts(data.cast::<u8>(), size as usize)
    }
}

impl Plain<'_> {
    /// The value it converts to, owning its text and bytes (inline up to the small-value
    /// length, an object beyond); a `MemoryError` when that object cannot be allocated.
    #[inline(always)]
    pub(super) fn to_any(self) -> Result<Any> {
        let raw = match self {
            Plain::Str(text) => return Ok(tvm_ffi::String::try_new(text)?.into()),
            Plain::Bytes(bytes) => return Ok(tvm_ffi::Bytes::try_from_bytes(bytes)?.into()),
            Plain::None => TVMFFIAny::NONE,
            Plain::Bool(value) => scalars::bool(value),
            Plain::Int(value) => int_value(value),
            Plain::Float(value) => float_value(value),
        };
        // SAFETY: a number, a bool or `None` owns nothing.
        Ok(unsafe { Any::from_raw(raw) })
    }
}
