//! The first raised error loads no debug information: raising records return addresses only,
//! and the tens of MiB that symbolization maps and parses are spent when a backtrace is read.
//!
//! One test in its own binary, so that no other test has symbolized a backtrace before it.

use std::ffi::CStr;

use tvm_ffi::Error;
use tvm_ffi_capi as _;
use tvm_ffi_sys::{TVMFFIErrorMoveFromRaised, TVMFFIErrorSetRaisedFromCStr, TVMFFIObjectDecRef};

/// Resident set size in bytes, from `/proc/self/statm`; `None` where it is not available.
fn rss_bytes() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * usize::try_from(page).ok()?)
}

/// Raises an error through the C API, takes it and releases it, as a C caller does.
fn raise_fetch_release(kind: &CStr, message: &CStr) {
    let mut err = std::ptr::null_mut();
    // SAFETY: NUL-terminated strings; the fetched error is owned here and released.
    unsafe {
        TVMFFIErrorSetRaisedFromCStr(kind.as_ptr(), message.as_ptr());
        TVMFFIErrorMoveFromRaised(&mut err);
        assert!(!err.is_null());
        TVMFFIObjectDecRef(err);
    }
}

#[test]
fn the_first_errors_grow_the_resident_set_by_less_than_4_mib() {
    const LIMIT: usize = 4 << 20;
    let Some(before) = rss_bytes() else {
        eprintln!("no /proc/self/statm here: nothing to measure");
        return;
    };
    raise_fetch_release(c"ValueError", c"first");
    let kept = Error::new("KeyError", "second");
    assert_eq!(kept.message(), "second");
    let after = rss_bytes().unwrap();
    let growth = after.saturating_sub(before);
    assert!(
        growth < LIMIT,
        "the first errors grew the resident set by {growth} bytes"
    );
    // Reading a backtrace is what loads the debug information.
    assert!(kept.backtrace().contains("File \""), "{}", kept.backtrace());
    eprintln!(
        "first errors: +{} KiB; after reading a backtrace: +{} KiB",
        growth / 1024,
        rss_bytes().unwrap().saturating_sub(before) / 1024
    );
}
