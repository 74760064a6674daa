//! The native stack as a limit of its own: with a raised recursion limit, deep nesting (a list
//! in a list ...) or recursion through callbacks can exhaust the thread's native stack long
//! before the interpreter's counter says so. Entry points that recurse check the room left and
//! raise `RecursionError` instead of crashing.
//!
//! The glue's per-thread state lives in one thread-local ([`ThreadState`]): in a shared library
//! every thread-local costs a `__tls_get_addr` call, and a call from Python needs both the stack
//! base and a token of the thread (for [`crate::holder`]).

use std::cell::Cell;

use pyo3::exceptions::PyRecursionError;
use pyo3::prelude::*;

/// Room kept free: enough for one more level of conversion or call, the interpreter frames
/// between two levels, and the error path.
const RESERVE: usize = 256 << 10;

/// What the glue keeps per thread. Its address identifies the thread ([`ThreadState::token`]).
pub(crate) struct ThreadState {
    /// The lowest address of the thread's stack (0: not read yet; 1: unknown).
    stack_base: Cell<usize>,
}

thread_local! {
    static STATE: ThreadState = const { ThreadState { stack_base: Cell::new(0) } };
}

impl ThreadState {
    /// The calling thread's state (one thread-local access).
    #[inline]
    pub(crate) fn current() -> &'static ThreadState {
        // SAFETY: a const-initialized thread-local without a destructor lives as long as its
        // thread, and the reference never leaves the thread (`ThreadState` is not `Sync`).
        STATE.with(|state| unsafe { &*std::ptr::from_ref(state) })
    }

    /// A non-zero number that identifies the thread while it lives.
    #[inline]
    pub(crate) fn token(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// Whether at least [`RESERVE`] bytes of the thread's stack are left below the caller (true
    /// where the platform does not tell).
    #[inline]
    pub(crate) fn has_room(&self) -> bool {
        let marker = 0u8;
        let here = std::ptr::addr_of!(marker) as usize;
        let mut base = self.stack_base.get();
        if base == 0 {
            base = stack_base(here);
            self.stack_base.set(base);
        }
        base <= 1 || here.saturating_sub(base) >= RESERVE
    }
}

/// The lowest address of the stack `here` is on, or 1 when the platform does not tell.
#[cold]
#[inline(never)]
fn stack_base(here: usize) -> usize {
    match tvm_ffi::stack::remaining() {
        // `remaining` measures from its own frame, a few bytes below `here`: close enough.
        Some(room) => here.saturating_sub(room).max(2),
        None => 1,
    }
}

/// A `RecursionError` naming `what` if the native stack is nearly exhausted.
#[inline]
pub(crate) fn check(what: &str) -> PyResult<()> {
    if ThreadState::current().has_room() {
        Ok(())
    } else {
        Err(exhausted(what))
    }
}

/// The error of [`check`], out of line so that the check itself stays small.
#[cold]
#[inline(never)]
fn exhausted(what: &str) -> PyErr {
    PyRecursionError::new_err(format!(
        "maximum native recursion depth exceeded {what} (the thread's stack is nearly full)"
    ))
}
