//! The checks of the C functions' pointer and byte-array arguments: a NULL where a value is
//! required, or text that is not UTF-8, is a `ValueError` naming the parameter.

use tvm_ffi::error::{Error, Result};

/// The error of a required pointer argument that is NULL.
#[cold]
#[inline(never)]
fn null_error(what: &str) -> Error {
    Error::new(
        tvm_ffi::ErrorKind::ValueError,
        format!("{what} must not be NULL"),
    )
}

/// Reads a required pointer argument, or a `ValueError` naming the parameter.
///
/// # Safety
/// `ptr` is NULL or valid for reads for `'a`.
pub(crate) unsafe fn non_null<'a, T>(ptr: *const T, what: &str) -> Result<&'a T> {
    // SAFETY: guaranteed by the caller.
    unsafe { ptr.as_ref() }.ok_or_else(|| null_error(what))
}

/// A required output argument, or a `ValueError` naming the parameter.
///
/// # Safety
/// `ptr` is NULL or valid for writes for `'a`.
pub(crate) unsafe fn out_arg<'a, T>(ptr: *mut T, what: &str) -> Result<&'a mut T> {
    // SAFETY: guaranteed by the caller.
    unsafe { ptr.as_mut() }.ok_or_else(|| null_error(what))
}

/// The bytes of a byte-array argument (NULL data is accepted only with size 0).
///
/// # Safety
/// `array` is NULL or points at a byte array whose data is valid for the call.
pub(crate) unsafe fn bytes_arg<'a>(
    array: *const tvm_ffi_sys::TVMFFIByteArray,
    what: &str,
) -> Result<&'a [u8]> {
    // SAFETY: guaranteed by the caller.
    let array = unsafe { non_null(array, what)? };
    if array.size == 0 {
        return Ok(&[]);
    }
    if array.data.is_null() {
        return Err(null_data_error(what, array.size));
    }
    if array.size > isize::MAX as usize {
        return Err(Error::new(
            tvm_ffi::ErrorKind::ValueError,
            format!("{what} has size {}, larger than any object", array.size),
        ));
    }
    // SAFETY: guaranteed by the caller (the size was checked for what a slice may hold).
    Ok(unsafe { std::slice::from_raw_parts(array.data.cast(), array.size) })
}

/// The error of a byte array with NULL data and a non-zero size (out of line: the argument
/// checks stay a few instructions).
#[cold]
#[inline(never)]
fn null_data_error(what: &str, size: usize) -> Error {
    Error::new(
        tvm_ffi::ErrorKind::ValueError,
        format!("{what} has NULL data with size {size}"),
    )
}

/// The text of a byte-array argument, or a `ValueError` if it is not UTF-8.
///
/// # Safety
/// As for [`bytes_arg`].
pub(crate) unsafe fn text_arg<'a>(
    array: *const tvm_ffi_sys::TVMFFIByteArray,
    what: &str,
) -> Result<&'a str> {
    // SAFETY: forwarded.
    let bytes = unsafe { bytes_arg(array, what)? };
    std::str::from_utf8(bytes).map_err(|_| {
        Error::new(
            tvm_ffi::ErrorKind::ValueError,
            format!(
                "{what} is not valid UTF-8: {:?}",
                String::from_utf8_lossy(bytes)
            ),
        )
    })
}

/// The text of a NUL-terminated C string argument, or a `ValueError`.
///
/// # Safety
/// `ptr` is NULL or a valid NUL-terminated string.
pub(crate) unsafe fn cstr_arg<'a>(ptr: *const std::ffi::c_char, what: &str) -> Result<&'a str> {
    if ptr.is_null() {
        return Err(null_error(what));
    }
    // SAFETY: guaranteed by the caller.
    let cstr = unsafe { std::ffi::CStr::from_ptr(ptr) };
    cstr.to_str().map_err(|_| {
        Error::new(
            tvm_ffi::ErrorKind::ValueError,
            format!("{what} is not valid UTF-8: {:?}", cstr.to_string_lossy()),
        )
    })
}
