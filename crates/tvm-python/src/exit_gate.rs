//! Calls that release the interpreter lock, made safe at interpreter exit.
//!
//! A thread that takes the lock back once the runtime is finalizing is ended by the interpreter
//! (`pthread_exit`, before Python 3.14), which unwinds through the native frames of the call and
//! aborts the process ("FATAL: exception not rethrown"). And a daemon thread whose remote call
//! fails because its server was stopped at exit would print that failure. So:
//!
//! - once `threading` starts shutting down (the main thread finished), a *daemon* thread whose
//!   call returns parks for good instead of running more Python code;
//! - the last `atexit` callback closes a gate: from then on every thread but the exiting one
//!   parks before it asks for the lock, and the callback waits (lock released) for the threads
//!   already past the gate to take it, so none is left waiting for it when finalization starts.
//!
//! Python code that a native call runs (a Python callback) has native frames below it, and the
//! interpreter gives the lock up between its instructions, so such a thread too would be ended
//! through native frames when it takes the lock back during finalization. So a thread other
//! than the main one counts itself while it runs callbacks ([`enter_callback`]); once the gate
//! is closed, a callback about to start parks instead, and the exit also waits for the counted
//! threads to return from their callbacks (or park) before finalization starts.
//!
//! Parked threads end with the process.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyCFunction, PyModule};

/// Whether the hooks were registered (written with the interpreter lock held).
static HOOKED: AtomicBool = AtomicBool::new(false);
/// Set when `threading` starts shutting down.
static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);
/// The gate, and the threads between it and holding the lock again.
static GATE: Mutex<Gate> = Mutex::new(Gate {
    closed_by: 0,
    reattaching: 0,
});
static REATTACHED: Condvar = Condvar::new();
/// How long the exit waits for threads already past the gate.
const PATIENCE: Duration = Duration::from_secs(2);
/// The token of the thread that closed the gate (as in [`Gate::closed_by`]), read without the
/// mutex by callbacks.
static CLOSED_BY: AtomicUsize = AtomicUsize::new(0);
/// The token of the interpreter's main thread (0 until known): it is never ended by the
/// interpreter, so its callbacks are not counted.
static MAIN_THREAD: AtomicUsize = AtomicUsize::new(0);
/// Threads other than the main one running Python callbacks, by their interpreter thread id
/// (once per thread, however deeply its callbacks nest).
static THREADS_IN_CALLBACKS: Mutex<Vec<std::ffi::c_ulong>> = Mutex::new(Vec::new());

fn threads_in_callbacks() -> std::sync::MutexGuard<'static, Vec<std::ffi::c_ulong>> {
    THREADS_IN_CALLBACKS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Counts the calling thread out of [`THREADS_IN_CALLBACKS`].
fn leave_callbacks() {
    // SAFETY: a plain query of the calling thread's id.
    let me = unsafe { pyo3::ffi::PyThread_get_thread_ident() };
    let mut threads = threads_in_callbacks();
    if let Some(index) = threads.iter().position(|&thread| thread == me) {
        threads.swap_remove(index);
    }
}

thread_local! {
    /// How many Python callbacks the calling thread is running, nested.
    static CALLBACK_DEPTH: Cell<usize> = const { Cell::new(0) };
}

struct Gate {
    /// The token of the thread that closed the gate (it runs the exit), or 0 while open.
    closed_by: usize,
    /// Threads past the gate that have not taken the lock back yet.
    reattaching: usize,
}

fn gate() -> std::sync::MutexGuard<'static, Gate> {
    GATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A thread past the open gate, counted until it holds the lock again.
struct Passed(());

impl Drop for Passed {
    fn drop(&mut self) {
        let mut gate = gate();
        gate.reattaching -= 1;
        if gate.reattaching == 0 {
            REATTACHED.notify_all();
        }
    }
}

/// Parks the calling thread for good (it runs no more Python code, so it no longer counts as
/// a thread in callbacks).
fn park_forever() -> ! {
    if CALLBACK_DEPTH.get() > 0 {
        CALLBACK_DEPTH.set(0);
        leave_callbacks();
    }
    loop {
        std::thread::park();
    }
}

/// At module load: records the calling thread as the interpreter's main thread (if it is) and
/// registers the exit hooks, so that callbacks are covered from the start.
pub(crate) fn install(py: Python<'_>) {
    if !HOOKED.load(Ordering::Relaxed) {
        install_hooks(py);
    }
    let is_main = threading(py)
        .and_then(|threading| {
            let current = threading.call_method0("current_thread").ok()?;
            let main = threading.call_method0("main_thread").ok()?;
            Some(current.is(&main))
        })
        .unwrap_or(false);
    if is_main {
        MAIN_THREAD.store(tvm_ffi::thread::current_token(), Ordering::Relaxed);
    }
}

/// A Python callback running on the calling thread, counted until dropped.
pub(crate) struct InCallback(bool);

/// Called with the interpreter lock held before a Python callback starts: counts the calling
/// thread (unless it is the main thread) while it runs callbacks, and parks it for good,
/// releasing the lock, when the gate is closed (unless it runs the exit).
#[inline]
pub(crate) fn enter_callback() -> InCallback {
    let me = tvm_ffi::thread::current_token();
    if me == MAIN_THREAD.load(Ordering::Relaxed) {
        return InCallback(false);
    }
    enter_callback_counted(me)
}

#[cold]
fn enter_callback_counted(me: usize) -> InCallback {
    let depth = CALLBACK_DEPTH.get();
    if depth == 0 {
        // SAFETY: a plain query of the calling thread's id.
        threads_in_callbacks().push(unsafe { pyo3::ffi::PyThread_get_thread_ident() });
    }
    CALLBACK_DEPTH.set(depth + 1);
    // Counted before the gate is read (both under orderings that a mutex and a SeqCst store
    // give): the exit, which closes the gate before it reads the count, either sees this
    // thread or this thread sees the gate closed.
    let closed = CLOSED_BY.load(Ordering::SeqCst);
    if closed != 0 && closed != me {
        // SAFETY: the caller holds the interpreter lock; it is given up for good.
        unsafe { pyo3::ffi::PyEval_SaveThread() };
        park_forever();
    }
    InCallback(true)
}

impl Drop for InCallback {
    #[inline]
    fn drop(&mut self) {
        if self.0 {
            let depth = CALLBACK_DEPTH.get() - 1;
            CALLBACK_DEPTH.set(depth);
            if depth == 0 {
                leave_callbacks();
            }
        }
    }
}

/// Called detached, before taking the lock back: parks for good when the gate is closed
/// (and this is not the exiting thread).
fn pass() -> Passed {
    let mut gate = gate();
    if gate.closed_by != 0 && gate.closed_by != tvm_ffi::thread::current_token() {
        drop(gate);
        park_forever();
    }
    gate.reattaching += 1;
    Passed(())
}

/// Runs `f` with the interpreter lock released (as [`Python::detach`]), safely at exit.
pub(crate) fn detach<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> T {
    if !HOOKED.load(Ordering::Relaxed) {
        install_hooks(py);
    }
    let (output, passed) = py.detach(move || {
        let output = f();
        (output, pass())
    });
    drop(passed);
    if shutting_down(py) && is_daemon_thread(py) {
        py.detach(|| park_forever())
    }
    output
}

/// The `threading` module, imported once.
fn threading(py: Python<'_>) -> Option<&Bound<'_, PyModule>> {
    static THREADING: PyOnceLock<Option<Py<PyModule>>> = PyOnceLock::new();
    THREADING
        .get_or_init(py, || py.import("threading").ok().map(Bound::unbind))
        .as_ref()
        .map(|module| module.bind(py))
}

/// Whether `threading` has started shutting down: its own flag, set before any of its exit
/// hooks runs (so a hook that stops a server cannot come first), or the hook's.
fn shutting_down(py: Python<'_>) -> bool {
    SHUTTING_DOWN.load(Ordering::Relaxed)
        || threading(py)
            .and_then(|threading| threading.getattr("_SHUTTING_DOWN").ok())
            .is_some_and(|flag| flag.is_truthy().unwrap_or(false))
}

fn is_daemon_thread(py: Python<'_>) -> bool {
    threading(py)
        .and_then(|threading| threading.call_method0("current_thread").ok())
        .and_then(|thread| thread.getattr("daemon").ok())
        .is_some_and(|daemon| daemon.is_truthy().unwrap_or(false))
}

/// Registers the `threading` shutdown hook and the `atexit` callback (once; the
/// interpreter lock serializes callers). A failure leaves the calls as they were.
fn install_hooks(py: Python<'_>) {
    HOOKED.store(true, Ordering::Relaxed);
    let mark = PyCFunction::new_closure(
        py,
        Some(c"tvm_threading_shutdown"),
        None,
        |_args, _kwargs| SHUTTING_DOWN.store(true, Ordering::Relaxed),
    );
    if let (Ok(hook), Some(threading)) = (mark, threading(py)) {
        // A private hook of CPython (3.9+): runs as soon as the main thread is done. It
        // refuses (RuntimeError) once the shutdown has begun.
        if threading.call_method1("_register_atexit", (hook,)).is_err() {
            SHUTTING_DOWN.store(true, Ordering::Relaxed);
        }
    }
    let close = PyCFunction::new_closure(py, Some(c"tvm_close_exit_gate"), None, |args, _| {
        close_gate(args.py());
    });
    if let (Ok(close), Ok(atexit)) = (close, py.import("atexit")) {
        let _ = atexit.call_method1("register", (close,));
    }
}

/// Closes the gate, then lets the threads already past it take the lock, and the threads in
/// Python callbacks return from them (or park). A callback still running after half the
/// patience (one that loops in Python) gets a `SystemExit` raised in it, which ends its Python
/// code and so parks its thread at the next native boundary.
fn close_gate(py: Python<'_>) {
    SHUTTING_DOWN.store(true, Ordering::Relaxed);
    let me = tvm_ffi::thread::current_token();
    gate().closed_by = me;
    CLOSED_BY.store(me, Ordering::SeqCst);
    let start = Instant::now();
    let settled = py.detach(|| {
        let deadline = start + PATIENCE;
        let mut gate = gate();
        while gate.reattaching > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            gate = REATTACHED
                .wait_timeout(gate, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        drop(gate);
        wait_for_callbacks(start + PATIENCE / 2)
    });
    if settled {
        return;
    }
    for thread in threads_in_callbacks().clone() {
        // SAFETY: the lock is held; an unknown id is ignored (the thread ended meanwhile).
        unsafe {
            pyo3::ffi::PyThreadState_SetAsyncExc(thread as _, pyo3::ffi::PyExc_SystemExit);
        }
    }
    py.detach(|| wait_for_callbacks(start + PATIENCE));
}

/// Waits until no thread runs a Python callback, or `deadline`; whether none does.
fn wait_for_callbacks(deadline: Instant) -> bool {
    // Polled: callbacks count themselves without waking anyone.
    loop {
        if threads_in_callbacks().is_empty() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
