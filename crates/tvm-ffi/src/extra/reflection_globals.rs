//! The global functions (`ffi.*`) and types of the reflection-powered features: access paths,
//! structural equality and hashing, repr, deep copy, recursive comparison and JSON-graph
//! serialization. The core registers them at load through [`functions`].

use crate::Array;
use crate::any::Any;
use crate::error::Result;
use crate::extra::access_path;
use crate::extra::structural::{self, StructuralKey};
use crate::function::Function;

fn structural_functions() -> Vec<(&'static str, Function)> {
    vec![
        (
            "ffi.StructuralEqual",
            Function::from_typed(
                "ffi.StructuralEqual",
                |a: Any, b: Any, map_free_vars: bool, skip_tensor_content: bool| {
                    structural::structural_equal(
                        a.as_view(),
                        b.as_view(),
                        map_free_vars,
                        skip_tensor_content,
                    )
                },
            ),
        ),
        (
            "ffi.StructuralHash",
            Function::from_typed(
                "ffi.StructuralHash",
                |v: Any, map_free_vars: bool, skip_tensor_content: bool| -> Result<i64> {
                    structural::structural_hash(v.as_view(), map_free_vars, skip_tensor_content)
                        .map(|h| h as i64)
                },
            ),
        ),
        (
            "ffi.GetFirstStructuralMismatch",
            Function::from_typed(
                "ffi.GetFirstStructuralMismatch",
                |a: Any, b: Any, map_free_vars: bool, skip_tensor_content: bool| -> Result<Any> {
                    let mismatch = structural::first_structural_mismatch(
                        a.as_view(),
                        b.as_view(),
                        map_free_vars,
                        skip_tensor_content,
                    )?;
                    Ok(mismatch.map_or(Any::none(), |(l, r)| {
                        Array::from_vec(vec![l.into(), r.into()]).into()
                    }))
                },
            ),
        ),
        (
            "ffi.StructuralKey",
            Function::from_typed("ffi.StructuralKey", StructuralKey::new),
        ),
        (
            "ffi.StructuralKeyEqual",
            Function::from_typed("ffi.StructuralKeyEqual", |a: Any, b: Any| {
                let key = |v: Any| match v.cast::<StructuralKey>() {
                    Ok(k) => Ok(k),
                    Err(_) => StructuralKey::new(v),
                };
                key(a)?.key_equal(&key(b)?)
            }),
        ),
    ]
}

fn copy_and_compare_functions() -> Vec<(&'static str, Function)> {
    use crate::extra::recursive_compare::{recursive_cmp, recursive_eq, recursive_hash};
    use std::cmp::Ordering;
    fn order(name: &'static str, accept: fn(Ordering) -> bool) -> (&'static str, Function) {
        (
            name,
            Function::from_typed(name, move |a: Any, b: Any| -> Result<bool> {
                Ok(accept(recursive_cmp(a.as_view(), b.as_view())?))
            }),
        )
    }
    vec![
        (
            "ffi.DeepCopy",
            Function::from_typed("ffi.DeepCopy", |v: Any| {
                crate::extra::deep_copy::deep_copy(v.as_view())
            }),
        ),
        (
            "ffi.BreakCycles",
            Function::from_typed("ffi.BreakCycles", |v: Any| -> Result<i64> {
                crate::extra::cycles::break_cycles(v.as_view()).map(|n| n as i64)
            }),
        ),
        (
            "ffi.RecursiveEq",
            Function::from_typed("ffi.RecursiveEq", |a: Any, b: Any| {
                recursive_eq(a.as_view(), b.as_view())
            }),
        ),
        (
            "ffi.RecursiveHash",
            Function::from_typed("ffi.RecursiveHash", |v: Any| -> Result<i64> {
                recursive_hash(v.as_view()).map(|h| h as i64)
            }),
        ),
        order("ffi.RecursiveLt", Ordering::is_lt),
        order("ffi.RecursiveLe", Ordering::is_le),
        order("ffi.RecursiveGt", Ordering::is_gt),
        order("ffi.RecursiveGe", Ordering::is_ge),
    ]
}

fn serialization_functions() -> Vec<(&'static str, Function)> {
    use crate::extra::serialization::{self as ser, json};
    vec![
        (
            "ffi.ToJSONGraph",
            Function::from_typed("ffi.ToJSONGraph", |v: Any, metadata: Any| {
                ser::to_json_graph(v.as_view(), metadata.as_view())
            }),
        ),
        (
            "ffi.ToJSONGraphString",
            Function::from_typed("ffi.ToJSONGraphString", |v: Any, metadata: Any| {
                ser::to_json_graph_string(v.as_view(), metadata.as_view())
            }),
        ),
        (
            "ffi.FromJSONGraph",
            Function::from_typed("ffi.FromJSONGraph", |graph: Any| {
                ser::from_json_graph(graph.as_view())
            }),
        ),
        (
            "ffi.FromJSONGraphString",
            Function::from_typed("ffi.FromJSONGraphString", |text: std::string::String| {
                ser::from_json_graph_string(&text)
            }),
        ),
        (
            "ffi.json.Parse",
            Function::from_typed("ffi.json.Parse", |text: std::string::String| {
                json::parse(&text)
            }),
        ),
        (
            "ffi.json.Stringify",
            Function::from_typed("ffi.json.Stringify", |v: Any, indent: Option<i64>| {
                json::stringify(v.as_view(), indent.map(|n| n.max(0) as usize))
            }),
        ),
    ]
}

/// Registers the types of these features (with their methods and type attributes) and returns
/// their global functions, for the core to register at load.
pub fn functions() -> Vec<(&'static str, Function)> {
    // A failure here means a second copy of the runtime registered the types first; their
    // functions still work with the types as registered.
    let _ = access_path::register();
    let _ = structural::register_types();
    let _ = crate::extra::enums::register();
    let mut all = structural_functions();
    all.extend(structural::visit::functions());
    all.extend(structural::mutate::functions());
    all.extend(copy_and_compare_functions());
    all.extend(serialization_functions());
    all.push(("ffi.ReprPrint", crate::extra::repr::repr_function()));
    all
}
