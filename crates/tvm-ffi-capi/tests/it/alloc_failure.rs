//! The C entry points that copy a caller's bytes fail with `-1` and a raised `MemoryError` when
//! the copy cannot be allocated, and with a `ValueError` for sizes no object could have, instead
//! of aborting the process.

use tvm_ffi::Error;
use tvm_ffi_sys::{
    TVMFFIAny, TVMFFIByteArray, TVMFFIBytesFromByteArray, TVMFFIStringFromByteArray,
};

type FromByteArray = unsafe extern "C" fn(*const TVMFFIByteArray, *mut TVMFFIAny) -> i32;

/// Calls `function` on a byte array claiming `size` bytes at a pointer that is never read (the
/// allocation fails first); the status and the raised error.
fn copy_claiming(function: FromByteArray, size: usize) -> (i32, Error) {
    let claimed = [0u8; 8];
    let array = TVMFFIByteArray {
        data: claimed.as_ptr().cast(),
        size,
    };
    let mut out = TVMFFIAny::NONE;
    // SAFETY: valid pointers; the data is not read, since no copy of that size is allocated.
    let status = unsafe { function(&array, &mut out) };
    (status, Error::take_raised().expect("an error is raised"))
}

#[test]
fn bytes_and_strings_too_large_for_memory_are_memory_errors() {
    for (function, what) in [
        (TVMFFIBytesFromByteArray as FromByteArray, "a bytes value"),
        (TVMFFIStringFromByteArray as FromByteArray, "a string"),
    ] {
        let (status, error) = copy_claiming(function, 1 << 62);
        assert_eq!(status, -1);
        assert!(error.is_kind("MemoryError"), "{error:?}");
        let expected = format!("cannot allocate {what} of 4611686018427387904 bytes");
        assert!(error.message().contains(&expected), "{error:?}");
    }
}

#[test]
fn sizes_no_object_can_have_are_value_errors() {
    let (status, error) = copy_claiming(TVMFFIBytesFromByteArray, usize::MAX);
    assert_eq!(status, -1);
    assert!(error.is_kind("ValueError"), "{error:?}");
    assert!(
        error.message().contains(&usize::MAX.to_string()),
        "{error:?}"
    );
}
