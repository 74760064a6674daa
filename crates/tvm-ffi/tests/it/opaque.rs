//! Opaque objects: foreign handles wrapped as objects, released once by their deleter.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use tvm_ffi::{Any, Error, ErrorKind, Opaque, OpaqueObj};

/// The handles released so far, by address (each test uses its own handle).
static RELEASED: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

unsafe extern "C" fn release(handle: *mut c_void) {
    // SAFETY: the tests hand out pointers to the `RELEASED` counters.
    unsafe { &*handle.cast::<AtomicUsize>() }.fetch_add(1, Ordering::SeqCst);
}

fn opaque(slot: usize) -> Opaque {
    let handle = std::ptr::from_ref(&RELEASED[slot])
        .cast_mut()
        .cast::<c_void>();
    // SAFETY: `release` only counts, from any thread.
    unsafe { OpaqueObj::create(handle, release) }.expect("an opaque object")
}

#[test]
fn opaque_objects_hand_their_handle_back_and_release_it_once() {
    let obj = opaque(0);
    let expected = std::ptr::from_ref(&RELEASED[0]).cast_mut().cast::<c_void>();
    assert_eq!(obj.handle(), expected);
    assert_eq!(obj.type_index(), tvm_ffi::abi::kTVMFFIOpaquePyObject);
    let value = Any::from(obj.clone());
    assert_eq!(value.as_object::<OpaqueObj>().unwrap().handle(), expected);
    assert_eq!(
        value.as_view().as_object::<OpaqueObj>().unwrap().handle(),
        expected
    );
    assert_eq!(value.cast::<Opaque>().unwrap().handle(), expected);
    assert!(Any::from(1i64).as_object::<OpaqueObj>().is_none());
    assert!(
        Any::from(Error::new("E", "m"))
            .as_object::<OpaqueObj>()
            .is_none()
    );
    drop(obj);
    assert_eq!(RELEASED[0].load(Ordering::SeqCst), 0);
    drop(value);
    assert_eq!(RELEASED[0].load(Ordering::SeqCst), 1);
}

#[test]
fn errors_carry_an_extra_context() {
    let context = opaque(1);
    let handle = context.handle();
    let err = Error::with_extra_context(
        ErrorKind::ValueError,
        "with context",
        "  File \"x\", line 1, in f\n",
        context.into(),
    );
    assert_eq!(err.kind(), "ValueError");
    assert_eq!(err.message(), "with context");
    assert_eq!(err.backtrace(), "  File \"x\", line 1, in f\n");
    let carried = err.extra_context().expect("an extra context");
    assert_eq!(carried.as_object::<OpaqueObj>().unwrap().handle(), handle);
    assert_eq!(RELEASED[1].load(Ordering::SeqCst), 0);
    drop(err);
    assert_eq!(RELEASED[1].load(Ordering::SeqCst), 1);

    let plain = Error::with_extra_context("E", "no context", "", Any::from(5i64));
    assert!(plain.extra_context().is_none());
    assert!(Error::new("E", "m").extra_context().is_none());
}

#[test]
fn current_backtrace_names_the_caller() {
    #[inline(never)]
    fn helper_capturing_its_backtrace() -> String {
        tvm_ffi::error::current_backtrace()
    }
    let text = helper_capturing_its_backtrace();
    assert!(text.contains("helper_capturing_its_backtrace"), "{text}");
    assert!(!text.contains("tvm_ffi::error::"), "{text}");
}
