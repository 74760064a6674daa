//! Typed Rust functions exported from a `cdylib` as TVM FFI library symbols, the Rust twin of
//! C++'s `TVM_FFI_DLL_EXPORT_TYPED_FUNC`: [`export_typed_func!`](crate::export_typed_func)
//! writes `__tvm_ffi_<name>` (the function, with the safe-call convention a module loader
//! calls with a NULL handle), `__tvm_ffi__metadata_<name>` (its type schema) and, with a doc,
//! `__tvm_ffi__doc_<name>`. The library resolves the C API from the process that loads it (a
//! Python interpreter with `tvm`, or a program linking `libtvm_ffi.so`).
//!
//! ```ignore
//! tvm_ffi::export_typed_func!(add, |a: i64, b: i64| a + b, "Adds two integers.");
//! ```

use std::ffi::c_int;
use std::sync::OnceLock;

use crate::abi::TVMFFIAny;
use crate::boundary::ffi_status;
use crate::function::{Function, TypedFunction, args_slice, schema_metadata};
use crate::{Any, String};

/// The body of an exported function: `make` builds the function once, then every call runs it
/// with the packed arguments and stores its result.
///
/// # Safety
/// The safe-call convention: `args` holds `num_args` valid values and `result` is writable.
#[doc(hidden)]
pub unsafe fn call_export(
    cell: &OnceLock<Function>,
    name: &'static str,
    make: impl FnOnce() -> Function,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> c_int {
    ffi_status(name, || {
        let function = cell.get_or_init(make);
        // SAFETY: per the contract.
        let args = unsafe { args_slice(args, num_args) };
        let value = function.call_packed(args)?;
        // SAFETY: per the contract; the result owns the value now.
        unsafe { result.write(value.into_raw()) };
        Ok(())
    })
}

/// The body of an exported text (metadata or doc): a string result.
///
/// # Safety
/// As for [`call_export`].
#[doc(hidden)]
pub unsafe fn return_text(name: &'static str, text: &str, result: *mut TVMFFIAny) -> c_int {
    ffi_status(name, || {
        let value = Any::from(String::try_new(text)?);
        // SAFETY: per the contract.
        unsafe { result.write(value.into_raw()) };
        Ok(())
    })
}

/// The metadata JSON of typed closure `f` (`{"type_schema": ...}`).
#[doc(hidden)]
pub fn metadata_of<F: TypedFunction<Args>, Args>(_f: &F) -> std::string::String {
    schema_metadata(&F::type_schema())
}

/// Exports typed closure (or function) `$f` from a `cdylib` as the library function `$name`,
/// with its type schema and, when given, the doc `$doc`; see [`crate::export`].
#[macro_export]
macro_rules! export_typed_func {
    ($name:ident, $f:expr $(,)?) => {
        $crate::export_typed_func!(@symbol concat!("__tvm_ffi_", stringify!($name)),
            |args, num_args, result| {
                static FUNCTION: ::std::sync::OnceLock<$crate::Function> =
                    ::std::sync::OnceLock::new();
                let make = || $crate::Function::from_typed(stringify!($name), $f);
                let what = concat!("the export ", stringify!($name));
                // SAFETY: the safe-call convention of a library export.
                unsafe {
                    $crate::export::call_export(&FUNCTION, what, make, args, num_args, result)
                }
            });
        $crate::export_typed_func!(@symbol concat!("__tvm_ffi__metadata_", stringify!($name)),
            |_args, _num_args, result| {
                let text = $crate::export::metadata_of(&$f);
                let what = concat!("the metadata export of ", stringify!($name));
                // SAFETY: the safe-call convention of a library export.
                unsafe { $crate::export::return_text(what, &text, result) }
            });
    };
    ($name:ident, $f:expr, $doc:expr $(,)?) => {
        $crate::export_typed_func!($name, $f);
        $crate::export_typed_func!(@symbol concat!("__tvm_ffi__doc_", stringify!($name)),
            |_args, _num_args, result| {
                let what = concat!("the doc export of ", stringify!($name));
                // SAFETY: the safe-call convention of a library export.
                unsafe { $crate::export::return_text(what, $doc, result) }
            });
    };
    // One exported safe-call function named `$symbol` (the loader passes a NULL handle).
    (@symbol $symbol:expr, |$args:ident, $num_args:ident, $result:ident| $body:block) => {
        const _: () = {
            #[unsafe(export_name = $symbol)]
            unsafe extern "C" fn export(
                _handle: *mut ::std::ffi::c_void,
                $args: *const $crate::abi::TVMFFIAny,
                $num_args: i32,
                $result: *mut $crate::abi::TVMFFIAny,
            ) -> ::std::ffi::c_int $body
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use crate::abi::TVMFFIAny;

    #[test]
    fn the_export_bodies_call_once_made_functions_and_return_texts() {
        static CELL: OnceLock<Function> = OnceLock::new();
        let args = [Any::from(2i64), Any::from(3i64)];
        let raw: Vec<TVMFFIAny> = args.iter().map(|a| *a.as_raw()).collect();
        let mut result = TVMFFIAny::NONE;
        let make = || Function::from_typed("add", |a: i64, b: i64| a + b);
        // SAFETY: two valid arguments and a writable result.
        let status = unsafe { call_export(&CELL, "add", make, raw.as_ptr(), 2, &mut result) };
        assert_eq!(status, 0);
        // SAFETY: the call wrote an owned value.
        assert_eq!(unsafe { Any::from_raw(result) }.try_as::<i64>(), Some(5));

        // A wrong argument is the typed function's error, raised for the caller.
        let text = [*Any::from("x").as_raw(), raw[1]];
        let mut result = TVMFFIAny::NONE;
        let again = || panic!("made once");
        // SAFETY: as above.
        let status = unsafe { call_export(&CELL, "add", again, text.as_ptr(), 2, &mut result) };
        assert_eq!(status, -1);
        let error = Error::take_raised_or(crate::ErrorKind::RuntimeError, "none raised");
        assert_eq!(error.kind(), "TypeError");

        let mut result = TVMFFIAny::NONE;
        // SAFETY: a writable result.
        assert_eq!(unsafe { return_text("doc", "Adds.", &mut result) }, 0);
        // SAFETY: as above.
        let doc = unsafe { Any::from_raw(result) };
        assert_eq!(
            doc.try_as::<String>().map(|s| s.to_string()),
            Some("Adds.".into())
        );
        let metadata = metadata_of(&|a: i64, b: Option<f64>| a as f64 + b.unwrap_or(0.0));
        assert!(metadata.contains(r#"\"type\":\"Optional\""#), "{metadata}");
    }
}
