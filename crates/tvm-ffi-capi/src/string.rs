//! Strings, bytes and data-type text.

use std::ffi::c_int;

use tvm_ffi::boundary::ffi_status;
use tvm_ffi::dtype::{dtype_to_string, parse_dtype_bytes};
use tvm_ffi::error::{Error, ErrorKind};
use tvm_ffi::string::{Bytes, String};
use tvm_ffi_sys::{DLDataType, TVMFFIAny, TVMFFIByteArray};

use crate::args::{bytes_arg, non_null, out_arg};

/// Copies bytes into an owned string value (small form up to 7 bytes).
///
/// # Safety
/// `input` is a valid byte array; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIStringFromByteArray(
    input: *const TVMFFIByteArray,
    out: *mut TVMFFIAny,
) -> c_int {
    ffi_status("TVMFFIStringFromByteArray", || {
        // SAFETY: per the contract.
        let (bytes, out) = unsafe { (bytes_arg(input, "input")?, out_arg(out, "out")?) };
        *out = String::try_from_bytes(bytes)?.into_any().into_raw();
        Ok(())
    })
}

/// Copies bytes into an owned bytes value (small form up to 7 bytes).
///
/// # Safety
/// `input` is a valid byte array; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIBytesFromByteArray(
    input: *const TVMFFIByteArray,
    out: *mut TVMFFIAny,
) -> c_int {
    ffi_status("TVMFFIBytesFromByteArray", || {
        // SAFETY: per the contract.
        let (bytes, out) = unsafe { (bytes_arg(input, "input")?, out_arg(out, "out")?) };
        *out = Bytes::try_from_bytes(bytes)?.into_any().into_raw();
        Ok(())
    })
}

/// Parses a data type; a `ValueError` naming the text on failure.
///
/// # Safety
/// `text` is a valid byte array; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIDataTypeFromString(
    text: *const TVMFFIByteArray,
    out: *mut DLDataType,
) -> c_int {
    ffi_status("TVMFFIDataTypeFromString", || {
        // SAFETY: per the contract.
        let (bytes, out) = unsafe { (bytes_arg(text, "dtype string")?, out_arg(out, "out")?) };
        // Every string the parser accepts is ASCII, so UTF-8 is only checked for the message.
        *out = parse_dtype_bytes(bytes).map_err(|msg| {
            let msg = match std::str::from_utf8(bytes) {
                Ok(_) => msg,
                Err(_) => format!(
                    "data type string is not UTF-8: {:?}",
                    std::string::String::from_utf8_lossy(bytes)
                ),
            };
            Error::new(ErrorKind::ValueError, msg)
        })?;
        Ok(())
    })
}

/// Prints a data type into an owned string value.
///
/// # Safety
/// `dtype` is valid; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIDataTypeToString(
    dtype: *const DLDataType,
    out: *mut TVMFFIAny,
) -> c_int {
    ffi_status("TVMFFIDataTypeToString", || {
        // SAFETY: per the contract.
        let (dtype, out) = unsafe { (non_null(dtype, "dtype")?, out_arg(out, "out")?) };
        *out = String::new(&dtype_to_string(*dtype)).into_any().into_raw();
        Ok(())
    })
}
