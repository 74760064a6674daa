//! The environment's tensor allocator per thread: a thread starts with the process-wide one,
//! keeps what it sets (NULL included: then it has none), and reports the allocator in effect as
//! the previous one, as Apache TVM FFI's does.

use std::ffi::{c_char, c_void};

use tvm_ffi::abi::{
    DLManagedTensorVersioned, DLPackManagedTensorAllocator, DLTensor,
    TVMFFIEnvGetDLPackManagedTensorAllocator, TVMFFIEnvSetDLPackManagedTensorAllocator,
};

/// An allocator that is never called: the tests compare addresses only.
unsafe extern "C" fn first(
    _prototype: *mut DLTensor,
    _out: *mut *mut DLManagedTensorVersioned,
    _error_ctx: *mut c_void,
    _set_error: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char)>,
) -> i32 {
    -1
}

/// A second allocator, distinct from [`first`].
unsafe extern "C" fn second(
    _prototype: *mut DLTensor,
    _out: *mut *mut DLManagedTensorVersioned,
    _error_ctx: *mut c_void,
    _set_error: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char)>,
) -> i32 {
    -2
}

/// An allocator's address (0: none), to compare allocators by.
fn address(allocator: DLPackManagedTensorAllocator) -> usize {
    allocator.map_or(0, |f| f as *const () as usize)
}

fn current() -> usize {
    // SAFETY: reads the calling thread's allocator.
    address(unsafe { TVMFFIEnvGetDLPackManagedTensorAllocator() })
}

fn set(allocator: DLPackManagedTensorAllocator, global: bool) -> usize {
    let mut previous: DLPackManagedTensorAllocator = None;
    // SAFETY: `previous` is valid for writes.
    let rc = unsafe {
        TVMFFIEnvSetDLPackManagedTensorAllocator(allocator, i32::from(global), &mut previous)
    };
    assert_eq!(rc, 0);
    address(previous)
}

#[test]
fn threads_start_with_the_process_wide_allocator_and_keep_what_they_set() {
    let (first_address, second_address) = (address(Some(first)), address(Some(second)));
    set(Some(first), true);
    assert_eq!(current(), first_address);
    // A NULL set on this thread means no allocator here, not "use the process-wide one".
    assert_eq!(set(None, false), first_address);
    assert_eq!(current(), 0);
    // Another thread, which set nothing, still has the process-wide one.
    assert_eq!(std::thread::spawn(current).join().unwrap(), first_address);
    // A thread's own choice does not leak to others; a global one reaches new threads.
    let other = std::thread::spawn(move || {
        assert_eq!(set(Some(second), false), first_address);
        current()
    });
    assert_eq!(other.join().unwrap(), second_address);
    assert_eq!(set(Some(second), true), 0);
    assert_eq!(std::thread::spawn(current).join().unwrap(), second_address);
    set(None, true);
    assert_eq!(std::thread::spawn(current).join().unwrap(), 0);
}
