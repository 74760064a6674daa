//! The `ffi.Map*` and `ffi.Dict*` global functions, which the runtime's state registers at start-up.

use std::sync::{Mutex, OnceLock};

use crate::any::{Any, AnyView};
use crate::containers::map::{
    Cursor, Dict, DictObj, Map, MapBaseObj, MapObj, MapRead, cursor_of, lock_if_dict,
};
use crate::error::{Error, ErrorKind, Result};
use crate::function::Function;

/// Checks that `(k0, v0, k1, v1, ...)` pairs up, or a `ValueError` naming an odd count.
fn check_pairs(name: &str, args: &[AnyView<'_>]) -> Result<()> {
    if !args.len().is_multiple_of(2) {
        crate::bail!(
            ErrorKind::ValueError,
            "{name} expects an even number of arguments (key, value, ...), got {}",
            args.len()
        );
    }
    Ok(())
}

/// `ffi.Map(k0, v0, k1, v1, ...)`: the table is sized once for all pairs, and each pair is
/// converted and inserted in turn (a later duplicate key replaces the value, keeping the
/// first position).
fn map_from_args(args: &[AnyView<'_>]) -> Result<Map> {
    check_pairs("ffi.Map", args)?;
    let mut map = Map::with_capacity(args.len() / 2);
    for pair in args.chunks_exact(2) {
        map.insert(pair[0].try_to_owned()?, pair[1].try_to_owned()?);
    }
    Ok(map)
}

/// `ffi.Dict(k0, v0, k1, v1, ...)`, as [`map_from_args`].
fn dict_from_args(args: &[AnyView<'_>]) -> Result<Dict> {
    check_pairs("ffi.Dict", args)?;
    let dict = Dict::with_capacity(args.len() / 2);
    for pair in args.chunks_exact(2) {
        dict.insert(pair[0].try_to_owned()?, pair[1].try_to_owned()?);
    }
    Ok(dict)
}

/// The `KeyError` of a missing key.
fn missing_key(key: &Any, container: &str) -> Error {
    Error::new(
        ErrorKind::KeyError,
        format!("key {key:?} is not in {container}"),
    )
}

/// The process-wide MISSING sentinel (global `ffi.GetInvalidObject`), cached once found.
fn missing_sentinel() -> Result<Any> {
    static SENTINEL: OnceLock<Any> = OnceLock::new();
    if let Some(value) = SENTINEL.get() {
        return Ok(value.clone());
    }
    let value = Function::get_global_required("ffi.GetInvalidObject")?.call(())?;
    Ok(SENTINEL.get_or_init(|| value).clone())
}

/// The iteration state of a forward-iterator functor: the container (kept alive) and a cursor.
struct IterState {
    _container: Any,
    obj: *mut MapBaseObj,
    cursor: Cursor,
}

// SAFETY: the state is only touched under the functor's mutex; the container reference keeps
// the object alive, and the cursor re-validates every step against the live table.
unsafe impl Send for IterState {}

/// `f(container)` → functor `g`: `g(0)` current key, `g(1)` current value, `g(2)` advance
/// (whether an entry remains).
fn forward_iter_functor(name: &'static str, container: Any) -> Result<Function> {
    let (obj, cursor) = cursor_of(&container).ok_or_else(|| {
        Error::new(
            ErrorKind::TypeError,
            format!("{name} expects a map or dict"),
        )
    })?;
    let state = Mutex::new(IterState {
        _container: container,
        obj,
        cursor,
    });
    Ok(Function::from_typed(
        name,
        move |command: i64| -> Result<Any> {
            let mut state = state
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let IterState { obj, cursor, .. } = &mut *state;
            // SAFETY: `container` keeps the object alive.
            let _lock = unsafe { lock_if_dict(*obj) };
            match command {
                0 | 1 => {
                    // SAFETY: `container` keeps the object alive.
                    let (key, value) = unsafe { cursor.current(*obj) }.ok_or_else(|| {
                        Error::new(
                            ErrorKind::IndexError,
                            format!("{name}: iterator is at the end"),
                        )
                    })?;
                    Ok(if command == 0 { key } else { value })
                }
                // SAFETY: `container` keeps the object alive.
                2 => Ok(Any::from(unsafe { cursor.advance(*obj) })),
                other => crate::bail!(
                    ErrorKind::ValueError,
                    "{name}: unknown command {other} (0: key, 1: value, 2: advance)"
                ),
            }
        },
    ))
}

/// The map and dict global functions.
pub fn functions() -> Vec<(&'static str, Function)> {
    vec![
        (
            "ffi.Map",
            Function::from_packed(|args| Ok(map_from_args(args)?.into())),
        ),
        (
            "ffi.MapSize",
            Function::from_typed("ffi.MapSize", |m: Map| m.len() as i64),
        ),
        (
            "ffi.MapGetItem",
            Function::from_typed_with_fast_path(
                "ffi.MapGetItem",
                |m: Map, k: Any| m.get(&k).ok_or_else(|| missing_key(&k, "Map")),
                // A map argument is borrowed; a dict (copied by the adapter), a missing key or
                // a bad argument take the typed path.
                |args| match args {
                    [m, k] => m.as_object::<MapObj>()?.get(k).map(Ok),
                    _ => None,
                },
            ),
        ),
        (
            "ffi.MapCount",
            Function::from_typed("ffi.MapCount", |m: Map, k: Any| {
                i64::from(m.contains_key(&k))
            }),
        ),
        (
            "ffi.MapGetItemOrMissing",
            Function::from_typed("ffi.MapGetItemOrMissing", |m: Map, k: Any| {
                m.get(&k).map_or_else(missing_sentinel, Ok)
            }),
        ),
        (
            "ffi.MapForwardIterFunctor",
            Function::from_typed("ffi.MapForwardIterFunctor", |m: Map| {
                forward_iter_functor("ffi.MapForwardIterFunctor", m.into())
            }),
        ),
        (
            "ffi.Dict",
            Function::from_packed(|args| Ok(dict_from_args(args)?.into())),
        ),
        (
            "ffi.DictSize",
            Function::from_typed("ffi.DictSize", |d: Dict| d.len() as i64),
        ),
        (
            "ffi.DictGetItem",
            Function::from_typed_with_fast_path(
                "ffi.DictGetItem",
                |d: Dict, k: Any| d.get(&k).ok_or_else(|| missing_key(&k, "Dict")),
                // A dict argument is borrowed; a missing key or a bad argument take the typed
                // path.
                |args| match args {
                    [d, k] => d.as_object::<DictObj>()?.get(k).map(Ok),
                    _ => None,
                },
            ),
        ),
        (
            "ffi.DictSetItem",
            Function::from_typed("ffi.DictSetItem", |d: Dict, k: Any, v: Any| {
                d.insert(k, v);
            }),
        ),
        (
            "ffi.DictCount",
            Function::from_typed("ffi.DictCount", |d: Dict, k: Any| {
                i64::from(d.contains_key(&k))
            }),
        ),
        (
            "ffi.DictErase",
            Function::from_typed("ffi.DictErase", |d: Dict, k: Any| {
                d.remove(&k);
            }),
        ),
        (
            "ffi.DictClear",
            Function::from_typed("ffi.DictClear", |d: Dict| d.clear()),
        ),
        (
            "ffi.DictForwardIterFunctor",
            Function::from_typed("ffi.DictForwardIterFunctor", |d: Dict| {
                forward_iter_functor("ffi.DictForwardIterFunctor", d.into())
            }),
        ),
        (
            "ffi.DictGetItemOrMissing",
            Function::from_typed("ffi.DictGetItemOrMissing", |d: Dict, k: Any| {
                d.get(&k).map_or_else(missing_sentinel, Ok)
            }),
        ),
    ]
}
