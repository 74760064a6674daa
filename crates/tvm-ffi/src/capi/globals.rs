//! Global functions registered by the core itself (`ffi.*`) and the testing functions
//! (`testing.*`) the test suites rely on.

use std::ffi::c_void;
use std::sync::OnceLock;

use crate::abi::{TVMFFISafeCallType, kTVMFFIObject};
use crate::any::{Any, AnyView};
use crate::containers::array::{Array, List};
use crate::containers::shape::Shape;
use crate::error::{Error, ErrorKind, Result};
use crate::function::Function;
use crate::object::{Object, ObjectRef, alloc_object};

use super::function::Registry;
use super::types::TypeTable;

/// A bare `ffi.Object` used as a process-wide sentinel.
fn sentinel(cell: &'static OnceLock<Any>) -> Any {
    cell.get_or_init(|| {
        // SAFETY: a bare header is a complete `ffi.Object`.
        let ptr = unsafe { alloc_object(Object::header(), 0, kTVMFFIObject) };
        // SAFETY: the new reference moves into the Any, kept for the process.
        Any::from_object(unsafe { ObjectRef::<Object>::from_raw(ptr.as_ptr().cast()) })
    })
    .clone()
}

fn owned_args(args: &[AnyView<'_>]) -> Result<Vec<Any>> {
    args.iter().map(AnyView::try_to_owned).collect()
}

fn list_functions() -> Vec<(&'static str, Function)> {
    vec![
        (
            "ffi.List",
            Function::from_packed(|args| {
                Ok(owned_args(args)?.into_iter().collect::<List>().into())
            }),
        ),
        (
            "ffi.ListSize",
            Function::from_typed("ffi.ListSize", |l: List| l.len() as i64),
        ),
        (
            "ffi.ListGetItem",
            Function::from_typed("ffi.ListGetItem", |l: List, i: i64| l.get(i)),
        ),
        (
            "ffi.ListSetItem",
            Function::from_typed("ffi.ListSetItem", |l: List, i: i64, v: Any| l.set(i, v)),
        ),
        (
            "ffi.ListAppend",
            Function::from_typed("ffi.ListAppend", |l: List, v: Any| l.push(v)),
        ),
        (
            "ffi.ListInsert",
            Function::from_typed("ffi.ListInsert", |l: List, i: i64, v: Any| l.insert(i, v)),
        ),
        (
            "ffi.ListPop",
            Function::from_typed("ffi.ListPop", |l: List, i: i64| l.remove(i)),
        ),
        (
            "ffi.ListErase",
            Function::from_typed("ffi.ListErase", |l: List, i: i64| l.remove(i).map(drop)),
        ),
        (
            "ffi.ListClear",
            Function::from_typed("ffi.ListClear", |l: List| l.clear()),
        ),
        (
            "ffi.ListContains",
            Function::from_typed("ffi.ListContains", |l: List, v: Any| {
                l.to_vec().contains(&v)
            }),
        ),
    ]
}

fn core_functions() -> Vec<(&'static str, Function)> {
    static INVALID: OnceLock<Any> = OnceLock::new();
    static KWARGS: OnceLock<Any> = OnceLock::new();
    vec![
        (
            "ffi.Array",
            Function::from_packed(|args| Ok(Array::from_vec(owned_args(args)?).into())),
        ),
        (
            "ffi.ArraySize",
            Function::from_typed("ffi.ArraySize", |a: Array| a.len() as i64),
        ),
        (
            "ffi.ArrayGetItem",
            Function::from_typed("ffi.ArrayGetItem", |a: Array, i: i64| a.at(i).cloned()),
        ),
        (
            "ffi.ArrayContains",
            Function::from_typed("ffi.ArrayContains", |a: Array, v: Any| {
                a.as_slice().contains(&v)
            }),
        ),
        (
            "ffi.Shape",
            Function::from_packed(|args| {
                let dims = args
                    .iter()
                    .map(|a| {
                        a.cast::<i64>().map_err(|_| {
                            Error::new(
                                ErrorKind::ValueError,
                                format!("Expect shape to take list of int arguments, got {a:?}"),
                            )
                        })
                    })
                    .collect::<Result<Vec<i64>>>()?;
                Ok(Shape::new(&dims).into())
            }),
        ),
        (
            "ffi.String",
            Function::from_typed("ffi.String", |s: crate::String| s),
        ),
        (
            "ffi.Bytes",
            Function::from_typed("ffi.Bytes", |b: crate::Bytes| b),
        ),
        (
            "ffi.GetGlobalFuncMetadata",
            Function::from_typed("ffi.GetGlobalFuncMetadata", |name: std::string::String| {
                Registry::global()
                    .with_entry(&name, |e| e.metadata.clone())
                    .ok_or_else(|| {
                        Error::new(
                            ErrorKind::KeyError,
                            format!("global function `{name}` is not registered"),
                        )
                    })
            }),
        ),
        (
            "ffi.GetGlobalFuncDoc",
            Function::from_typed("ffi.GetGlobalFuncDoc", |name: std::string::String| {
                Registry::global()
                    .with_entry(&name, |e| e.doc.clone())
                    .ok_or_else(|| {
                        Error::new(
                            ErrorKind::KeyError,
                            format!("global function `{name}` is not registered"),
                        )
                    })
            }),
        ),
        (
            "ffi.FunctionRemoveGlobal",
            Function::from_typed("ffi.FunctionRemoveGlobal", |name: std::string::String| {
                Registry::global().remove(&name)
            }),
        ),
        (
            "ffi.FunctionListGlobalNamesFunctor",
            Function::from_typed("ffi.FunctionListGlobalNamesFunctor", || {
                let names = Registry::global().names();
                Function::from_typed(
                    "ffi.FunctionListGlobalNames",
                    move |i: i64| -> Result<Any> {
                        if i < 0 {
                            return Ok((names.len() as i64).into());
                        }
                        names
                            .get(i as usize)
                            .map(|n| Any::from(n.as_str()))
                            .ok_or_else(|| {
                                Error::new(
                                    ErrorKind::IndexError,
                                    format!("name index {i} out of range"),
                                )
                            })
                    },
                )
            }),
        ),
        (
            "ffi.GetRegisteredTypeKeys",
            Function::from_typed("ffi.GetRegisteredTypeKeys", || {
                TypeTable::global().keys().into_iter().collect::<Array>()
            }),
        ),
        (
            "ffi.GetInvalidObject",
            Function::from_typed("ffi.GetInvalidObject", || sentinel(&INVALID)),
        ),
        (
            "ffi.GetKwargsObject",
            Function::from_typed("ffi.GetKwargsObject", || sentinel(&KWARGS)),
        ),
        (
            "ffi.FunctionFromExternC",
            Function::from_typed(
                "ffi.FunctionFromExternC",
                |self_: *mut c_void, safe_call: *mut c_void, deleter: *mut c_void| {
                    if safe_call.is_null() {
                        crate::bail!(ErrorKind::ValueError, "safe_call must not be NULL");
                    }
                    // SAFETY: the caller passes function addresses with the C signatures.
                    unsafe {
                        let safe_call: TVMFFISafeCallType = std::mem::transmute(safe_call);
                        let deleter: Option<unsafe extern "C" fn(*mut c_void)> =
                            std::mem::transmute(deleter);
                        Function::from_extern_c(self_, safe_call, deleter)
                    }
                },
            ),
        ),
    ]
}

fn environment_functions() -> Vec<(&'static str, Function)> {
    vec![
        (
            "ffi.SystemLibGetSymbol",
            Function::from_typed("ffi.SystemLibGetSymbol", |name: std::string::String| {
                super::env::system_lib_symbol(&name).map(|addr| addr as *mut c_void)
            }),
        ),
        (
            "ffi.GetContextSymbols",
            Function::from_typed("ffi.GetContextSymbols", || {
                super::env::context_symbols()
                    .into_iter()
                    .flat_map(|(name, addr)| [Any::from(name), Any::from(addr as *mut c_void)])
                    .collect::<Array>()
            }),
        ),
    ]
}

crate::define_object! {
    /// An object type with reflected fields, for the test suites of every language.
    pub(crate) struct TestIntPair : "testing.TestIntPair" extends Object {
        /// First value.
        pub(crate) a: i64,
        /// Second value.
        pub(crate) b: i64,
        /// A label.
        pub(crate) name: crate::String,
    }
}

fn testing_functions() -> Vec<(&'static str, Function)> {
    // Register the type now, so that frontends can bind classes to its key before first use.
    let _ = <TestIntPair as crate::ObjectCore>::type_index();
    vec![
        (
            "testing.make_int_pair",
            Function::from_typed(
                "testing.make_int_pair",
                |a: i64, b: i64, name: crate::String| {
                    ObjectRef::new(TestIntPair {
                        base: Object::header(),
                        a,
                        b,
                        name,
                    })
                },
            ),
        ),
        (
            "testing.int_pair_sum",
            Function::from_typed("testing.int_pair_sum", |p: ObjectRef<TestIntPair>| {
                p.a + p.b
            }),
        ),
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
            Function::from_packed(|args| {
                let (first, rest) = args.split_first().ok_or_else(|| {
                    Error::new(
                        ErrorKind::TypeError,
                        "testing.apply needs a function argument",
                    )
                })?;
                first.cast::<Function>()?.call_packed(rest)
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

/// The functions the registry starts with.
pub(crate) fn builtin_functions() -> Vec<(&'static str, Function)> {
    let mut all = core_functions();
    all.extend(list_functions());
    all.extend(environment_functions());
    all.extend(super::globals_map::functions());
    all.extend(testing_functions());
    all
}
