//! Reference cycles (`tvm_ffi::extra::cycles::break_cycles`, `ffi.BreakCycles`): reference counting
//! never frees a container that contains itself; breaking the cycle frees it.

use std::sync::Arc;

use tvm_ffi::extra::cycles::break_cycles;
use tvm_ffi::{Any, Array, Dict, Function, List, MapRead};

/// A value whose release is observable: a function holding `token`.
fn marker(token: &Arc<()>) -> Any {
    let held = Arc::clone(token);
    Any::from(Function::from_typed("marker", move || {
        let _ = &held;
    }))
}

#[test]
fn a_list_that_contains_itself_is_freed_once_its_cycle_is_broken() {
    let token = Arc::new(());
    let list = List::new();
    list.push(marker(&token));
    list.push(list.clone());
    // The list holds itself: one handle here, one in the list.
    assert_eq!(list.as_object().use_count(), 2);
    assert_eq!(break_cycles(Any::from(list.clone()).as_view()).unwrap(), 1);
    assert_eq!((list.len(), list.as_object().use_count()), (0, 1));
    drop(list);
    assert_eq!(Arc::strong_count(&token), 1, "the marker was released");
}

#[test]
fn cycles_through_other_containers_are_broken_at_their_lists_and_dicts() {
    let token = Arc::new(());
    let list = List::new();
    let dict = Dict::new();
    let array = Array::from_iter([Any::from(list.clone()), marker(&token)]);
    dict.insert("array", array.clone());
    list.push(dict.clone());
    // Off the cycle: an acyclic list the dict also holds stays as it is.
    let aside = List::new();
    aside.push(1i64);
    dict.insert("aside", aside.clone());
    let root = Any::from(Array::from_iter([Any::from(list.clone())]));
    assert_eq!(break_cycles(root.as_view()).unwrap(), 2);
    assert_eq!(
        (list.len(), dict.len(), array.len(), aside.len()),
        (0, 0, 2, 1)
    );
    drop((list, dict, array, root));
    assert_eq!(Arc::strong_count(&token), 1);
}

#[test]
fn values_on_no_cycle_are_left_alone() {
    let shared = List::new();
    shared.push(1i64);
    let leaves = tvm_ffi::Map::from_iter([(
        Any::from("a key too long to be stored inline as a small string"),
        marker(&Arc::new(())),
    )]);
    let dag = Array::from_iter([
        Any::from(shared.clone()),
        Any::from(shared.clone()),
        Any::from(leaves),
    ]);
    assert_eq!(break_cycles(Any::from(dag).as_view()).unwrap(), 0);
    assert_eq!(shared.len(), 1);
    // A cycle through an immutable map is broken at the list.
    let list = List::new();
    let map = tvm_ffi::Map::from_iter([(Any::from("list"), Any::from(list.clone()))]);
    list.push(map.clone());
    assert_eq!(break_cycles(Any::from(map).as_view()).unwrap(), 1);
    assert_eq!(list.len(), 0);
    assert_eq!(break_cycles(Any::from(5i64).as_view()).unwrap(), 0);
    assert_eq!(break_cycles(Any::from("text").as_view()).unwrap(), 0);
    // The global of the same function.
    let global = Function::get_global_required("ffi.BreakCycles").unwrap();
    let looped = List::new();
    looped.push(looped.clone());
    let broken: i64 = global.call((looped.clone(),)).unwrap().cast().unwrap();
    assert_eq!((broken, looped.len()), (1, 0));
}

#[test]
fn a_cycle_of_objects_alone_is_broken_at_the_fields_that_close_it() {
    use tvm_ffi::abi;
    use tvm_ffi::extra::dataclass::{FieldStorage, create_empty};
    use tvm_ffi::extra::runtime_types::{FieldDefault, FieldSpec, TypeSpec, define_type};
    use tvm_ffi::reflection::fields_of;
    let field = |name: &str| FieldSpec {
        name: name.into(),
        static_type_index: abi::kTVMFFIObject,
        storage: FieldStorage::Object,
        flags: abi::kTVMFFIFieldFlagBitMaskWritable,
        default: FieldDefault::Required,
    };
    let spec = TypeSpec {
        type_key: "test.cycles.Node".into(),
        parent_index: abi::kTVMFFIObject,
        fields: vec![field("next"), field("payload")],
        structural_kind: abi::kTVMFFISEqHashKindTreeNode,
    };
    let (index, _) = define_type(&spec).unwrap();
    let set = |obj: &Any, name: &str, value: Any| {
        let f = fields_of(index).find(|f| f.name() == name).unwrap();
        f.set(obj.as_view(), value.as_view()).unwrap();
    };
    let get = |obj: &Any, name: &str| {
        let f = fields_of(index).find(|f| f.name() == name).unwrap();
        f.get(obj.as_view()).unwrap()
    };
    let token = Arc::new(());
    let (a, b): (Any, Any) = (
        create_empty(index).unwrap().into(),
        create_empty(index).unwrap().into(),
    );
    set(&a, "next", b.clone());
    set(&b, "next", a.clone());
    set(&a, "payload", marker(&token));
    assert_eq!(break_cycles(a.as_view()).unwrap(), 2);
    assert!(get(&a, "next").is_none() && get(&b, "next").is_none());
    assert!(!get(&a, "payload").is_none(), "a field off the cycle stays");
    drop((a, b));
    assert_eq!(Arc::strong_count(&token), 1);
}
