//! One-time initialization of a handle (`TVMFFIHandleInitOnce`) and its reset.
//!
//! One process-wide lock serializes the init functions. It is re-entrant, so an init function
//! may initialize other handles; one that asks again for the handle it is initializing gets a
//! `RuntimeError` instead of waiting for itself forever.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use tvm_ffi::boundary::ffi_boundary_result;
use tvm_ffi::error::{Error, ErrorKind, Result};

/// Who runs init functions now.
struct InitLock {
    /// The token of the thread holding the lock, or 0.
    owner: usize,
    /// The handles whose init functions that thread is running, outermost first.
    running: Vec<usize>,
}

static INIT_LOCK: Mutex<InitLock> = Mutex::new(InitLock {
    owner: 0,
    running: Vec::new(),
});
static INIT_RELEASED: Condvar = Condvar::new();

fn init_lock() -> MutexGuard<'static, InitLock> {
    INIT_LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The init lock held by this thread for one handle, released when dropped.
struct Initializing;

impl Initializing {
    /// Takes the lock for `handle` (waiting for another thread's turn to end); an error when
    /// this thread is already initializing `handle`.
    fn enter(handle: usize) -> Result<Initializing> {
        let me = tvm_ffi::thread::current_token();
        let mut lock = init_lock();
        if lock.owner == me && lock.running.contains(&handle) {
            tvm_ffi::bail!(
                ErrorKind::RuntimeError,
                "TVMFFIHandleInitOnce: the init function of the handle at {handle:#x} asked for \
                 that same handle again (it would wait for itself)"
            );
        }
        while lock.owner != 0 && lock.owner != me {
            lock = INIT_RELEASED
                .wait(lock)
                .unwrap_or_else(PoisonError::into_inner);
        }
        lock.owner = me;
        lock.running.push(handle);
        Ok(Initializing)
    }
}

impl Drop for Initializing {
    fn drop(&mut self) {
        let mut lock = init_lock();
        lock.running.pop();
        if lock.running.is_empty() {
            lock.owner = 0;
            INIT_RELEASED.notify_one();
        }
    }
}

/// Initializes `*handle_addr` once through `init`, thread-safely. An init function may
/// initialize other handles, but not its own (a `RuntimeError`).
///
/// # Safety
/// `handle_addr` is valid and only accessed through these functions; `init` follows its contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIHandleInitOnce(
    handle_addr: *mut *mut c_void,
    init: Option<unsafe extern "C" fn(result: *mut *mut c_void) -> c_int>,
) -> c_int {
    ffi_boundary_result("TVMFFIHandleInitOnce", || {
        if handle_addr.is_null() {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "TVMFFIHandleInitOnce: handle_addr must not be NULL"
            );
        }
        // SAFETY: the address is valid and treated atomically by every user of these functions.
        let slot = unsafe { AtomicPtr::from_ptr(handle_addr) };
        if !slot.load(Ordering::Acquire).is_null() {
            return Ok(0);
        }
        let _initializing = Initializing::enter(handle_addr as usize)?;
        if !slot.load(Ordering::Acquire).is_null() {
            return Ok(0);
        }
        let Some(init) = init else {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "TVMFFIHandleInitOnce: init_func must not be NULL"
            );
        };
        let mut result = std::ptr::null_mut();
        // SAFETY: the init function follows its contract.
        let code = unsafe { init(&mut result) };
        if code != 0 {
            // The callee's code goes back as it is, with the error it raised (or one saying
            // it raised none).
            Error::take_raised_or(ErrorKind::RuntimeError, "TVMFFIHandleInitOnce").set_raised();
            return Ok(code);
        }
        if result.is_null() {
            tvm_ffi::bail!(
                ErrorKind::RuntimeError,
                "init_func must return a non-NULL handle"
            );
        }
        slot.store(result, Ordering::Release);
        Ok(0)
    })
}

/// Clears `*handle_addr` and calls `deinit` on the previous value, if any.
///
/// # Safety
/// As for [`TVMFFIHandleInitOnce`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIHandleDeinitOnce(
    handle_addr: *mut *mut c_void,
    deinit: Option<unsafe extern "C" fn(handle: *mut c_void) -> c_int>,
) -> c_int {
    ffi_boundary_result("TVMFFIHandleDeinitOnce", || {
        if handle_addr.is_null() {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "TVMFFIHandleDeinitOnce: NULL handle_addr"
            );
        }
        // SAFETY: as for init.
        let slot = unsafe { AtomicPtr::from_ptr(handle_addr) };
        let old = slot.swap(std::ptr::null_mut(), Ordering::AcqRel);
        Ok(match deinit {
            // SAFETY: the deinit function follows its contract; its status (and raised error)
            // is the caller's.
            Some(deinit) if !old.is_null() => unsafe { deinit(old) },
            _ => 0,
        })
    })
}
