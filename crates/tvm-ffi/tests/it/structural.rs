//! Structural equality and hashing, mismatch paths, repr, deep copy, recursive comparison and
//! JSON-graph serialization of Rust-defined objects and containers.

use tvm_ffi::extra::deep_copy::deep_copy;
use tvm_ffi::extra::recursive_compare::{recursive_cmp, recursive_eq, recursive_hash};
use tvm_ffi::extra::repr::repr;
use tvm_ffi::extra::serialization::{from_json_graph_string, json, to_json_graph_string};
use tvm_ffi::extra::structural::{first_structural_mismatch, structural_equal, structural_hash};
use tvm_ffi::{Any, Array, Dict, Map, Object, ObjectRef, define_object};

define_object! {
    /// A node with a plain field, a string and a child.
    pub struct SNode : "test.structural.Node" extends Object {
        pub value: i64,
        pub name: tvm_ffi::String,
        pub child: Any,
    }
}

pub(crate) fn node(value: i64, child: impl Into<Any>) -> Any {
    ObjectRef::new(SNode {
        base: Object::header(),
        value,
        name: "n".into(),
        child: child.into(),
    })
    .into()
}

fn arr(items: Vec<Any>) -> Any {
    Array::from_vec(items).into()
}

fn map(entries: &[(&str, Any)]) -> Any {
    let mut m = Map::new();
    for (k, v) in entries {
        m.insert(*k, v.clone());
    }
    m.into()
}

#[test]
fn structural_equality_follows_content() {
    let a = node(1, arr(vec![1.into(), "x".into()]));
    let b = node(1, arr(vec![1.into(), "x".into()]));
    let c = node(1, arr(vec![1.into(), "y".into()]));
    assert!(structural_equal(a.as_view(), b.as_view(), false, false).unwrap());
    assert!(!structural_equal(a.as_view(), c.as_view(), false, false).unwrap());
    let h = |v: &Any| structural_hash(v.as_view(), false, false).unwrap();
    assert_eq!(h(&a), h(&b));
    assert_ne!(h(&a), h(&c));
    // Maps compare in any order; int and float differ; NaN equals NaN.
    let m1 = map(&[("a", 1.into()), ("b", 2.into())]);
    let m2 = map(&[("b", 2.into()), ("a", 1.into())]);
    assert!(structural_equal(m1.as_view(), m2.as_view(), false, false).unwrap());
    assert_eq!(h(&m1), h(&m2));
    let d: Any = Dict::new().into();
    assert!(!structural_equal(Any::from(Map::new()).as_view(), d.as_view(), false, false).unwrap());
    assert!(
        !structural_equal(
            Any::from(1).as_view(),
            Any::from(1.0).as_view(),
            false,
            false
        )
        .unwrap()
    );
    assert!(
        structural_equal(
            Any::from(f64::NAN).as_view(),
            Any::from(f64::NAN).as_view(),
            false,
            false
        )
        .unwrap()
    );
}

fn same(a: &Any, b: &Any) -> bool {
    a.as_object_ptr() == b.as_object_ptr()
}

#[test]
fn first_mismatch_names_both_paths() {
    let a = arr(vec![1.into(), node(2, arr(vec![3.into()]))]);
    let b = arr(vec![1.into(), node(2, arr(vec![4.into()]))]);
    let (l, r) = first_structural_mismatch(a.as_view(), b.as_view(), false, false)
        .unwrap()
        .unwrap();
    assert_eq!(l.to_text().unwrap(), "<root>[1].child[0]");
    assert_eq!(r.to_text().unwrap(), "<root>[1].child[0]");
    let short = arr(vec![1.into()]);
    let (l, r) = first_structural_mismatch(a.as_view(), short.as_view(), false, false)
        .unwrap()
        .unwrap();
    assert_eq!(
        (l.to_text().unwrap().as_str(), r.to_text().unwrap().as_str()),
        ("<root>[1]", "<root>[<missing:1>]")
    );
    let m1 = map(&[("a", 1.into())]);
    let m2 = map(&[("a", 1.into()), ("b", 2.into())]);
    let (l, r) = first_structural_mismatch(m1.as_view(), m2.as_view(), false, false)
        .unwrap()
        .unwrap();
    assert_eq!(l.to_text().unwrap(), r#"<root>[<missing:"b">]"#);
    assert_eq!(r.to_text().unwrap(), r#"<root>["b"]"#);
    assert!(
        first_structural_mismatch(a.as_view(), a.as_view(), false, false)
            .unwrap()
            .is_none()
    );
}

#[test]
fn functions_are_not_structurally_comparable() {
    let f: Any = tvm_ffi::Function::from_typed("f", || 1i64).into();
    let err = structural_hash(f.as_view(), false, false).unwrap_err();
    assert_eq!(err.kind(), "TypeError");
    assert!(err.message().contains("ffi.Function"), "{err}");
}

#[test]
fn repr_prints_python_literals() {
    let v = arr(vec![
        1.into(),
        "a\"b".into(),
        Any::none(),
        true.into(),
        2.5.into(),
        arr(vec![3.into()]),
    ]);
    assert_eq!(
        repr(v.as_view()).unwrap(),
        r#"(1, "a\"b", None, True, 2.5, (3,))"#
    );
    let n = node(7, map(&[("k", 1.into())]));
    assert_eq!(
        repr(n.as_view()).unwrap(),
        r#"test.structural.Node(value=7, name="n", child={"k": 1})"#
    );
}

#[test]
fn deep_copy_keeps_sharing_and_content() {
    let shared = arr(vec![1.into()]);
    let n = node(1, arr(vec![shared.clone(), shared.clone()]));
    let copy = deep_copy(n.as_view()).unwrap();
    assert!(!same(&copy, &n));
    assert!(structural_equal(copy.as_view(), n.as_view(), false, false).unwrap());
    let child = copy
        .as_object::<SNode>()
        .unwrap()
        .child
        .cast::<Array>()
        .unwrap();
    assert!(same(&child.as_slice()[0], &child.as_slice()[1]));
    assert!(!same(&child.as_slice()[0], &shared));
    let f: Any = tvm_ffi::Function::from_typed("f", || 1i64).into();
    assert!(
        deep_copy(f.as_view())
            .unwrap_err()
            .message()
            .contains("ffi.Function")
    );
}

#[test]
fn recursive_comparison_orders_and_hashes() {
    let a = arr(vec![1.into(), 2.into()]);
    let b = arr(vec![1.into(), 3.into()]);
    assert!(recursive_cmp(a.as_view(), b.as_view()).unwrap().is_lt());
    assert!(recursive_eq(a.as_view(), arr(vec![1.into(), 2.into()]).as_view()).unwrap());
    assert_eq!(
        recursive_hash(a.as_view()).unwrap(),
        recursive_hash(arr(vec![1.into(), 2.into()]).as_view()).unwrap()
    );
    let err = recursive_cmp(Any::from(1).as_view(), Any::from(2.5).as_view()).unwrap_err();
    assert_eq!(err.kind(), "TypeError");
}

#[test]
fn json_graph_round_trips_in_the_original_format() {
    let text = to_json_graph_string(
        arr(vec![42.into(), 42.into(), "s".into()]).as_view(),
        Any::none().as_view(),
    )
    .unwrap();
    assert_eq!(
        text,
        r#"{"root_index":2,"nodes":[{"type":"int","data":42},{"type":"ffi.String","data":"s"},{"type":"ffi.Array","data":[0,0,1]}]}"#
    );
    let n = node(5, map(&[("k", arr(vec![1.5.into()]))]));
    let text = to_json_graph_string(n.as_view(), Any::none().as_view()).unwrap();
    assert!(
        text.contains(r#""type":"test.structural.Node","data":{"value":5,"#),
        "{text}"
    );
    let back = from_json_graph_string(&text).unwrap();
    assert!(structural_equal(back.as_view(), n.as_view(), false, false).unwrap());
}

#[test]
fn json_graph_refuses_bad_input() {
    for bad in [
        "",
        "not json",
        r#"{"nodes": []}"#,
        r#"{"root_index": 0}"#,
        r#"{"root_index": 3, "nodes": []}"#,
        r#"{"root_index": 0, "nodes": [{"type": "ffi.Array", "data": [0]}]}"#,
    ] {
        let err = from_json_graph_string(bad).unwrap_err();
        assert_eq!(err.kind(), "ValueError", "{bad}: {err}");
    }
    let err = from_json_graph_string(
        r#"{"root_index": 0, "nodes": [{"type": "no.such.Type", "data": {}}]}"#,
    )
    .unwrap_err();
    assert_eq!(err.kind(), "KeyError");
    assert!(err.message().contains("no.such.Type"));
    // A cycle through a mutable container cannot be written.
    let list = tvm_ffi::List::new();
    list.push(node(1, list.clone()));
    let err =
        to_json_graph_string(Any::from(list.clone()).as_view(), Any::none().as_view()).unwrap_err();
    assert!(err.message().contains("cyclic"), "{err}");
    list.clear();
    assert!(json::parse("[1,]").is_err());
}

#[test]
fn recursive_comparison_handles_cycles() {
    let make = |v: i64| {
        let list = tvm_ffi::List::new();
        list.push(v);
        list.push(arr(vec![list.clone().into()]));
        list
    };
    let (a, b, c) = (make(1), make(1), make(2));
    let (va, vb, vc) = (
        Any::from(a.clone()),
        Any::from(b.clone()),
        Any::from(c.clone()),
    );
    assert!(recursive_eq(va.as_view(), vb.as_view()).unwrap());
    assert!(!recursive_eq(va.as_view(), vc.as_view()).unwrap());
    assert_eq!(
        recursive_hash(va.as_view()).unwrap(),
        recursive_hash(vb.as_view()).unwrap()
    );
    for list in [a, b, c] {
        list.clear();
    }
}

/// The text apache-tvm-ffi 0.1.15 writes for the same value (recorded from it): ours writes it
/// byte for byte and reads it back.
const REFERENCE_GRAPH: &str = r#"{"root_index":22,"nodes":[{"type":"int","data":1},{"type":"float","data":2.5},{"type":"ffi.String","data":"short"},{"type":"ffi.String","data":"xxxxxxxxxxxxxxxxxxxx"},{"type":"None"},{"type":"bool","data":true},{"type":"ffi.String","data":"k"},{"type":"int","data":3},{"type":"ffi.String","data":"s"},{"type":"ffi.Array","data":[7,8]},{"type":"ffi.String","data":"n"},{"type":"ffi.String","data":"d"},{"type":"float","data":1.0000000000000001e+300},{"type":"ffi.Map","data":[11,12]},{"type":"ffi.Map","data":[6,9,10,13]},{"type":"ffi.Bytes","data":"YnkAdGVz"},{"type":"DataType","data":"float32x4"},{"type":"Device","data":[2,1]},{"type":"ffi.Shape","data":[2,3]},{"type":"ffi.String","data":"a"},{"type":"ffi.List","data":[0]},{"type":"ffi.Dict","data":[19,20]},{"type":"ffi.Array","data":[0,1,2,3,4,5,14,15,16,17,18,21]}]}"#;

#[test]
fn json_graph_text_matches_the_reference_runtime() {
    let dict = Dict::new();
    dict.insert("a", tvm_ffi::List::from_iter([Any::from(1)]));
    let value = arr(vec![
        1.into(),
        2.5.into(),
        "short".into(),
        "x".repeat(20).into(),
        Any::none(),
        true.into(),
        map(&[
            ("k", arr(vec![3.into(), "s".into()])),
            ("n", map(&[("d", 1e300.into())])),
        ]),
        tvm_ffi::Bytes::from_bytes(b"by\0tes").into(),
        "float32x4".parse::<tvm_ffi::DataType>().unwrap().into(),
        tvm_ffi::Device::new(2, 1).into(),
        tvm_ffi::Shape::new(&[2, 3]).into(),
        dict.into(),
    ]);
    let text = to_json_graph_string(value.as_view(), Any::none().as_view()).unwrap();
    assert_eq!(text, REFERENCE_GRAPH);
    let back = from_json_graph_string(REFERENCE_GRAPH).unwrap();
    assert!(structural_equal(back.as_view(), value.as_view(), false, false).unwrap());
}

#[test]
fn recursive_comparison_walks_reflected_fields_maps_and_big_integers() {
    let big = || tvm_ffi::extra::bigint_text::from_decimal("99999999999999999999999").unwrap();
    let dict = |v: i64| -> Any {
        let d = Dict::new();
        d.insert("k", Any::from(v));
        d.into()
    };
    let a = node(1, arr(vec![map(&[("x", big())]), dict(3)]));
    let same = node(1, arr(vec![map(&[("x", big())]), dict(3)]));
    let other_dict = node(1, arr(vec![map(&[("x", big())]), dict(4)]));
    let other_value = node(2, arr(vec![map(&[("x", big())]), dict(3)]));
    assert!(recursive_eq(a.as_view(), same.as_view()).unwrap());
    assert!(!recursive_eq(a.as_view(), other_dict.as_view()).unwrap());
    assert!(!recursive_eq(a.as_view(), other_value.as_view()).unwrap());
    assert_eq!(
        recursive_hash(a.as_view()).unwrap(),
        recursive_hash(same.as_view()).unwrap()
    );
    assert_ne!(
        recursive_hash(a.as_view()).unwrap(),
        recursive_hash(other_value.as_view()).unwrap()
    );
    assert_eq!(
        recursive_cmp(a.as_view(), other_value.as_view()).unwrap(),
        std::cmp::Ordering::Less
    );
    // Maps have no order: equal ones compare equal, unequal ones cannot be ordered.
    assert!(recursive_cmp(same.as_view(), a.as_view()).unwrap().is_eq());
    let err = recursive_cmp(a.as_view(), other_dict.as_view()).unwrap_err();
    assert_eq!(err.kind(), "TypeError", "{err}");
    let small = tvm_ffi::extra::bigint_text::from_decimal("-99999999999999999999999").unwrap();
    assert!(!recursive_eq(big().as_view(), small.as_view()).unwrap());
    assert!(
        !recursive_eq(
            map(&[("x", big())]).as_view(),
            map(&[("y", big())]).as_view()
        )
        .unwrap()
    );
}

define_object! {
    /// A node whose structural comparison is its type's own hooks: only `value` counts.
    pub struct HookedNode : "test.structural.HookedNode" extends Object {
        pub value: i64,
        pub ignored: i64,
    }
}

#[test]
fn types_compare_and_hash_through_their_own_hooks() {
    use tvm_ffi::{Function, ObjectCore};
    let equal_hook = Function::from_packed(|args| {
        let compare: Function = args[2].cast()?;
        let value = |v: &tvm_ffi::AnyView<'_>| v.cast::<ObjectRef<HookedNode>>().map(|n| n.value);
        compare.call((value(&args[0])?, value(&args[1])?, 0i64, "value"))
    });
    let hash_hook = Function::from_packed(|args| {
        let fold: Function = args[2].cast()?;
        let node: ObjectRef<HookedNode> = args[0].cast()?;
        fold.call((node.value, args[1].cast::<i64>()?, 0i64))
    });
    let index = HookedNode::type_index();
    tvm_ffi::reflection::register_type_attr(index, "__s_equal__", &Any::from(equal_hook)).unwrap();
    tvm_ffi::reflection::register_type_attr(index, "__s_hash__", &Any::from(hash_hook)).unwrap();
    let make = |value, ignored| -> Any {
        ObjectRef::new(HookedNode {
            base: Object::header(),
            value,
            ignored,
        })
        .into()
    };
    let (a, b, c) = (make(1, 10), make(1, 20), make(2, 10));
    assert!(structural_equal(a.as_view(), b.as_view(), false, false).unwrap());
    assert!(!structural_equal(a.as_view(), c.as_view(), false, false).unwrap());
    let hash = |v: &Any| structural_hash(v.as_view(), false, false).unwrap();
    assert_eq!(hash(&a), hash(&b));
    assert_ne!(hash(&a), hash(&c));
}

define_object! {
    /// A node that JSON graphs write through its type's hooks (`__data_to_json__` and
    /// `__data_from_json__`): as its number alone, read back as the one instance of that number.
    pub struct InternedNode : "test.structural.InternedNode" extends Object {
        pub id: i64,
    }
}

#[test]
fn json_graphs_write_and_read_through_a_types_own_hooks() {
    use tvm_ffi::{Function, ObjectCore};
    let make = |id| -> Any {
        ObjectRef::new(InternedNode {
            base: Object::header(),
            id,
        })
        .into()
    };
    let (one, two) = (make(1), make(2));
    let instances = Array::from_vec(vec![one.clone(), two.clone()]);
    let to_json =
        Function::from_packed(|args| Ok(Any::from(args[0].cast::<ObjectRef<InternedNode>>()?.id)));
    let from_json = Function::from_packed(move |args| {
        let id = args[0].cast::<i64>()?;
        match id {
            1 | 2 => Ok(instances.as_slice()[id as usize - 1].clone()),
            _ => Err(tvm_ffi::Error::new(
                "ValueError",
                format!("no interned node {id}"),
            )),
        }
    });
    let index = InternedNode::type_index();
    tvm_ffi::reflection::register_type_attr(index, "__data_to_json__", &Any::from(to_json))
        .unwrap();
    tvm_ffi::reflection::register_type_attr(index, "__data_from_json__", &Any::from(from_json))
        .unwrap();

    let value: Any = Array::from_vec(vec![one.clone(), two.clone(), one.clone()]).into();
    let text = to_json_graph_string(value.as_view(), Any::none().as_view()).unwrap();
    assert!(
        text.contains(r#"{"type":"test.structural.InternedNode","data":2}"#),
        "{text}"
    );
    let back = from_json_graph_string(&text)
        .unwrap()
        .cast::<Array>()
        .unwrap();
    let same = |a: &Any, b: &Any| a.as_object_ptr() == b.as_object_ptr();
    let items = back.as_slice();
    assert_eq!(items.len(), 3);
    assert!(same(&items[0], &one) && same(&items[1], &two) && same(&items[2], &one));
    // The hook's error is the reader's.
    let unknown = text.replace(r#""data":2"#, r#""data":3"#);
    let err = from_json_graph_string(&unknown).unwrap_err();
    assert_eq!(err.kind(), "ValueError", "{err}");
    assert!(err.message().contains("no interned node 3"), "{err}");
}

/// `test.structural.DagBinding`: a DAG node holding `value`.
pub(crate) fn dag_binding_type() -> i32 {
    use crate::dataclass::{define, field};
    use crate::traversal::set_kind;
    static INDEX: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *INDEX.get_or_init(|| {
        let fields = [field("value", tvm_ffi::abi::kTVMFFIAny, 16, 24)];
        let index = define("test.structural.DagBinding", &fields, 40);
        set_kind(index, 40, tvm_ffi::abi::kTVMFFISEqHashKindDAGNode);
        index
    })
}

#[test]
fn a_shared_dag_node_hashes_as_a_back_reference() {
    use crate::traversal::make;
    let node = |v: i64| make(dag_binding_type(), vec![Any::from(v)]);
    let shared = node(1);
    let dag = arr(vec![shared.clone(), shared]);
    let tree = arr(vec![node(1), node(1)]);
    let hash = |v: &Any| structural_hash(v.as_view(), false, false).unwrap();
    assert_ne!(hash(&dag), hash(&tree));
    assert!(!structural_equal(dag.as_view(), tree.as_view(), false, false).unwrap());
    // The same sharing shape hashes the same.
    let other = node(1);
    let dag2 = arr(vec![other.clone(), other]);
    assert_eq!(hash(&dag), hash(&dag2));
    assert!(structural_equal(dag.as_view(), dag2.as_view(), false, false).unwrap());
}

#[test]
fn deep_copy_keeps_cycles_through_arrays_and_maps() {
    use tvm_ffi::List;
    use tvm_ffi::containers::map::MapRead;
    let same = |a: &Any, b: &Any| a.as_object_ptr() == b.as_object_ptr();
    // An array holding a list that holds the array.
    let list = List::new();
    let array = arr(vec![list.clone().into()]);
    list.push(array.clone());
    let copy = deep_copy(array.as_view()).unwrap();
    let copied_list = copy.cast::<Array>().unwrap().as_slice()[0].clone();
    assert!(!same(&copied_list, &list.clone().into()));
    assert!(same(
        &copied_list.cast::<List>().unwrap().get(0).unwrap(),
        &copy
    ));
    // A map whose value and key are lists holding the map.
    let (value_list, key_list) = (List::new(), List::new());
    let mut map = Map::new();
    map.insert("list", value_list.clone());
    map.insert(key_list.clone(), 1i64);
    let map: Any = map.into();
    value_list.push(map.clone());
    key_list.push(map.clone());
    let copy = deep_copy(map.as_view()).unwrap();
    assert!(!same(&copy, &map));
    let copied = copy.cast::<Map>().unwrap();
    let back = copied.get("list").unwrap().cast::<List>().unwrap();
    assert!(same(&back.get(0).unwrap(), &copy));
    let (key, _) = copied
        .iter()
        .find(|(k, _)| k.type_index() == tvm_ffi::abi::kTVMFFIList)
        .unwrap();
    assert!(!same(&key, &key_list.clone().into()));
    assert!(same(&key.cast::<List>().unwrap().get(0).unwrap(), &copy));
    for l in [
        &list,
        &value_list,
        &key_list,
        &back,
        &key.cast::<List>().unwrap(),
    ] {
        l.clear();
    }
    copied_list.cast::<List>().unwrap().clear();
}
