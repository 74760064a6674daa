//! The `testing.*` global functions and the `testing.TestIntPair` object type that the test
//! suites of every language rely on, kept out of the runtime's registry as apache-tvm-ffi keeps
//! them in `libtvm_ffi_testing`.
//!
//! It also brings the simulated device `ext_dev` (the runtime's test backend, registered through
//! the C device table) and `testing.device_stats`.
//!
//! Rust suites link this crate and call [`register`]; the Python suite loads the shared library
//! `libtvm_ffi_testing.so`, which registers everything when it is loaded (on Linux through an
//! `.init_array` entry). Either way the functions land in the registry of the process's runtime:
//! this crate defines no C API of its own.

mod device;

use std::sync::Once;

// Unit tests run in a binary of their own, which links the process state.
#[cfg(test)]
use tvm_ffi_capi as _;

use tvm_ffi::function::FunctionObj;
use tvm_ffi::{Any, Error, ErrorKind, Function, Object, ObjectRef};

tvm_ffi::define_object! {
    /// An object type with reflected fields, for the test suites of every language.
    pub struct TestIntPair : "testing.TestIntPair" extends Object {
        /// First value.
        pub a: i64,
        /// Second value.
        pub b: i64,
        /// A label.
        pub name: tvm_ffi::String,
    }
}

fn testing_functions() -> Vec<(&'static str, Function)> {
    // Register the type now, so that frontends can bind classes to its key before first use.
    let _ = <TestIntPair as tvm_ffi::ObjectCore>::type_index();
    vec![
        (
            "testing.echo",
            Function::from_packed(|args| match args {
                [value] => value.try_to_owned(),
                _ => Err(Error::new(
                    ErrorKind::TypeError,
                    format!("testing.echo takes 1 argument, got {}", args.len()),
                )),
            }),
        ),
        ("testing.nop", Function::from_packed(|_| Ok(Any::none()))),
        (
            "testing.apply",
            Function::from_packed_into(|args, result| {
                let (first, rest) = args.split_first().ok_or_else(|| {
                    Error::new(
                        ErrorKind::TypeError,
                        "testing.apply needs a function argument",
                    )
                })?;
                // Borrowed (the function is only called: no reference count round trip), and
                // its result lands in this call's own result slot.
                first
                    .cast_object::<FunctionObj>()?
                    .call_packed_into(rest, result)
            }),
        ),
        (
            "testing.test_raise_error",
            Function::from_typed(
                "testing.test_raise_error",
                |kind: std::string::String, msg: std::string::String| {
                    Err::<(), Error>(Error::new(kind, msg))
                },
            ),
        ),
        (
            "testing.describe_error",
            Function::from_packed(|args| {
                let (first, rest) = args.split_first().ok_or_else(|| {
                    Error::new(
                        ErrorKind::TypeError,
                        "testing.describe_error needs a function",
                    )
                })?;
                match first.cast::<Function>()?.call_packed(rest) {
                    Ok(_) => Ok(Any::none()),
                    Err(err) => Ok(Any::from(format!("{}: {}", err.kind(), err.message()))),
                }
            }),
        ),
        (
            "testing.object_use_count",
            Function::from_packed(|args| match args {
                [value] => {
                    let obj = value.as_object_ptr().ok_or_else(|| {
                        Error::new(
                            ErrorKind::TypeError,
                            format!("expected an object, got {value:?}"),
                        )
                    })?;
                    // SAFETY: the argument borrows a live object.
                    let count = unsafe { (*obj.cast::<Object>()).strong_count() };
                    Ok(i64::from(count).into())
                }
                _ => Err(Error::new(
                    ErrorKind::TypeError,
                    "testing.object_use_count takes 1 argument",
                )),
            }),
        ),
    ]
}

/// Registers the typed functions of [`TestIntPair`] with their documentation and type schemas
/// (what stub generators read); a name already taken keeps its function.
fn register_typed_functions() {
    let _ = Function::register_typed_global(
        "testing.make_int_pair",
        |a: i64, b: i64, name: tvm_ffi::String| {
            ObjectRef::new(TestIntPair {
                base: Object::header(),
                a,
                b,
                name,
            })
        },
        "A TestIntPair of a, b and a label.",
    );
    let _ = Function::register_typed_global(
        "testing.int_pair_sum",
        |p: ObjectRef<TestIntPair>| p.a + p.b,
        "The sum of a pair's two values.",
    );
}

/// Registers the testing functions and types in the process's registry, and the simulated
/// device `ext_dev` when the process's runtime has a device registry (once; later calls do
/// nothing). A name already taken keeps its function.
pub fn register() {
    static DONE: Once = Once::new();
    DONE.call_once(|| {
        for (name, function) in testing_functions() {
            let _ = function.register_global(name, false);
        }
        register_typed_functions();
        device::register();
    });
}

/// Registers everything when the shared library (or a program linking this crate) is loaded.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static REGISTER_AT_LOAD: extern "C" fn() = {
    extern "C" fn register_at_load() {
        // Nothing may unwind out of a loader callback.
        tvm_ffi::boundary::ffi_boundary("the load-time registration of tvm-ffi-testing", register);
    }
    register_at_load
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_when_the_binary_loads() {
        // No call to `register`: the loader ran it.
        let echo = Function::get_global("testing.echo").expect("testing.echo is registered");
        assert_eq!(echo.call((5i64,)).unwrap().cast::<i64>().unwrap(), 5);
        register();
        let pair = Function::get_global("testing.make_int_pair").unwrap();
        let sum = Function::get_global("testing.int_pair_sum").unwrap();
        let p = pair.call((2i64, 3i64, "p")).unwrap();
        assert_eq!(sum.call((p,)).unwrap().cast::<i64>().unwrap(), 5);
    }
}
