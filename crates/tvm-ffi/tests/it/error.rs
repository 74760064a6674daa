//! Errors: kinds, messages, backtraces, causes and the per-thread slot.

use tvm_ffi::abi;
use tvm_ffi::{Any, Error, ErrorKind, Function};

#[test]
fn raise_and_move_clears_the_slot() {
    Error::new(ErrorKind::ValueError, "bad value 42").set_raised();
    let err = Error::take_raised().expect("an error was raised");
    assert_eq!(err.kind(), "ValueError");
    assert_eq!(err.message(), "bad value 42");
    assert!(Error::take_raised().is_none());
}

#[test]
fn set_raised_borrows() {
    let err = Error::new("CustomKind", "custom");
    let before = err.as_object().use_count();
    err.set_raised();
    assert_eq!(err.as_object().use_count(), before + 1);
    let taken = Error::take_raised().unwrap();
    assert!(taken.as_object().ptr_eq(err.as_object()));
    drop(taken);
    assert_eq!(err.as_object().use_count(), before);
}

#[test]
fn backtraces_name_the_rust_frames() {
    #[inline(never)]
    fn failing_helper_for_backtrace() -> Error {
        Error::new(ErrorKind::RuntimeError, "with a backtrace")
    }
    let err = failing_helper_for_backtrace();
    assert!(
        err.backtrace().contains("failing_helper_for_backtrace"),
        "{}",
        err.backtrace()
    );
    assert!(err.backtrace().contains("File \""), "{}", err.backtrace());
}

#[test]
fn update_backtrace_appends_and_replaces() {
    let err = Error::with_backtrace("RuntimeError", "m", "  File \"a\", line 1, in f\n");
    err.update_backtrace("  File \"b\", line 2, in g\n", true);
    assert_eq!(
        err.backtrace(),
        "  File \"a\", line 1, in f\n  File \"b\", line 2, in g\n"
    );
    err.update_backtrace("replaced", false);
    assert_eq!(err.backtrace(), "replaced");
}

#[test]
fn causes_chain() {
    let root = Error::new(ErrorKind::KeyError, "missing key `x`");
    let err = Error::new(ErrorKind::RuntimeError, "lookup failed").with_cause(root.clone());
    let cause = err.cause().expect("has a cause");
    assert!(cause.as_object().ptr_eq(root.as_object()));
    assert_eq!(
        format!("{err:?}"),
        "RuntimeError: lookup failed\ncaused by: KeyError: missing key `x`"
    );
}

#[test]
fn set_raised_from_c_strings_concatenates_parts() {
    let parts = [c"one ".as_ptr(), std::ptr::null(), c"two".as_ptr()];
    // SAFETY: NUL-terminated strings and a valid array.
    unsafe { abi::TVMFFIErrorSetRaisedFromCStrParts(c"IndexError".as_ptr(), parts.as_ptr(), 3) };
    let err = Error::take_raised().unwrap();
    assert_eq!(err.kind(), "IndexError");
    assert_eq!(err.message(), "one two");
}

#[test]
fn panics_become_internal_errors() {
    let f = Function::from_packed(|_| panic!("boom in a callee"));
    let err = f.call(()).unwrap_err();
    assert_eq!(err.kind(), "InternalError");
    assert_eq!(
        err.message(),
        "panic in a Rust packed function: boom in a callee"
    );
}

#[test]
fn a_panicking_destructor_is_raised_not_unwound() {
    struct PanicOnDrop;
    impl Drop for PanicOnDrop {
        fn drop(&mut self) {
            panic!("boom in a destructor");
        }
    }
    let owned = PanicOnDrop;
    let f = Function::from_packed(move |_| {
        let _ = &owned;
        Ok(Any::none())
    });
    drop(Error::take_raised());
    drop(f);
    let err = Error::take_raised().expect("the panic is raised");
    assert_eq!(err.kind(), "InternalError");
    assert_eq!(
        err.message(),
        "panic in an object destructor: boom in a destructor"
    );
}

#[test]
fn errors_travel_as_values() {
    let err = Error::new(ErrorKind::TypeError, "as a value");
    let any = Any::from(err);
    assert_eq!(any.type_index(), abi::kTVMFFIError);
    assert_eq!(any.cast::<Error>().unwrap().message(), "as a value");
}

#[test]
fn only_errors_go_into_the_error_slot() {
    let not_an_error = Any::from(tvm_ffi::Array::from_vec(vec![Any::from(1i64)]));
    let obj = not_an_error.as_object_ptr().unwrap();
    // SAFETY: a live object, lent for the call.
    unsafe { abi::TVMFFIErrorSetRaised(obj.cast()) };
    let err = Error::take_raised().expect("an error was raised in its place");
    assert!(err.is_kind(ErrorKind::TypeError), "{err}");
    assert!(err.message().contains("ffi.Array"), "{err}");
}
