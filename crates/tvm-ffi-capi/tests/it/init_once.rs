//! `TVMFFIHandleInitOnce` called again from inside an init function: for the same handle an
//! error, for another handle a nested initialization. Each case runs on a thread of its own and
//! the test waits for it a bounded time, so a deadlock fails the test instead of hanging it.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::Duration;

use tvm_ffi::Error;
use tvm_ffi_sys::TVMFFIHandleInitOnce;

/// Far above what any case needs; only a deadlock reaches it.
const DEADLOCK: Duration = Duration::from_secs(60);

/// Runs `case` on a new thread and returns its result, failing if it never finishes.
fn without_deadlock<T: Send + 'static>(case: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || done.send(case()));
    result
        .recv_timeout(DEADLOCK)
        .expect("TVMFFIHandleInitOnce deadlocked")
}

static VALUE: u8 = 0;

fn value() -> *mut c_void {
    (&raw const VALUE).cast_mut().cast()
}

static SELF_HANDLE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
/// The status and the error of the inner call of `init_self`.
static INNER: Mutex<Option<(c_int, Option<Error>)>> = Mutex::new(None);

/// Asks for its own handle again and keeps what that gave in `INNER` (a panic here could not
/// unwind out of the C function).
unsafe extern "C" fn init_self(result: *mut *mut c_void) -> c_int {
    // SAFETY: a valid handle slot and init function.
    let status = unsafe { TVMFFIHandleInitOnce(SELF_HANDLE.as_ptr(), Some(init_self)) };
    *INNER.lock().unwrap() = Some((status, Error::take_raised()));
    // SAFETY: the out-parameter of the init function.
    unsafe { *result = value() };
    0
}

#[test]
fn an_init_function_asking_for_its_own_handle_is_an_error_not_a_deadlock() {
    let status = without_deadlock(|| {
        // SAFETY: a valid handle slot and init function.
        unsafe { TVMFFIHandleInitOnce(SELF_HANDLE.as_ptr(), Some(init_self)) }
    });
    assert_eq!(status, 0);
    let (inner_status, inner_error) = INNER.lock().unwrap().take().expect("init_self ran");
    assert_eq!(inner_status, -1);
    let inner_error = inner_error.expect("an error raised");
    assert!(inner_error.is_kind("RuntimeError"), "{inner_error:?}");
    assert!(
        inner_error
            .message()
            .contains("asked for that same handle again"),
        "{inner_error:?}"
    );
    assert_eq!(SELF_HANDLE.load(Ordering::SeqCst), value());
}

static OUTER: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static NESTED: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

unsafe extern "C" fn init_inner(result: *mut *mut c_void) -> c_int {
    // SAFETY: the out-parameter of the init function.
    unsafe { *result = value() };
    0
}

/// Initializes another handle first, as a lazily made global that needs another one does.
unsafe extern "C" fn init_outer(result: *mut *mut c_void) -> c_int {
    // SAFETY: a valid handle slot and init function.
    let status = unsafe { TVMFFIHandleInitOnce(NESTED.as_ptr(), Some(init_inner)) };
    if status != 0 {
        return status;
    }
    // SAFETY: the out-parameter of the init function.
    unsafe { *result = NESTED.load(Ordering::SeqCst) };
    0
}

#[test]
fn an_init_function_may_initialize_another_handle() {
    let status = without_deadlock(|| {
        // SAFETY: a valid handle slot and init function.
        unsafe { TVMFFIHandleInitOnce(OUTER.as_ptr(), Some(init_outer)) }
    });
    assert_eq!(status, 0);
    assert_eq!(NESTED.load(Ordering::SeqCst), value());
    assert_eq!(OUTER.load(Ordering::SeqCst), value());
}

static SHARED: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static SHARED_INITS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn init_shared(result: *mut *mut c_void) -> c_int {
    SHARED_INITS.fetch_add(1, Ordering::SeqCst);
    std::thread::yield_now();
    // SAFETY: the out-parameter of the init function.
    unsafe { *result = value() };
    0
}

#[test]
fn threads_racing_for_one_handle_run_its_init_function_once() {
    let statuses = without_deadlock(|| {
        let threads: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(|| {
                    // SAFETY: a valid handle slot and init function.
                    unsafe { TVMFFIHandleInitOnce(SHARED.as_ptr(), Some(init_shared)) }
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|thread| thread.join().expect("a thread panicked"))
            .collect::<Vec<_>>()
    });
    assert_eq!(statuses, vec![0; 8]);
    assert_eq!(SHARED_INITS.load(Ordering::SeqCst), 1);
    assert_eq!(SHARED.load(Ordering::SeqCst), value());
}
