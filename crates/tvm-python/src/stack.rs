//! The native stack as a limit of its own: with a raised recursion limit, deep nesting (a list
//! in a list ...) or recursion through callbacks can exhaust the thread's native stack long
//! before the interpreter's counter says so. The places where the glue can recurse check the
//! room left ([`tvm_ffi::stack`]) and raise `RecursionError` instead of crashing: a Python
//! callback entered from native code (every cycle between Python and native calls passes one),
//! the general call path (its conversions may run Python code) and nested conversions.

use std::sync::atomic::{AtomicUsize, Ordering};

use pyo3::exceptions::PyRecursionError;
use pyo3::prelude::*;

/// A `RecursionError` naming `what` if the native stack is nearly exhausted.
#[inline]
pub(crate) fn check(what: &str) -> PyResult<()> {
    if tvm_ffi::stack::nearly_full() {
        Err(exhausted(what))
    } else {
        Ok(())
    }
}

/// Room a callback needs below itself: half of what native recursive walks keep free for the
/// callbacks and errors below them ([`tvm_ffi::stack::RESERVE`]), so that a walk calling back
/// into Python meets its own, clearer limit ("nested too deeply") first.
const CALLBACK_RESERVE: usize = tvm_ffi::stack::RESERVE / 2;

/// [`check`] for a callback, whose native caller gets a runtime error (raised in Python as
/// `RecursionError`). `holds_lock`: the calling thread holds the interpreter lock, so the stack
/// base can come from [`LockedThreadStack`] instead of a thread-local.
#[inline]
pub(crate) fn check_in_callback(what: &str, holds_lock: bool) -> tvm_ffi::Result<()> {
    // 0 where the platform does not tell: everything above it counts as room.
    let base = if holds_lock {
        LOCKED_THREAD_STACK.base()
    } else {
        tvm_ffi::stack::thread_stack_base().unwrap_or(0)
    };
    if tvm_ffi::stack::remaining_above(base) < CALLBACK_RESERVE {
        Err(exhausted_error(what))
    } else {
        Ok(())
    }
}

/// The stack base of the last thread that asked for it while holding the interpreter lock,
/// with the thread's token: a callback nested in a call from Python (the common case) finds its
/// base with two loads instead of a `__tls_get_addr` call.
///
/// Every read and every fill holds the interpreter lock, which orders them (relaxed atomics make
/// the statics shareable). A thread that filled the entry clears it when it exits ([`ExitHook`],
/// a compare-and-swap of its own token, without the lock): a thread started later may get the
/// same token, and must not inherit another stack's base. Two live threads never share a token,
/// so the clearing thread never touches the entry of the thread that reads it.
struct LockedThreadStack {
    /// The token ([`tvm_ffi::thread::current_token`]) of the thread of `base` (0: none).
    thread: AtomicUsize,
    /// Its stack base (0: the platform does not tell).
    base: AtomicUsize,
}

static LOCKED_THREAD_STACK: LockedThreadStack = LockedThreadStack {
    thread: AtomicUsize::new(0),
    base: AtomicUsize::new(0),
};

impl LockedThreadStack {
    /// The calling thread's stack base (0: the platform does not tell); the caller holds the
    /// interpreter lock.
    #[inline]
    fn base(&self) -> usize {
        let me = tvm_ffi::thread::current_token();
        if self.thread.load(Ordering::Relaxed) != me {
            return self.fill(me);
        }
        self.base.load(Ordering::Relaxed)
    }

    /// Reads the calling thread's base and, if the thread can still clear the entry when it
    /// exits, records it (out of line: once per change of thread).
    #[cold]
    #[inline(never)]
    fn fill(&self, me: usize) -> usize {
        let base = tvm_ffi::stack::thread_stack_base().unwrap_or(0);
        // Fails while the thread's locals are being destroyed: then nothing is recorded.
        if EXIT_HOOK.try_with(|_| ()).is_ok() {
            self.base.store(base, Ordering::Relaxed);
            self.thread.store(me, Ordering::Relaxed);
        }
        base
    }
}

/// Clears [`LOCKED_THREAD_STACK`] when its thread exits, if the entry still names it.
struct ExitHook;

impl Drop for ExitHook {
    fn drop(&mut self) {
        let me = tvm_ffi::thread::current_token();
        let _ = LOCKED_THREAD_STACK.thread.compare_exchange(
            me,
            0,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
}

thread_local! {
    /// Registered on a thread's first fill of [`LOCKED_THREAD_STACK`].
    static EXIT_HOOK: ExitHook = const { ExitHook };
}

/// The error of [`check`], out of line so that the check itself stays small.
#[cold]
#[inline(never)]
fn exhausted(what: &str) -> PyErr {
    PyRecursionError::new_err(exhausted_message(what))
}

/// The error of [`check_in_callback`].
#[cold]
#[inline(never)]
fn exhausted_error(what: &str) -> tvm_ffi::Error {
    tvm_ffi::Error::new("RecursionError", exhausted_message(what))
}

fn exhausted_message(what: &str) -> String {
    format!("maximum native recursion depth exceeded {what} (the thread's stack is nearly full)")
}
