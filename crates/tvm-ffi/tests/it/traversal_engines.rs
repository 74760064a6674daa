//! The dynamic engines of structural traversal and rewriting as foreign callers drive them: the
//! `ffi.Structural*` globals called from visitor and mutator callbacks, type hooks given as
//! functions, DAG nodes, and containers (lists, maps, dicts) rewritten in place or copied.

use std::sync::{Arc, Mutex};

use tvm_ffi::abi;
use tvm_ffi::extra::structural::mutate::{structural_map, structural_mutate};
use tvm_ffi::extra::structural::visit::{VisitInterrupt, structural_visit, structural_walk};
use tvm_ffi::{Any, AnyView, Array, Dict, Error, Function, List, Map, MapRead, Result};

use crate::dataclass::{define, field};
use crate::traversal::{
    arr, func_type, get, get_item, make, set_kind, table, var, var_type, visit_context,
};

fn call(name: &str, args: &[AnyView<'_>]) -> Result<Any> {
    Function::get_global(name)
        .unwrap_or_else(|| panic!("`{name}` is not registered"))
        .call_packed(args)
}

fn int(value: &Any) -> i64 {
    value.cast().unwrap()
}

fn entry(type_index: i32, callback: Function) -> Any {
    arr(vec![Any::from(i64::from(type_index)), callback.into()])
}

/// A two-field tree node type (`first`, `second`: any values) of structural kind `kind`.
fn pair_type(key: &str, kind: i32) -> i32 {
    let fields = [
        field("first", abi::kTVMFFIAny, 16, 24),
        field("second", abi::kTVMFFIAny, 16, 40),
    ];
    let index = define(key, &fields, 56);
    set_kind(index, 56, kind);
    index
}

/// An integer callback that records every integer it sees.
fn int_recorder() -> (Function, Arc<Mutex<Vec<i64>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let callback = Function::from_packed(move |args| {
        record.lock().unwrap().push(args[0].cast::<i64>()?);
        Ok(Any::none())
    });
    (callback, seen)
}

fn add(amount: i64) -> Function {
    Function::from_packed(move |args| Ok(Any::from(args[0].cast::<i64>()? + amount)))
}

fn negate() -> Function {
    Function::from_packed(|args| Ok(Any::from(-args[0].cast::<i64>()?)))
}

fn first_of_list(list: &Any) -> i64 {
    int(&list.cast::<List>().unwrap().get(0).unwrap())
}

fn failure_kind(result: Result<Any>) -> String {
    result.unwrap_err().kind().into_owned()
}

#[test]
fn visit_callbacks_drive_their_visitor_through_the_globals() {
    let x = var("x", Any::from(7i64));
    let root = make(
        func_type(),
        vec![
            arr(vec![x.clone()]),
            Any::none(),
            arr(vec![x, Any::from(42i64)]),
        ],
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    // A variable: note its region, then descend by default inside an explicit "no definition"
    // region, which the pattern region outranks.
    let on_var = Function::from_packed(move |args| {
        let (value, visitor) = (args[0].to_owned(), args[1].to_owned());
        let kind = int(&call(
            "ffi.StructuralVisitorDefRegionKind",
            &[visitor.as_view()],
        )?);
        let name: String = get(&value, "name").cast()?;
        record.lock().unwrap().push(format!("{name}:{kind}"));
        let descend = Function::from_packed(move |_| {
            call(
                "ffi.StructuralVisitorDefaultVisit",
                &[visitor.as_view(), value.as_view()],
            )
        });
        call(
            "ffi.StructuralVisitorWithDefRegionKind",
            &[
                args[1],
                Any::from(0i64).as_view(),
                Any::from(descend).as_view(),
            ],
        )
    });
    // An integer: 42 stops the traversal, carrying itself.
    let on_int = Function::from_packed(|args| {
        if args[0].cast::<i64>()? == 42 {
            return call("ffi.VisitInterrupt", &[args[0]]);
        }
        Ok(Any::none())
    });
    let callbacks = arr(vec![
        entry(var_type(), on_var),
        entry(abi::kTVMFFIInt, on_int),
    ]);
    let outcome = call(
        "ffi.StructuralVisit",
        &[root.as_view(), callbacks.as_view()],
    )
    .unwrap();
    let interrupt: VisitInterrupt = outcome.cast().unwrap();
    assert_eq!(int(interrupt.value()), 42);
    assert!(format!("{interrupt:?}").contains("42"));
    assert_eq!(*seen.lock().unwrap(), ["x:1", "x:0"]);

    // Nothing stops a visit of values the callbacks never match.
    let plain = arr(vec![Any::from(1i64), Any::from("text")]);
    assert!(
        structural_visit(plain.as_view(), AnyView::none())
            .unwrap()
            .is_none()
    );
}

#[test]
fn a_visit_callback_steps_into_children_itself() {
    // Arrays: the callback visits only the first item, through the visitor's dispatch.
    let first_only = Function::from_packed(|args| {
        let items: Array = args[0].cast()?;
        match items.get(0) {
            Some(item) => call("ffi.StructuralVisitorVisit", &[args[1], item.as_view()]),
            None => Ok(Any::none()),
        }
    });
    let (on_int, seen) = int_recorder();
    let callbacks = arr(vec![
        entry(abi::kTVMFFIArray, first_only),
        entry(abi::kTVMFFIInt, on_int),
    ]);
    let root = arr(vec![
        arr(vec![Any::from(1i64), Any::from(2i64)]),
        Any::from(3i64),
    ]);
    let outcome = structural_visit(root.as_view(), callbacks.as_view()).unwrap();
    assert!(outcome.is_none());
    assert_eq!(*seen.lock().unwrap(), [1]);

    // A callback must return None or an interrupt.
    let bad = table(
        abi::kTVMFFIInt,
        Function::from_packed(|_| Ok(Any::from(5i64))),
    );
    let err = structural_visit(root.as_view(), bad.as_view()).unwrap_err();
    assert_eq!(err.kind(), "TypeError");
    assert!(
        err.message()
            .contains("must return None or a VisitInterrupt"),
        "{}",
        err.message()
    );
}

#[test]
fn walks_descend_into_lists_maps_and_dicts() {
    let mut map = Map::new();
    map.insert("a", 1i64);
    let dict = Dict::new();
    dict.insert("b", 2i64);
    let list = List::new();
    list.push(Any::from(map));
    list.push(Any::from(dict));
    list.push(arr(vec![Any::from(3i64)]));
    let root = Any::from(list);

    let (on_int, seen) = int_recorder();
    let outcome = structural_walk(
        root.as_view(),
        table(abi::kTVMFFIInt, on_int).as_view(),
        AnyView::none(),
        1,
    )
    .unwrap();
    assert!(outcome.is_none());
    assert_eq!(*seen.lock().unwrap(), [1, 2, 3]);

    // Pre-order: a dict answered with 1 and an array answered with `true` are skipped.
    let (on_int, seen) = int_recorder();
    let skip_int = Function::from_packed(|_| Ok(Any::from(1i64)));
    let skip_bool = Function::from_packed(|_| Ok(Any::from(true)));
    let callbacks = arr(vec![
        entry(abi::kTVMFFIDict, skip_int),
        entry(abi::kTVMFFIArray, skip_bool),
        entry(abi::kTVMFFIInt, on_int),
    ]);
    structural_walk(root.as_view(), callbacks.as_view(), AnyView::none(), 0).unwrap();
    assert_eq!(*seen.lock().unwrap(), [1]);

    // Post-order: an interrupt stops the walk at once.
    let stop_at_two = Function::from_packed(|args| {
        Ok(match args[0].cast::<i64>()? {
            2 => VisitInterrupt::new(Any::from("found")).into(),
            _ => Any::none(),
        })
    });
    let outcome = structural_walk(
        root.as_view(),
        table(abi::kTVMFFIInt, stop_at_two).as_view(),
        AnyView::none(),
        1,
    )
    .unwrap()
    .expect("an interrupt");
    assert_eq!(outcome.value().cast::<String>().unwrap(), "found");
}

#[test]
fn walk_callbacks_answer_with_walk_results_only() {
    let root = arr(vec![Any::from(1i64)]);
    let walk = |answer: Any| {
        let callback = Function::from_packed(move |_| Ok(answer.clone()));
        structural_walk(
            root.as_view(),
            table(abi::kTVMFFIInt, callback).as_view(),
            AnyView::none(),
            0,
        )
        .unwrap_err()
    };
    let err = walk(Any::from(2i64));
    assert_eq!(err.kind(), "ValueError");
    assert!(
        err.message().contains("2 is not a WalkResult"),
        "{}",
        err.message()
    );
    let err = walk(Any::from("advance"));
    assert_eq!(err.kind(), "TypeError");
    assert!(err.message().contains("WalkResult"), "{}", err.message());
}

/// `test.traversal.Pair` with function hooks: visits and rewrites `second` only.
fn hooked_pair_type() -> i32 {
    static INDEX: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *INDEX.get_or_init(|| {
        let index = pair_type("test.traversal.HookedPair", abi::kTVMFFISEqHashKindTreeNode);
        let visit = Function::from_packed(|args| {
            let second = get(&args[1].to_owned(), "second");
            call("ffi.StructuralVisitorVisit", &[args[0], second.as_view()])
        });
        let mutate = Function::from_packed(|args| {
            let pair = args[1].to_owned();
            let second = get(&pair, "second");
            let second = call("ffi.StructuralMutatorMutate", &[args[0], second.as_view()])?;
            Ok(make(hooked_pair_type(), vec![get(&pair, "first"), second]))
        });
        tvm_ffi::reflection::register_type_attr(index, "__s_visit__", &visit.into()).unwrap();
        tvm_ffi::reflection::register_type_attr(index, "__s_mutate__", &mutate.into()).unwrap();
        index
    })
}

#[test]
fn function_hooks_decide_the_descent_of_their_type() {
    let pair = make(hooked_pair_type(), vec![Any::from(1i64), Any::from(2i64)]);
    let (on_int, seen) = int_recorder();
    let int_table = table(abi::kTVMFFIInt, on_int);
    structural_walk(pair.as_view(), int_table.as_view(), AnyView::none(), 0).unwrap();
    assert_eq!(*seen.lock().unwrap(), [2]);

    let increment = table(abi::kTVMFFIInt, add(1));
    let mapped = structural_map(pair.clone(), increment.as_view(), AnyView::none(), 1).unwrap();
    assert_ne!(mapped.as_object_ptr(), pair.as_object_ptr());
    assert_eq!(int(&get(&mapped, "first")), 1);
    assert_eq!(int(&get(&mapped, "second")), 3);

    // Hooks of any other kind are refused by name.
    let odd = pair_type("test.traversal.OddHooks", abi::kTVMFFISEqHashKindTreeNode);
    for column in ["__s_visit__", "__s_mutate__"] {
        tvm_ffi::reflection::register_type_attr(odd, column, &Any::from(5i64)).unwrap();
    }
    let value = make(odd, vec![Any::none(), Any::none()]);
    let err =
        structural_walk(value.as_view(), int_table.as_view(), AnyView::none(), 0).unwrap_err();
    assert_eq!(err.kind(), "TypeError");
    assert!(
        err.message()
            .contains("__s_visit__ of `test.traversal.OddHooks`"),
        "{}",
        err.message()
    );
    let err = structural_map(value, increment.as_view(), AnyView::none(), 1).unwrap_err();
    assert_eq!(err.kind(), "TypeError");
    assert!(
        err.message()
            .contains("__s_mutate__ of `test.traversal.OddHooks`"),
        "{}",
        err.message()
    );
}

#[test]
fn mutate_callbacks_share_replacements_through_the_remap() {
    let x = var("x", Any::none());
    let root = make(
        func_type(),
        vec![
            arr(vec![x.clone()]),
            Any::none(),
            arr(vec![x.clone(), Any::from(5i64)]),
        ],
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    // Variables (given the in-place mode): the first occurrence makes and records the
    // replacement, later ones find it.
    let on_var = Function::from_packed(move |args| {
        let (value, mutator, mode) = (args[0], args[1], int(&args[2].to_owned()));
        let known = call("ffi.StructuralMutatorVarRemapGet", &[mutator, value])?;
        if !known.is_none() {
            record.lock().unwrap().push(format!("found:{mode}"));
            return Ok(known);
        }
        let kind = int(&call("ffi.StructuralMutatorDefRegionKind", &[mutator])?);
        record.lock().unwrap().push(format!("made:{kind}:{mode}"));
        let name: String = get(&value.to_owned(), "name").cast()?;
        let renamed = var(&format!("{name}'"), Any::none());
        call(
            "ffi.StructuralMutatorVarRemapSet",
            &[mutator, value, renamed.as_view()],
        )?;
        Ok(renamed)
    });
    // Integers: ten times their default mutation (themselves), read inside a simple region.
    let on_int = Function::from_packed(|args| {
        let mutator = args[1].to_owned();
        let value = args[0].to_owned();
        let inner = Function::from_packed(move |_| {
            let kind = int(&call(
                "ffi.StructuralMutatorDefRegionKind",
                &[mutator.as_view()],
            )?);
            let same = call(
                "ffi.StructuralMutatorDefaultMutate",
                &[mutator.as_view(), value.as_view()],
            )?;
            Ok(Any::from(int(&same) * 10 + kind))
        });
        call(
            "ffi.StructuralMutatorWithDefRegionKind",
            &[
                args[1],
                Any::from(2i64).as_view(),
                Any::from(inner).as_view(),
            ],
        )
    });
    let callbacks = arr(vec![
        arr(vec![
            Any::from(i64::from(var_type())),
            on_var.into(),
            Any::from(true),
        ]),
        entry(abi::kTVMFFIInt, on_int),
    ]);
    let mapped = call(
        "ffi.StructuralMutate",
        &[root.as_view(), callbacks.as_view()],
    )
    .unwrap();
    let params = get(&mapped, "params");
    let body = get(&mapped, "body");
    assert_eq!(
        get(&get_item(&params, 0), "name").cast::<String>().unwrap(),
        "x'"
    );
    assert_eq!(
        get_item(&body, 0).as_object_ptr(),
        get_item(&params, 0).as_object_ptr()
    );
    assert_eq!(int(&get_item(&body, 1)), 52);
    assert_eq!(*seen.lock().unwrap(), ["made:1:0", "found:0"]);
    // The source is untouched.
    assert_eq!(
        get_item(&get(&root, "body"), 0).as_object_ptr(),
        x.as_object_ptr()
    );
}

#[test]
fn the_mutator_globals_refuse_bad_arguments() {
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let record = outcomes.clone();
    let probe = Function::from_packed(move |args| {
        let mutator = args[1];
        let noop = Any::from(Function::from_packed(|_| Ok(Any::none())));
        let mut record = record.lock().unwrap();
        for result in [
            call("ffi.StructuralMutatorVarRemapGet", &[mutator, args[0]]),
            call(
                "ffi.StructuralMutatorVarRemapSet",
                &[mutator, args[0], args[0]],
            ),
            call(
                "ffi.StructuralMutatorWithDefRegionKind",
                &[mutator, Any::from(9i64).as_view(), noop.as_view()],
            ),
            call("ffi.StructuralMutatorDefRegionKind", &[args[0]]),
        ] {
            record.push(failure_kind(result));
        }
        Ok(args[0].to_owned())
    });
    let root = arr(vec![Any::from(1i64)]);
    let callbacks = arr(vec![entry(abi::kTVMFFIInt, probe)]);
    structural_mutate(root, callbacks.as_view()).unwrap();
    assert_eq!(
        *outcomes.lock().unwrap(),
        ["TypeError", "TypeError", "ValueError", "TypeError"]
    );

    let probe = Function::from_packed(|args| {
        let noop = Any::from(Function::from_packed(|_| Ok(Any::none())));
        let err = call(
            "ffi.StructuralVisitorWithDefRegionKind",
            &[args[1], Any::from(-3i64).as_view(), noop.as_view()],
        )
        .unwrap_err();
        assert_eq!(err.kind(), "ValueError");
        Ok(Any::none())
    });
    let root = arr(vec![Any::from(1i64)]);
    structural_visit(root.as_view(), table(abi::kTVMFFIInt, probe).as_view()).unwrap();
    assert_eq!(
        failure_kind(call(
            "ffi.StructuralVisitorDefRegionKind",
            &[root.as_view()]
        )),
        "TypeError"
    );
}

#[test]
fn every_global_checks_its_argument_count() {
    for name in [
        "ffi.StructuralVisitorVisit",
        "ffi.StructuralVisitorDefaultVisit",
        "ffi.StructuralVisitorDefRegionKind",
        "ffi.StructuralVisitorWithDefRegionKind",
        "ffi.StructuralWalk",
        "ffi.StructuralVisit",
        "ffi.StructuralMutatorMutate",
        "ffi.StructuralMutatorDefaultMutate",
        "ffi.StructuralMutatorVarRemapGet",
        "ffi.StructuralMutatorVarRemapSet",
        "ffi.StructuralMutatorDefRegionKind",
        "ffi.StructuralMutatorWithDefRegionKind",
        "ffi.StructuralMap",
        "ffi.StructuralMutate",
    ] {
        let err = call(name, &[]).unwrap_err();
        assert_eq!(err.kind(), "TypeError", "{name}");
        assert!(
            err.message().contains(name) && err.message().contains("0 were given"),
            "{name}: {}",
            err.message()
        );
    }
}

/// `test.traversal.Node`: a DAG node holding `first` and `second`.
fn node_type() -> i32 {
    static INDEX: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *INDEX.get_or_init(|| pair_type("test.traversal.Node", abi::kTVMFFISEqHashKindDAGNode))
}

#[test]
fn a_dag_node_is_rewritten_once_for_all_its_occurrences() {
    let node = make(node_type(), vec![Any::from(1i64), Any::from("label")]);
    let root = arr(vec![node.clone(), node.clone()]);
    let increment = table(abi::kTVMFFIInt, add(1));
    let mapped = structural_map(root.clone(), increment.as_view(), AnyView::none(), 0).unwrap();
    let (first, second) = (get_item(&mapped, 0), get_item(&mapped, 1));
    assert_eq!(first.as_object_ptr(), second.as_object_ptr());
    assert_ne!(first.as_object_ptr(), node.as_object_ptr());
    assert_eq!(int(&get(&first, "first")), 2);
    assert_eq!(get(&first, "second").cast::<String>().unwrap(), "label");

    // A node nothing changes stays itself, and so does everything holding it.
    let floats_only = table(abi::kTVMFFIFloat, add(0));
    let mapped = structural_map(root.clone(), floats_only.as_view(), AnyView::none(), 1).unwrap();
    assert_eq!(mapped.as_object_ptr(), root.as_object_ptr());
}

#[test]
fn uniquely_owned_containers_change_in_place_and_shared_maps_are_copied() {
    let negate = table(abi::kTVMFFIInt, negate());
    let map_with = |root: Any| structural_map(root, negate.as_view(), AnyView::none(), 1).unwrap();

    let list = List::new();
    list.push(1i64);
    list.push(Any::from("a string longer than seven bytes"));
    let list = Any::from(list);
    let address = list.as_object_ptr();
    let mapped = map_with(list);
    assert_eq!(mapped.as_object_ptr(), address);
    assert_eq!(first_of_list(&mapped), -1);

    let dict = Dict::new();
    dict.insert("k", 2i64);
    let dict = Any::from(dict);
    let address = dict.as_object_ptr();
    let mapped = map_with(dict);
    assert_eq!(mapped.as_object_ptr(), address);
    assert_eq!(int(&mapped.cast::<Dict>().unwrap().get("k").unwrap()), -2);

    let mut map = Map::new();
    map.insert("k", 3i64);
    let map = Any::from(map);
    let mapped = map_with(map.clone());
    assert_ne!(mapped.as_object_ptr(), map.as_object_ptr());
    assert_eq!(int(&mapped.cast::<Map>().unwrap().get("k").unwrap()), -3);
    assert_eq!(int(&map.cast::<Map>().unwrap().get("k").unwrap()), 3);

    // A map nothing else holds keeps its storage, as on apache-tvm-ffi (whose Rust
    // crates check it), and so does a uniquely owned array among its values; its keys stay.
    let mut map = Map::new();
    map.insert("k", 4i64);
    map.insert("items", arr(vec![Any::from(5i64), Any::from(6i64)]));
    let map = Any::from(map);
    let address = map.as_object_ptr();
    let items_address = map
        .cast::<Map>()
        .unwrap()
        .get("items")
        .unwrap()
        .as_object_ptr();
    let mapped = map_with(map);
    assert_eq!(mapped.as_object_ptr(), address);
    let mapped = mapped.cast::<Map>().unwrap();
    assert_eq!(int(&mapped.get("k").unwrap()), -4);
    let items = mapped.get("items").unwrap();
    assert_eq!(items.as_object_ptr(), items_address);
    assert_eq!(int(&get_item(&items, 1)), -6);
    let keys: Vec<String> = mapped.keys().map(|k| k.cast().unwrap()).collect();
    assert_eq!(keys, ["k", "items"]);
}

#[test]
fn shared_lists_and_dicts_are_copied_and_leaves_stay() {
    let negate = table(abi::kTVMFFIInt, negate());
    let list = List::new();
    list.push(4i64);
    let dict = Dict::new();
    dict.insert("k", 5i64);
    let shared = arr(vec![list.clone().into(), dict.clone().into()]);
    let mapped = structural_map(shared.clone(), negate.as_view(), AnyView::none(), 0).unwrap();
    let (new_list, new_dict) = (get_item(&mapped, 0), get_item(&mapped, 1));
    assert_eq!(first_of_list(&new_list), -4);
    assert_eq!(int(&new_dict.cast::<Dict>().unwrap().get("k").unwrap()), -5);
    assert_eq!(list.get(0).unwrap().cast::<i64>().unwrap(), 4);
    assert_eq!(int(&dict.get("k").unwrap()), 5);

    // Strings, bytes and big values are leaves: nothing to rewrite, the root stays itself.
    let leaves = arr(vec![
        Any::from("a string longer than seven bytes"),
        Any::from(tvm_ffi::Bytes::from(&b"bytes beyond the inline size"[..])),
    ]);
    let mapped = structural_map(leaves.clone(), negate.as_view(), AnyView::none(), 0).unwrap();
    assert_eq!(mapped.as_object_ptr(), leaves.as_object_ptr());
}

#[test]
fn a_failed_rewrite_records_where_it_failed() {
    let fail_on_two = Function::from_packed(|args| {
        if args[0].cast::<i64>()? == 2 {
            return Err(Error::new(
                tvm_ffi::ErrorKind::ValueError,
                "two is not allowed",
            ));
        }
        Ok(args[0].to_owned())
    });
    let root = arr(vec![
        Any::from(0i64),
        arr(vec![Any::from(1i64), Any::from(2i64)]),
    ]);
    let err = structural_map(
        root.clone(),
        table(abi::kTVMFFIInt, fail_on_two).as_view(),
        AnyView::none(),
        0,
    )
    .unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    let trail = visit_context(&err).reverse_visit_pattern.to_vec();
    assert_eq!(trail.len(), 2);
    assert_eq!(trail[0].as_object_ptr(), get_item(&root, 1).as_object_ptr());
}

#[test]
fn the_walk_and_map_globals_match_the_rust_entry_points() {
    let root = arr(vec![Any::from(1i64), arr(vec![Any::from(2i64)])]);
    let (on_int, seen) = int_recorder();
    let outcome = call(
        "ffi.StructuralWalk",
        &[
            root.as_view(),
            table(abi::kTVMFFIInt, on_int).as_view(),
            AnyView::none(),
            Any::from(1i64).as_view(),
        ],
    )
    .unwrap();
    assert!(outcome.is_none());
    assert_eq!(*seen.lock().unwrap(), [1, 2]);

    let increment = table(abi::kTVMFFIInt, add(10));
    let mapped = call(
        "ffi.StructuralMap",
        &[
            root.as_view(),
            increment.as_view(),
            AnyView::none(),
            Any::from(0i64).as_view(),
        ],
    )
    .unwrap();
    assert_eq!(int(&get_item(&mapped, 0)), 11);
    assert_eq!(int(&get_item(&get_item(&mapped, 1), 0)), 12);
    assert_eq!(int(&get_item(&root, 0)), 1);

    // An entry that is not a tuple is named by its type.
    let err = structural_walk(
        root.as_view(),
        arr(vec![Any::from(5i64)]).as_view(),
        AnyView::none(),
        0,
    )
    .unwrap_err();
    assert_eq!(err.kind(), "TypeError");
    assert!(
        err.message().contains("entry of type `int`"),
        "{}",
        err.message()
    );
}

/// The start of a mutator as C++ sees it: the object header, then the vtable pointer.
#[repr(C)]
struct MutatorPrefix {
    header: abi::TVMFFIObject,
    vtable: *const tvm_ffi::extra::structural::mutate::MutatorVTable,
}

#[test]
fn the_remap_entries_of_the_vtable_serve_native_hooks() {
    let x = var("x", Any::none());
    let y = var("y", Any::none());
    let results = Arc::new(Mutex::new(Vec::new()));
    let record = results.clone();
    let (x_in, y_in) = (x.clone(), y.clone());
    let native_caller = Function::from_packed(move |args| {
        let mutator = args[1].as_object_ptr().expect("a mutator object");
        // SAFETY: a mutator starts with the header and the vtable pointer (the layout C++
        // hooks compiled against apache-tvm-ffi's headers read); the entries take the live
        // mutator and borrowed values and return owning ones.
        let vtable = unsafe { &*(*mutator.cast::<MutatorPrefix>()).vtable };
        let unchanged = abi::TVMFFIAny {
            type_index: abi::kTVMFFIUnchanged,
            small_str_len: 0,
            payload: abi::TVMFFIAnyPayload { v_int64: 0 },
        };
        let mutator = mutator.cast();
        // SAFETY: as above.
        let answers = unsafe {
            [
                (vtable.var_remap_set)(mutator, *x_in.as_raw(), *y_in.as_raw()),
                (vtable.var_remap_get)(mutator, *x_in.as_raw()),
                (vtable.var_remap_set)(mutator, *y_in.as_raw(), unchanged),
                (vtable.var_remap_get)(mutator, *y_in.as_raw()),
                (vtable.var_remap_get)(mutator, *args[0].as_raw()),
                (vtable.var_remap_set)(mutator, *args[0].as_raw(), unchanged),
            ]
        };
        let mut record = record.lock().unwrap();
        for answer in answers {
            if answer.type_index == abi::kTVMFFIUnchanged {
                record.push("unchanged".to_owned());
                continue;
            }
            // SAFETY: every other answer is one owning value.
            let answer = unsafe { Any::from_raw(answer) };
            record.push(match answer.try_as::<Error>() {
                Some(error) => error.kind().into_owned(),
                None if answer.as_object_ptr() == y_in.as_object_ptr() => "y".to_owned(),
                None => answer.as_view().type_name(),
            });
        }
        Ok(args[0].to_owned())
    });
    let root = arr(vec![Any::from(1i64)]);
    structural_mutate(root, table(abi::kTVMFFIInt, native_caller).as_view()).unwrap();
    assert_eq!(
        *results.lock().unwrap(),
        ["None", "y", "None", "unchanged", "TypeError", "TypeError"]
    );
}
