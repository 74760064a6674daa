//! Global functions registered by the core itself (`ffi.*`).

use std::ffi::c_void;
use std::sync::OnceLock;

use tvm_ffi::any::{Any, AnyView, TryFromAnyView};
use tvm_ffi::containers::array::{Array, ArrayObj, List};
use tvm_ffi::containers::shape::Shape;
use tvm_ffi::error::{Error, ErrorKind, Result};
use tvm_ffi::function::Function;
use tvm_ffi::object::{Object, ObjectRef, alloc_object};
use tvm_ffi_sys::{TVMFFISafeCallType, kTVMFFIObject};

use crate::registry::Registry;
use crate::types::TypeTable;

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

/// Slice assignment and deletion, reversal and reservation of lists (the Python `list` API).
fn list_slice_functions() -> Vec<(&'static str, Function)> {
    vec![
        (
            "ffi.ListReplaceSlice",
            Function::from_typed(
                "ffi.ListReplaceSlice",
                |l: List, start: i64, stop: i64, values: List| {
                    l.splice(start, stop, values.to_vec())
                },
            ),
        ),
        (
            "ffi.ListEraseRange",
            Function::from_typed("ffi.ListEraseRange", |l: List, start: i64, stop: i64| {
                l.splice(start, stop, Vec::new())
            }),
        ),
        (
            "ffi.ListReverse",
            Function::from_typed("ffi.ListReverse", |l: List| l.reverse()),
        ),
        (
            "ffi.ListReserve",
            Function::from_typed("ffi.ListReserve", |l: List, capacity: i64| {
                let capacity = usize::try_from(capacity)
                    .ok()
                    .filter(|&c| c <= isize::MAX as usize / size_of::<Any>())
                    .ok_or_else(|| {
                        Error::new(
                            ErrorKind::ValueError,
                            format!("ffi.ListReserve: capacity {capacity} is out of range"),
                        )
                    })?;
                l.reserve(capacity);
                Ok::<(), Error>(())
            }),
        ),
    ]
}

/// The array, shape, string and bytes constructors, the sentinels, and the functions that read
/// or change the registry and the type table (`registry` is the process's registry).
fn core_functions(registry: fn() -> &'static Registry) -> Vec<(&'static str, Function)> {
    static INVALID: OnceLock<Any> = OnceLock::new();
    static KWARGS: OnceLock<Any> = OnceLock::new();
    vec![
        (
            "ffi.Array",
            Function::from_packed(|args| Ok(Array::try_from_views(args)?.into())),
        ),
        (
            "ffi.ArraySize",
            Function::from_typed("ffi.ArraySize", |a: Array| a.len() as i64),
        ),
        (
            "ffi.ArrayGetItem",
            Function::from_typed_with_fast_path(
                "ffi.ArrayGetItem",
                |a: Array, i: i64| a.at(i).cloned(),
                // An array argument is borrowed; a list (copied by the adapter), a negative or
                // out-of-range index or a bad argument take the typed path.
                |args| match args {
                    [a, i] => {
                        let array = a.as_object::<ArrayObj>()?;
                        let i = usize::try_from(i64::try_from_view(i)?).ok()?;
                        array.get(i).cloned().map(Ok)
                    }
                    _ => None,
                },
            ),
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
            Function::from_typed("ffi.String", |s: tvm_ffi::String| s),
        ),
        (
            "ffi.Bytes",
            Function::from_typed("ffi.Bytes", |b: tvm_ffi::Bytes| b),
        ),
        (
            "ffi.GetGlobalFuncMetadata",
            Function::from_typed(
                "ffi.GetGlobalFuncMetadata",
                move |name: std::string::String| {
                    registry()
                        .with_entry(&name, |e| e.metadata.clone())
                        .ok_or_else(|| {
                            Error::new(
                                ErrorKind::KeyError,
                                format!("global function `{name}` is not registered"),
                            )
                        })
                },
            ),
        ),
        (
            "ffi.GetGlobalFuncDoc",
            Function::from_typed("ffi.GetGlobalFuncDoc", move |name: std::string::String| {
                registry()
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
            Function::from_typed(
                "ffi.FunctionRemoveGlobal",
                move |name: std::string::String| registry().remove(&name),
            ),
        ),
        (
            "ffi.FunctionListGlobalNamesFunctor",
            Function::from_typed("ffi.FunctionListGlobalNamesFunctor", move || {
                let names = registry().names();
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
                        tvm_ffi::bail!(ErrorKind::ValueError, "safe_call must not be NULL");
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
            // Called by library loaders before they load a library (see c_api_shim.rs).
            "ffi.ExportCApi",
            Function::from_typed("ffi.ExportCApi", crate::c_api_shim::export_c_api),
        ),
        (
            // Frames of a layer in another library (the Python glue) that backtraces hide:
            // five lists of text, as the fields of `FrameFilter`.
            "ffi.Backtrace.RegisterFrameFilter",
            Function::from_typed(
                "ffi.Backtrace.RegisterFrameFilter",
                |a: Array, b: Array, c: Array, d: Array, e: Array| -> Result<()> {
                    let text = |list: Array| -> Result<Vec<std::string::String>> {
                        list.iter().map(|item| item.cast()).collect()
                    };
                    crate::backtrace::register_frame_filter_text([
                        text(a)?,
                        text(b)?,
                        text(c)?,
                        text(d)?,
                        text(e)?,
                    ]);
                    Ok(())
                },
            ),
        ),
        (
            "ffi.SystemLibGetSymbol",
            Function::from_typed("ffi.SystemLibGetSymbol", |name: std::string::String| {
                crate::env::system_lib_symbol(&name).map(|addr| addr as *mut c_void)
            }),
        ),
        (
            "ffi.GetContextSymbols",
            Function::from_typed("ffi.GetContextSymbols", || {
                crate::env::context_symbols()
                    .into_iter()
                    .flat_map(|(name, addr)| [Any::from(name), Any::from(addr as *mut c_void)])
                    .collect::<Array>()
            }),
        ),
    ]
}

/// The functions the registry starts with; those that read or change the registry reach it
/// through `registry`, the accessor of the process's one registry.
pub(crate) fn builtin_functions(
    registry: fn() -> &'static Registry,
) -> Vec<(&'static str, Function)> {
    let mut all = core_functions(registry);
    all.extend(list_functions());
    all.extend(list_slice_functions());
    all.extend(environment_functions());
    all.extend(tvm_ffi::containers::map_globals::functions());
    all.extend(tvm_ffi::extra::reflection_globals::functions());
    all.extend(tvm_ffi::containers::devices::functions());
    all.extend(tvm_ffi::extra::dataclass::functions());
    all
}
