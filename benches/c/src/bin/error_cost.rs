//! The cost of raising a native error through the C ABI: `TVMFFIErrorSetRaisedFromCStr`, then
//! `TVMFFIErrorMoveFromRaised`, then `TVMFFIObjectDecRef`, as a C caller does it.
//!
//! The program has a C `main` (no Rust runtime frames above it), so the stack it raises from is
//! that of a small C program: `main`, `__libc_start_main`, `_start`.
//!
//! ```text
//! error_cost [N] [--read] [--report] [--print] [--rust]
//! ```
//!
//! - `N` (default 10000): raise+fetch+release pairs after one warm-up pair.
//! - `--read`: also read each error's backtrace (through `update_backtrace`, as readers do).
//! - `--report`: print the resident set growth of the first error and the wall time per pair.
//! - `--print`: print the backtrace of the first error (read after the loop).
//! - `--rust`: raise with the safe API instead, `tvm_ffi::Error::new` then drop (the path of
//!   every error a Rust function returns).
//!
//! Instructions per pair: run it under `valgrind --tool=callgrind` with N=20000 and N=10000 and
//! divide the difference of the totals by 10000 (`scripts/error-cost.sh` does all of it).
#![no_main]

use std::ffi::{c_char, c_int};
use std::time::Instant;

use tvm_ffi_capi as _;
use tvm_ffi_sys::{
    TVMFFIByteArray, TVMFFIErrorCell, TVMFFIErrorMoveFromRaised, TVMFFIErrorSetRaisedFromCStr,
    TVMFFIObject, TVMFFIObjectDecRef, TVMFFIObjectHandle, kTVMFFIBacktraceUpdateModeAppend,
};

/// Resident set size in bytes, from `/proc/self/statm` (0 where it is not available).
fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|field| field.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * usize::try_from(page).unwrap_or(4096)
}

/// The backtrace text of an error, asked for the way a C reader does: an empty append through
/// the cell's `update_backtrace`, then the cell's `backtrace` field.
///
/// # Safety
/// `err` is a live error object.
unsafe fn read_backtrace(err: TVMFFIObjectHandle) -> usize {
    // SAFETY: an error object's cell follows its header; the hook is never NULL.
    unsafe {
        let cell = err
            .cast::<u8>()
            .add(std::mem::size_of::<TVMFFIObject>())
            .cast::<TVMFFIErrorCell>();
        let empty = TVMFFIByteArray {
            data: c"".as_ptr(),
            size: 0,
        };
        if let Some(update) = (*cell).update_backtrace {
            update(err, &empty, kTVMFFIBacktraceUpdateModeAppend);
        }
        (*cell).backtrace.size
    }
}

/// One raise, fetch and release; returns the backtrace length when `read`.
#[inline(never)]
fn raise_fetch_release(read: bool) -> usize {
    const KIND: &std::ffi::CStr = c"ValueError";
    const MESSAGE: &std::ffi::CStr = c"bad value";
    let mut err: TVMFFIObjectHandle = std::ptr::null_mut();
    // SAFETY: NUL-terminated strings; `err` is a valid slot; the fetched error is owned here.
    unsafe {
        TVMFFIErrorSetRaisedFromCStr(KIND.as_ptr(), MESSAGE.as_ptr());
        TVMFFIErrorMoveFromRaised(&mut err);
        assert!(!err.is_null(), "an error was raised");
        let len = if read { read_backtrace(err) } else { 0 };
        TVMFFIObjectDecRef(err);
        len
    }
}

/// Raises one more error and prints its backtrace.
#[inline(never)]
fn print_first_backtrace() {
    let mut err: TVMFFIObjectHandle = std::ptr::null_mut();
    // SAFETY: as in `raise_fetch_release`; the cell's text is owned by the live error.
    unsafe {
        TVMFFIErrorSetRaisedFromCStr(c"ValueError".as_ptr(), c"printed".as_ptr());
        TVMFFIErrorMoveFromRaised(&mut err);
        assert!(!err.is_null(), "an error was raised");
        read_backtrace(err);
        let cell = err
            .cast::<u8>()
            .add(std::mem::size_of::<TVMFFIObject>())
            .cast::<TVMFFIErrorCell>();
        let text = (*cell).backtrace;
        let bytes = std::slice::from_raw_parts(text.data.cast::<u8>(), text.size);
        print!("{}", String::from_utf8_lossy(bytes));
        TVMFFIObjectDecRef(err);
    }
}

/// One `Error::new` and drop; returns the backtrace length when `read`.
#[inline(never)]
fn new_and_drop(read: bool) -> usize {
    let err = tvm_ffi::Error::new(tvm_ffi::ErrorKind::ValueError, "bad value");
    if read { err.backtrace().len() } else { 0 }
}

/// The C entry point of the program.
#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let read = args.iter().any(|a| a == "--read");
    let report = args.iter().any(|a| a == "--report");
    let print = args.iter().any(|a| a == "--print");
    let once: fn(bool) -> usize = if args.iter().any(|a| a == "--rust") {
        new_and_drop
    } else {
        raise_fetch_release
    };
    let n: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(10_000);

    let before = rss_bytes();
    let first_len = once(read);
    let after_first = rss_bytes();

    let start = Instant::now();
    let mut total = 0usize;
    for _ in 0..n {
        total = total.wrapping_add(once(read));
    }
    let elapsed = start.elapsed();
    std::hint::black_box(total);

    if print {
        print_first_backtrace();
    }
    if report {
        println!(
            "pairs: {n} (read backtrace: {read}, {})",
            if args.iter().any(|a| a == "--rust") {
                "Error::new + drop"
            } else {
                "C ABI"
            }
        );
        println!("first backtrace bytes: {first_len}");
        println!(
            "RSS growth of the first error: {:.2} MiB ({} KiB -> {} KiB)",
            (after_first as f64 - before as f64) / (1024.0 * 1024.0),
            before / 1024,
            after_first / 1024
        );
        println!(
            "wall time per raise+fetch+release: {:.0} ns",
            elapsed.as_nanos() as f64 / n.max(1) as f64
        );
    }
    0
}
