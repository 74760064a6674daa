//! How much of the calling thread's native stack is left, for code that recurses on input
//! (nested containers, callbacks that call back) and must stop with an error before the stack
//! overflows, whatever a host interpreter's recursion limit says.

use std::cell::Cell;

use crate::error::{Error, ErrorKind, Result};

/// Native stack kept free below a recursive walk's frames, for callbacks and error handling.
pub const RESERVE: usize = 256 * 1024;

/// Nesting depth past which every recursive walk stops, whatever stack is left: the same limit
/// on every thread and platform (including those that do not tell their stack's size), and a
/// quick end to walks around a cycle.
pub const MAX_NESTING: usize = 10_000;

/// A `ValueError` saying that `what` is nested too deeply when less than [`RESERVE`] bytes of
/// the calling thread's native stack are left (never an error where the platform does not
/// tell).
pub fn ensure_room(what: &str) -> Result<()> {
    if nearly_full() {
        return Err(Error::new(
            ErrorKind::ValueError,
            format!("{what} is nested too deeply for the native stack (or is cyclic)"),
        ));
    }
    Ok(())
}

/// Checks that a walk may go down to nesting level `depth` (counted from 1): a `ValueError`
/// naming `what` past [`MAX_NESTING`] levels or when the native stack is nearly full.
pub fn enter_level(depth: usize, what: &str) -> Result<()> {
    if depth > MAX_NESTING {
        return Err(too_deep(what));
    }
    ensure_room(what)
}

/// The error of a walk that went past [`MAX_NESTING`] levels; `what` names what was walked.
#[cold]
pub fn too_deep(what: &str) -> Error {
    Error::new(
        ErrorKind::ValueError,
        format!("{what} is nested too deeply: more than {MAX_NESTING} levels (or is cyclic)"),
    )
}

thread_local! {
    /// The lowest address of this thread's stack (0: not read yet; 1: unknown).
    static STACK_BASE: Cell<usize> = const { Cell::new(0) };
}

/// The lowest address of the calling thread's stack, if the platform says.
fn stack_base() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: attributes of the calling thread, read into zeroed out-parameters and
        // destroyed after use.
        unsafe {
            let mut attr: libc::pthread_attr_t = std::mem::zeroed();
            if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
                return None;
            }
            let mut base = std::ptr::null_mut();
            let mut size = 0usize;
            let rc = libc::pthread_attr_getstack(&attr, &mut base, &mut size);
            libc::pthread_attr_destroy(&mut attr);
            (rc == 0 && size > 0).then_some(base as usize)
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// The lowest address of the calling thread's stack, read once per thread, or `None` when the
/// platform does not tell. For callers that keep it where it is cheaper to reach than this
/// library's thread-local (see [`remaining_above`]).
#[inline]
pub fn thread_stack_base() -> Option<usize> {
    let base = STACK_BASE.with(|b| {
        if b.get() == 0 {
            b.set(stack_base().unwrap_or(1));
        }
        b.get()
    });
    (base > 1).then_some(base)
}

/// Bytes of native stack left below the caller's frame on a thread whose stack starts at `base`
/// (from [`thread_stack_base`] on the same thread). The stack grows down on every supported
/// target.
#[inline(always)]
pub fn remaining_above(base: usize) -> usize {
    let marker = 0u8;
    let here = std::ptr::addr_of!(marker) as usize;
    here.saturating_sub(base)
}

/// Bytes of native stack left below the caller's frame, or `None` when the platform does not
/// tell.
#[inline]
pub fn remaining() -> Option<usize> {
    thread_stack_base().map(remaining_above)
}

/// Whether less than [`RESERVE`] bytes of the calling thread's stack are left.
#[inline]
pub fn nearly_full() -> bool {
    remaining().is_some_and(|left| left < RESERVE)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_room_left_shrinks_with_depth() {
        fn deeper(levels: u32) -> usize {
            let pad = [0u8; 256];
            std::hint::black_box(&pad);
            if levels == 0 {
                super::remaining().unwrap()
            } else {
                deeper(levels - 1)
            }
        }
        let shallow = super::remaining().expect("Linux reports thread stacks");
        assert!(shallow > 64 << 10, "{shallow}");
        assert!(deeper(50) < shallow);
    }
}
