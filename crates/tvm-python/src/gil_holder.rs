//! Which thread holds the interpreter lock inside a native call (a `Function` whose
//! `release_gil` is off), so that a Python callback arriving from another thread meanwhile is
//! refused with an error instead of waiting forever for a lock that call will not give up.
//!
//! Every write happens with the interpreter lock held, so writers never race: a call records
//! its thread and puts back what it found when it returns; a callback running Python code on the
//! holding thread clears the record for that time (the Python code may release the lock).
//!
//! A thread is named by its thread pointer ([`tvm_ffi::thread::current_token`]): one
//! instruction on both sides, with or without the lock, where a thread-local of this library
//! would cost a `__tls_get_addr` call and the interpreter's thread state a call into it (and
//! could differ between the sides on a thread that switches interpreters).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The token of the thread inside a lock-holding native call, or 0.
static HOLDER: AtomicUsize = AtomicUsize::new(0);

/// How long a callback from another thread waits for a lock-holding call to return before it
/// gives up with an error.
const PATIENCE: Duration = Duration::from_millis(200);

/// Records the calling thread as the holder until the returned value is dropped.
pub(crate) struct Holding(usize);

impl Holding {
    /// Marks the calling thread, which holds the interpreter lock, as inside a lock-holding
    /// native call.
    #[inline]
    pub(crate) fn enter() -> Holding {
        let me = tvm_ffi::thread::current_token();
        let previous = HOLDER.load(Ordering::Relaxed);
        HOLDER.store(me, Ordering::Release);
        Holding(previous)
    }

    /// Marks the calling thread as running Python code (no lock-holding call in progress).
    #[inline]
    pub(crate) fn run_python() -> Holding {
        let previous = HOLDER.load(Ordering::Relaxed);
        HOLDER.store(0, Ordering::Release);
        Holding(previous)
    }
}

impl Drop for Holding {
    #[inline]
    fn drop(&mut self) {
        HOLDER.store(self.0, Ordering::Release);
    }
}

/// Called before a Python callback takes the interpreter lock: `Err` with a message when another
/// thread is inside a lock-holding native call that does not return within [`PATIENCE`] (the
/// callback would otherwise wait for it forever, as a kernel that waits for its own threads does).
/// `Ok(true)` when the calling thread itself is inside such a call, so it is attached to the
/// interpreter already. (Native code that gives the lock up by itself inside such a call must
/// take it back before it calls a Python callback on that thread, as the C API requires of any
/// Python call.)
#[inline]
pub(crate) fn check_callback_thread(what: &str) -> Result<bool, String> {
    let holder = HOLDER.load(Ordering::Acquire);
    if holder == 0 {
        return Ok(false);
    }
    let me = tvm_ffi::thread::current_token();
    if holder == me {
        return Ok(true);
    }
    wait_for_holder(what, me)
}

/// [`check_callback_thread`] when another thread holds the lock: waits up to [`PATIENCE`].
#[cold]
#[inline(never)]
fn wait_for_holder(what: &str, me: usize) -> Result<bool, String> {
    let start = Instant::now();
    while start.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(1));
        let holder = HOLDER.load(Ordering::Acquire);
        if holder == 0 || holder == me {
            return Ok(holder == me);
        }
    }
    Err(format!(
        "{what} was called from another thread while a tvm.ffi.Function holds the interpreter \
         lock on its thread (it did not return within {} ms); set `release_gil = True` on the \
         function that runs the native code so that callbacks from its threads can run",
        PATIENCE.as_millis()
    ))
}
