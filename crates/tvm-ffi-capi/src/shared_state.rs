//! State that every copy of the safe API in the process shares (`tvm/ffi/extra/shared_state.h`):
//! the locks of the shared-mutable containers and the read-only marks of tensors.
//!
//! Each library built from the Rust crates has its own copy of `tvm-ffi`'s code and statics, so
//! a lock table or a side table kept there would be one per library, and a Python writer and a
//! native reader of the same list would not exclude each other. Kept here, they exist once.

use std::collections::BTreeSet;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use tvm_ffi::ReentrantLock;
use tvm_ffi::boundary::{ffi_boundary, ffi_status};
use tvm_ffi::containers::sync::{CONTAINER_LOCK_STRIPES, stripe_of};

#[allow(clippy::declare_interior_mutable_const)]
const UNLOCKED: ReentrantLock = ReentrantLock::new();

/// The container locks, one per stripe of addresses.
static CONTAINER_LOCKS: [ReentrantLock; CONTAINER_LOCK_STRIPES] =
    [UNLOCKED; CONTAINER_LOCK_STRIPES];

/// Addresses of live tensors whose producer marked the data read-only (rare: a side table keeps
/// the object layout free of a flag).
static READ_ONLY: Mutex<BTreeSet<usize>> = Mutex::new(BTreeSet::new());
/// How many entries `READ_ONLY` holds, so that most queries never take its lock.
static READ_ONLY_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Takes the lock of the container at `obj`; returns the calling thread's new hold count.
#[unsafe(no_mangle)]
pub extern "C" fn TVMFFIExtContainerLock(obj: *const c_void) -> i32 {
    ffi_boundary("TVMFFIExtContainerLock", || {
        let depth = CONTAINER_LOCKS[stripe_of(obj.cast())].acquire_raw();
        i32::try_from(depth).unwrap_or(i32::MAX)
    })
}

/// Releases one hold of the lock of the container at `obj`.
#[unsafe(no_mangle)]
pub extern "C" fn TVMFFIExtContainerUnlock(obj: *const c_void) {
    ffi_boundary("TVMFFIExtContainerUnlock", || {
        CONTAINER_LOCKS[stripe_of(obj.cast())].release_raw();
    })
}

/// Adds (`read_only` non-zero) or removes the read-only mark of the tensor at `obj`.
#[unsafe(no_mangle)]
pub extern "C" fn TVMFFIExtTensorMarkReadOnly(obj: *const c_void, read_only: i32) -> c_int {
    ffi_status("TVMFFIExtTensorMarkReadOnly", || {
        let mut marked = READ_ONLY.lock().unwrap_or_else(PoisonError::into_inner);
        if read_only != 0 {
            if marked.insert(obj as usize) {
                READ_ONLY_COUNT.fetch_add(1, Ordering::Release);
            }
        } else if marked.remove(&(obj as usize)) {
            READ_ONLY_COUNT.fetch_sub(1, Ordering::Release);
        }
        Ok(())
    })
}

/// 1 when the tensor at `obj` carries the read-only mark, else 0.
#[unsafe(no_mangle)]
pub extern "C" fn TVMFFIExtTensorIsReadOnly(obj: *const c_void) -> i32 {
    ffi_boundary("TVMFFIExtTensorIsReadOnly", || {
        let marked = READ_ONLY_COUNT.load(Ordering::Acquire) > 0
            && READ_ONLY
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(&(obj as usize));
        i32::from(marked)
    })
}
