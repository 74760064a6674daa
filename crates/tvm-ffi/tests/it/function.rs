//! Packed and typed functions, C functions, and the global registry.

use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tvm_ffi::abi::{self, TVMFFIAny};
use tvm_ffi::{Any, AnyView, Error, ErrorKind, Function, String};

#[test]
fn typed_functions_convert_arguments() {
    let f = Function::from_typed("add", |a: i64, b: f64| a as f64 + b);
    assert_eq!(f.call((1i64, 2.5f64)).unwrap().cast::<f64>().unwrap(), 3.5);
    assert_eq!(
        f.call((1i64, 2i64)).unwrap().cast::<f64>().unwrap(),
        3.0,
        "int accepted as float"
    );
}

#[test]
fn typed_functions_name_mismatches() {
    let f = Function::from_typed("scale", |a: i64, _s: String| a);
    let err = f.call((1i64, 2i64)).unwrap_err();
    assert_eq!(err.kind(), "TypeError");
    assert_eq!(
        err.message(),
        "Mismatched type on argument #1 when calling: `scale(0: int, 1: ffi.String) -> int`. \
         Expected `ffi.String` but got `int`"
    );
    // Inline bytes are named after the type they stand for, not their storage form.
    let err = f
        .call((1i64, tvm_ffi::Bytes::from(&b"abc"[..])))
        .unwrap_err();
    assert!(
        err.message()
            .ends_with("Expected `ffi.String` but got `ffi.Bytes`"),
        "{err}"
    );
    let err = f.call((1i64,)).unwrap_err();
    assert_eq!(
        err.message(),
        "Mismatched number of arguments when calling: `scale(0: int, 1: ffi.String) -> int`. \
         Expected 2 but got 1 arguments"
    );
}

#[test]
fn errors_from_closures_propagate() {
    let f = Function::from_typed("fail", |x: i64| -> tvm_ffi::Result<i64> {
        Err(Error::new(ErrorKind::ValueError, format!("bad {x}")))
    });
    let err = f.call((5i64,)).unwrap_err();
    assert_eq!(
        (err.kind().as_ref(), err.message().as_ref()),
        ("ValueError", "bad 5")
    );
}

#[test]
fn registry_register_get_remove_and_override() {
    let name = "test.registry.double";
    let f = Function::from_typed(name, |x: i64| x * 2);
    f.register_global(name, false).unwrap();
    let err = f.register_global(name, false).unwrap_err();
    assert_eq!(err.kind(), "RuntimeError");
    assert!(err.message().contains(name), "{err}");
    Function::from_typed(name, |x: i64| x * 3)
        .register_global(name, true)
        .unwrap();
    let got = Function::get_global(name).unwrap();
    assert_eq!(got.call((2i64,)).unwrap().cast::<i64>().unwrap(), 6);
    assert!(
        Function::list_global_names()
            .unwrap()
            .iter()
            .any(|n| n == name)
    );
    assert!(Function::remove_global(name).unwrap());
    assert!(Function::get_global(name).is_none());
    assert!(!Function::remove_global(name).unwrap());
}

#[test]
fn concurrent_registration_and_lookup() {
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..200 {
                    let name = format!("test.concurrent.{t}.{i}");
                    Function::from_typed(&name, move || i)
                        .register_global(&name, false)
                        .unwrap();
                    let f = Function::get_global(&name).unwrap();
                    assert_eq!(f.call(()).unwrap().cast::<i64>().unwrap(), i);
                    assert!(Function::get_global("testing.echo").is_some());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

unsafe extern "C" fn c_add_handle_check(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> c_int {
    // SAFETY: called by the runtime with valid arguments.
    unsafe {
        let args = std::slice::from_raw_parts(args, num_args as usize);
        let sum = args[0].payload.v_int64 + args[1].payload.v_int64;
        // The handle of a NULL-self function is the function object itself.
        let is_function = (*handle.cast::<abi::TVMFFIObject>()).type_index == abi::kTVMFFIFunction;
        (*result) = Any::from(if is_function { sum } else { -1 }).into_raw();
    }
    0
}

unsafe extern "C" fn c_with_self(
    handle: *mut c_void,
    _args: *const TVMFFIAny,
    _num_args: i32,
    result: *mut TVMFFIAny,
) -> c_int {
    // SAFETY: `handle` is the counter passed as self.
    unsafe {
        let counter = &*handle.cast::<AtomicUsize>();
        (*result) = Any::from(counter.fetch_add(1, Ordering::SeqCst) as i64).into_raw();
    }
    0
}

unsafe extern "C" fn release_counter(handle: *mut c_void) {
    // SAFETY: the handle came from `Arc::into_raw`.
    unsafe { drop(Arc::from_raw(handle.cast::<AtomicUsize>())) };
}

#[test]
fn c_functions_get_the_right_handle() {
    // SAFETY: the safe-call follows the convention.
    let f =
        unsafe { Function::from_extern_c(std::ptr::null_mut(), Some(c_add_handle_check), None) }
            .unwrap();
    assert_eq!(f.call((2i64, 3i64)).unwrap().cast::<i64>().unwrap(), 5);

    let counter = Arc::new(AtomicUsize::new(10));
    let raw = Arc::into_raw(counter.clone()).cast_mut().cast::<c_void>();
    // SAFETY: `raw` stays valid until `release_counter` runs.
    let g =
        unsafe { Function::from_extern_c(raw, Some(c_with_self), Some(release_counter)) }.unwrap();
    assert_eq!(g.call(()).unwrap().cast::<i64>().unwrap(), 10);
    assert_eq!(Arc::strong_count(&counter), 2);
    drop(g);
    assert_eq!(
        Arc::strong_count(&counter),
        1,
        "the deleter ran exactly once"
    );
}

#[test]
fn testing_functions() {
    let echo = Function::get_global("testing.echo").unwrap();
    assert_eq!(
        echo.call(("hello there",))
            .unwrap()
            .cast::<String>()
            .unwrap(),
        "hello there"
    );
    let apply = Function::get_global("testing.apply").unwrap();
    let inc = Function::from_typed("inc", |x: i64| x + 1);
    assert_eq!(apply.call((inc, 41i64)).unwrap().cast::<i64>().unwrap(), 42);
    let raise = Function::get_global("testing.test_raise_error").unwrap();
    let err = raise.call(("KeyError", "no such key")).unwrap_err();
    assert_eq!(
        (err.kind().as_ref(), err.message().as_ref()),
        ("KeyError", "no such key")
    );
    let count = Function::get_global("testing.object_use_count").unwrap();
    let obj = Any::from(Function::from_packed(|_| Ok(Any::none())));
    assert_eq!(
        count.call((obj.clone(),)).unwrap().cast::<i64>().unwrap(),
        2
    );
}

#[test]
fn packed_views_call() {
    let f = Function::from_packed(|args: &[AnyView<'_>]| Ok(Any::from(args.len() as i64)));
    let a = Any::from(1i64);
    assert_eq!(
        f.call_packed(&[a.as_view(), a.as_view()])
            .unwrap()
            .cast::<i64>()
            .unwrap(),
        2
    );
}

#[test]
fn debug_shows_the_object_address() {
    let f = Function::from_packed(|_| Ok(Any::none()));
    assert_eq!(
        format!("{f:?}"),
        format!("Function({:p})", f.as_object().as_raw())
    );
}

#[test]
fn a_slice_of_values_passes_every_element() {
    let f = Function::from_packed(|args: &[AnyView<'_>]| {
        let parts = args
            .iter()
            .map(|a| format!("{a:?}"))
            .collect::<Vec<_>>()
            .join(",");
        Ok(Any::from(format!("{}:{parts}", args.len())))
    });
    let values = [Any::from(1i64), Any::from("two"), Any::none()];
    let out = f.call(&values[..]).unwrap().cast::<String>().unwrap();
    assert_eq!(out, r#"3:1,"two",None"#);
    let out = f.call(&values[..0]).unwrap().cast::<String>().unwrap();
    assert_eq!(out, "0:");
    // The slice is copied: the caller keeps its values.
    assert_eq!(values[1].cast::<String>().unwrap(), "two");
}

#[test]
fn call_packed_into_replaces_the_old_value_and_leaves_none_on_error() {
    let echo = Function::from_packed(|args: &[AnyView<'_>]| args[0].try_to_owned());
    let fail = Function::from_packed(|_: &[AnyView<'_>]| -> tvm_ffi::Result<Any> {
        Err(Error::new(ErrorKind::ValueError, "no"))
    });
    // The old value holds one of the two references to a function: the call must release it.
    let kept = Function::from_packed(|_: &[AnyView<'_>]| Ok(Any::none()));
    let mut result = Any::from(kept.clone());
    let strong = |any: &Any| any.as_object::<tvm_ffi::Object>().unwrap().strong_count();
    let probe = Any::from(kept);
    assert_eq!(strong(&probe), 2);
    let arg = Any::from(7i64);
    echo.call_packed_into(&[arg.as_view()], &mut result)
        .unwrap();
    assert_eq!(result.cast::<i64>().unwrap(), 7);
    assert_eq!(strong(&probe), 1, "the old value was dropped");
    let err = fail.call_packed_into(&[], &mut result).unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    assert!(result.is_none(), "a failed call leaves none");
}

/// Calls `f` without arguments through its cell's safe-call, as C callers do, and checks that
/// it fails with an error of `kind` and leaves the result slot none.
fn assert_failed_call_leaves_none(f: &Function, kind: &str) {
    let mut raw = TVMFFIAny::NONE;
    let handle = f.as_object().as_raw().cast::<c_void>();
    let safe_call = f.as_object().cell().safe_call.unwrap();
    // SAFETY: the function object's own safe-call with no arguments and a None result slot.
    let rc = unsafe { safe_call(handle, std::ptr::null(), 0, &mut raw) };
    assert_ne!(rc, 0);
    assert_eq!(raw.type_index, abi::kTVMFFINone);
    assert_eq!(Error::take_raised().unwrap().kind(), kind);
}

#[test]
fn from_packed_into_forwards_results_and_leaves_none_after_a_failure() {
    use tvm_ffi::function::FunctionObj;
    let strong = |any: &Any| any.as_object::<tvm_ffi::Object>().unwrap().strong_count();
    let held = Any::from(Function::from_packed(|_: &[AnyView<'_>]| Ok(Any::none())));
    // Calls its first argument with the rest, its result slot passed on (borrowed function).
    let apply = Function::from_packed_into(|args: &[AnyView<'_>], result: &mut Any| {
        args[0]
            .cast_object::<FunctionObj>()?
            .call_packed_into(&args[1..], result)
    });
    let echo = Function::from_packed(|args: &[AnyView<'_>]| args[0].try_to_owned());
    let echo_any = Any::from(echo);
    let out = apply
        .call_packed(&[echo_any.as_view(), held.as_view()])
        .unwrap();
    assert_eq!(strong(&held), 2, "the forwarded result owns one reference");
    drop(out);
    assert_eq!(strong(&held), 1);
    // A closure that stores a value and then fails: the caller sees the error and no value,
    // and the stored value is released.
    let store_then_fail = Function::from_packed_into({
        let held = held.clone();
        move |_: &[AnyView<'_>], result: &mut Any| {
            *result = held.clone();
            Err(Error::new(ErrorKind::ValueError, "stored, then failed"))
        }
    });
    assert_eq!(strong(&held), 2, "the closure's own copy");
    let err = store_then_fail.call_packed(&[]).unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    assert_eq!(
        strong(&held),
        2,
        "the value stored before the failure was released"
    );
    // Through the cell's safe-call, as C callers call it: the slot holds none after the failure.
    assert_failed_call_leaves_none(&store_then_fail, "ValueError");
    // A closure that stores a value and then panics: the same, through the panic boundary.
    let store_then_panic = Function::from_packed_into({
        let held = held.clone();
        move |_: &[AnyView<'_>], result: &mut Any| -> tvm_ffi::Result<()> {
            *result = held.clone();
            panic!("stored, then panicked")
        }
    });
    assert_failed_call_leaves_none(&store_then_panic, "InternalError");
    assert_eq!(
        strong(&held),
        3,
        "the value stored before the panic was released"
    );
    // Not a function: the cast's own TypeError.
    let err = apply.call_packed(&[Any::from(1i64).as_view()]).unwrap_err();
    assert_eq!(err.kind(), "TypeError");
    assert!(
        err.message().contains("`int` to `ffi.Function`"),
        "{}",
        err.message()
    );
}
