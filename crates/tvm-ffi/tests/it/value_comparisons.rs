//! Structural and recursive comparison of plain values and containers of every kind, and the
//! decimal text of big integers: the value-level paths under the object-level tests of
//! `structural.rs`.

use std::cmp::Ordering;

use tvm_ffi::containers::map::MapRead;
use tvm_ffi::extra::bigint_text::{from_decimal, to_decimal};
use tvm_ffi::extra::recursive_compare::{recursive_cmp, recursive_eq, recursive_hash};
use tvm_ffi::extra::structural::{first_structural_mismatch, structural_equal, structural_hash};
use tvm_ffi::{Any, Array, Bytes, DataType, Device, Dict, Function, List, Map, Shape};

/// One value of each kind the comparisons know, two of each where order matters.
fn samples() -> Vec<Any> {
    let list: List = [Any::from(1i64), Any::from("x")].into_iter().collect();
    let dict = Dict::new();
    dict.insert("k", Any::from(2.5f64));
    let mut map = Map::new();
    map.insert("a", Any::from(1i64));
    map.insert("b", Any::from(false));
    vec![
        Any::none(),
        Any::from(true),
        Any::from(false),
        Any::from(-3i64),
        Any::from(7i64),
        Any::from(0.5f64),
        Any::from(-2.25f64),
        Any::from(f64::NAN),
        Any::from("short"),
        Any::from("a string longer than an inline one"),
        Any::from(Bytes::from(&b"\x00\x01bytes"[..])),
        Any::from(DataType::float(32)),
        Any::from(Device::cpu(0)),
        Array::from_vec(vec![Any::from(1i64), Any::from("two"), Any::none()]).into(),
        Array::from_vec(vec![]).into(),
        list.into(),
        dict.into(),
        map.into(),
        Shape::new(&[2, 3]).into(),
        from_decimal("123456789012345678901234567890").unwrap(),
    ]
}

#[test]
fn every_value_equals_itself_and_a_copy_and_hashes_alike() {
    for value in samples() {
        let copy = tvm_ffi::extra::deep_copy::deep_copy(value.as_view()).unwrap();
        let is_nan = value.try_as::<f64>().is_some_and(f64::is_nan);
        if !is_nan {
            assert!(structural_equal(value.as_view(), copy.as_view(), false, false).unwrap());
            assert!(
                recursive_eq(value.as_view(), copy.as_view()).unwrap(),
                "{value:?}"
            );
        }
        assert_eq!(
            structural_hash(value.as_view(), false, false).unwrap(),
            structural_hash(copy.as_view(), false, false).unwrap(),
        );
        assert_eq!(
            recursive_hash(value.as_view()).unwrap(),
            recursive_hash(copy.as_view()).unwrap()
        );
        assert!(
            first_structural_mismatch(value.as_view(), copy.as_view(), true, true)
                .unwrap()
                .is_none()
                || is_nan
        );
    }
}

#[test]
fn different_values_differ_and_say_where() {
    let values = samples();
    for (i, a) in values.iter().enumerate() {
        for b in &values[i + 1..] {
            let equal = structural_equal(a.as_view(), b.as_view(), false, false).unwrap();
            assert!(!equal, "{a:?} == {b:?}");
            assert!(
                first_structural_mismatch(a.as_view(), b.as_view(), false, false)
                    .unwrap()
                    .is_some()
            );
            // Recursive comparison is defined on values of one kind and refuses mixed ones.
            if let Ok(eq) = recursive_eq(a.as_view(), b.as_view()) {
                assert!(!eq || a.type_index() != b.type_index(), "{a:?} == {b:?}");
            }
            let _ = recursive_cmp(a.as_view(), b.as_view());
        }
    }
}

#[test]
fn recursive_order_is_by_value_then_by_length() {
    let ints =
        |v: &[i64]| -> Any { Array::from_vec(v.iter().map(|&i| Any::from(i)).collect()).into() };
    let cmp = |a: &Any, b: &Any| recursive_cmp(a.as_view(), b.as_view()).unwrap();
    assert_eq!(cmp(&ints(&[1, 2]), &ints(&[1, 3])), Ordering::Less);
    assert_eq!(cmp(&ints(&[1, 2, 0]), &ints(&[1, 2])), Ordering::Greater);
    assert_eq!(cmp(&ints(&[]), &ints(&[])), Ordering::Equal);
    assert_eq!(cmp(&Any::from("abc"), &Any::from("abd")), Ordering::Less);
    assert_eq!(
        cmp(&Any::from(2.0f64), &Any::from(1.5f64)),
        Ordering::Greater
    );
    assert_eq!(cmp(&Any::from(false), &Any::from(true)), Ordering::Less);
    let bytes = |b: &[u8]| Any::from(Bytes::from(b));
    assert_eq!(cmp(&bytes(b"a"), &bytes(b"ab")), Ordering::Less);
    assert!(recursive_cmp(Any::from(1i64).as_view(), Any::from("1").as_view()).is_err());
}

#[test]
fn maps_compare_in_any_order_and_by_their_keys() {
    let mut a = Map::new();
    let mut b = Map::new();
    for i in 0..20i64 {
        a.insert(i, Any::from(i * 2));
    }
    for i in (0..20i64).rev() {
        b.insert(i, Any::from(i * 2));
    }
    let (a, b): (Any, Any) = (a.into(), b.into());
    assert!(structural_equal(a.as_view(), b.as_view(), false, false).unwrap());
    assert!(recursive_eq(a.as_view(), b.as_view()).unwrap());
    assert_eq!(
        structural_hash(a.as_view(), false, false).unwrap(),
        structural_hash(b.as_view(), false, false).unwrap()
    );
    let mut c = Map::new();
    for i in 0..20i64 {
        c.insert(i, Any::from(if i == 13 { 0 } else { i * 2 }));
    }
    let c: Any = c.into();
    assert!(!structural_equal(a.as_view(), c.as_view(), false, false).unwrap());
    let (left, right) = first_structural_mismatch(a.as_view(), c.as_view(), false, false)
        .unwrap()
        .expect("a mismatch");
    assert!(left.path_equal(&right));
    assert_eq!(left.depth(), 1);
    let step = left.step().expect("a map item");
    assert_eq!(step.key().try_as::<i64>(), Some(13));
}

#[test]
fn big_integers_print_and_parse_in_decimal() {
    for text in [
        "0",
        "-1",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "-9223372036854775809",
        "340282366920938463463374607431768211456",
        "-123456789012345678901234567890123456789012345678901234567890",
    ] {
        let value = from_decimal(text).unwrap();
        let printed = to_decimal(value.as_view())
            .or_else(|| value.try_as::<i64>().map(|i| i.to_string()))
            .unwrap();
        assert_eq!(printed, text);
    }
    for bad in ["", "-", "12a", "1.5", " 1", "+-1"] {
        let err = from_decimal(bad).unwrap_err();
        assert_eq!(err.kind(), "ValueError", "{bad:?}: {err}");
    }
    assert!(to_decimal(Any::from(5i64).as_view()).is_none());
}

#[test]
fn structural_keys_are_equal_for_equal_structures() {
    let key = Function::get_global("ffi.StructuralKey").unwrap();
    let key_equal = Function::get_global("ffi.StructuralKeyEqual").unwrap();
    let make = |v: Vec<i64>| -> Any {
        let items: Array = Array::from_vec(v.into_iter().map(Any::from).collect());
        key.call((items,)).unwrap()
    };
    let (a, b, c) = (make(vec![1, 2]), make(vec![1, 2]), make(vec![2, 1]));
    assert!(
        key_equal
            .call((a.clone(), b))
            .unwrap()
            .cast::<bool>()
            .unwrap()
    );
    assert!(!key_equal.call((a, c)).unwrap().cast::<bool>().unwrap());
    for name in [
        "ffi.RecursiveEq",
        "ffi.RecursiveLt",
        "ffi.RecursiveLe",
        "ffi.RecursiveGt",
        "ffi.RecursiveGe",
    ] {
        let f = Function::get_global(name).unwrap();
        let out = f
            .call((Any::from(1i64), Any::from(2i64)))
            .unwrap()
            .cast::<bool>()
            .unwrap();
        assert_eq!(
            out,
            matches!(name, "ffi.RecursiveLt" | "ffi.RecursiveLe"),
            "{name}"
        );
    }
    let hash = Function::get_global("ffi.RecursiveHash").unwrap();
    assert_eq!(
        hash.call((Any::from("x"),)).unwrap().cast::<i64>().unwrap(),
        hash.call((Any::from("x"),)).unwrap().cast::<i64>().unwrap()
    );
}

#[test]
fn the_reflection_globals_answer_through_packed_calls() {
    let call = |name: &str, args: Vec<Any>| -> Any {
        let f = Function::get_global(name).unwrap_or_else(|| panic!("{name} is registered"));
        let views: Vec<_> = args.iter().map(Any::as_view).collect();
        f.call_packed(&views).unwrap()
    };
    let value: Any =
        Array::from_vec(vec![Any::from(1i64), Any::from("two"), Any::from(3.5f64)]).into();
    let copy = call("ffi.DeepCopy", vec![value.clone()]);
    let args = |a: &Any, b: &Any| vec![a.clone(), b.clone(), Any::from(false), Any::from(false)];
    assert!(
        call("ffi.StructuralEqual", args(&value, &copy))
            .cast::<bool>()
            .unwrap()
    );
    assert!(call("ffi.GetFirstStructuralMismatch", args(&value, &copy)).is_none());
    let hash = |v: &Any| {
        call(
            "ffi.StructuralHash",
            vec![v.clone(), Any::from(false), Any::from(false)],
        )
    };
    assert_eq!(
        hash(&value).cast::<i64>().unwrap(),
        hash(&copy).cast::<i64>().unwrap()
    );
    let text = call("ffi.ReprPrint", vec![value.clone()])
        .cast::<String>()
        .unwrap();
    assert!(text.contains("two") && text.contains("3.5"), "{text}");
    let graph = call("ffi.ToJSONGraphString", vec![value.clone(), Any::none()]);
    let back = call("ffi.FromJSONGraphString", vec![graph]);
    assert!(
        call("ffi.StructuralEqual", args(&value, &back))
            .cast::<bool>()
            .unwrap()
    );
    let tree = call("ffi.ToJSONGraph", vec![value.clone(), Any::none()]);
    let back = call("ffi.FromJSONGraph", vec![tree]);
    assert!(
        call("ffi.StructuralEqual", args(&value, &back))
            .cast::<bool>()
            .unwrap()
    );
    let parsed = call(
        "ffi.json.Parse",
        vec![Any::from(r#"{"a": [1, 2.5, "x", null, true]}"#)],
    );
    let text = call("ffi.json.Stringify", vec![parsed, Any::none()])
        .cast::<String>()
        .unwrap();
    assert!(
        text.contains("2.5") && text.contains("\"x\"") && text.contains("null"),
        "{text}"
    );
    let bad = Function::get_global("ffi.json.Parse")
        .unwrap()
        .call(("{not json",));
    assert_eq!(bad.unwrap_err().kind(), "ValueError");
    let bad = Function::get_global("ffi.FromJSONGraphString")
        .unwrap()
        .call(("[]",));
    assert!(bad.is_err());
}

#[test]
fn tensors_compare_by_content_unless_told_to_skip_it() {
    let a: Any = tvm_ffi::Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3])
        .unwrap()
        .into();
    let same: Any = tvm_ffi::Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3])
        .unwrap()
        .into();
    let other: Any = tvm_ffi::Tensor::from_slice(&[1.0f32, 2.0, 4.0], &[3])
        .unwrap()
        .into();
    let shaped: Any = tvm_ffi::Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3, 1])
        .unwrap()
        .into();
    let eq =
        |x: &Any, y: &Any, skip| structural_equal(x.as_view(), y.as_view(), false, skip).unwrap();
    let hash = |x: &Any, skip| structural_hash(x.as_view(), false, skip).unwrap();
    assert!(eq(&a, &same, false) && eq(&a, &a, false));
    assert!(!eq(&a, &other, false) && eq(&a, &other, true));
    assert!(!eq(&a, &shaped, true));
    assert_eq!(hash(&a, false), hash(&same, false));
    assert_ne!(hash(&a, false), hash(&other, false));
    assert_eq!(hash(&a, true), hash(&other, true));
    assert!(
        first_structural_mismatch(a.as_view(), other.as_view(), false, false)
            .unwrap()
            .is_some()
    );
}

#[test]
fn every_value_has_a_repr() {
    let mut all = samples();
    all.push(
        tvm_ffi::Tensor::from_slice(&[1i32, 2], &[2])
            .unwrap()
            .into(),
    );
    all.push(Any::from(f64::INFINITY));
    all.push(Any::from(1e300f64));
    all.push(Any::from("quote \" and \\ and \n newline"));
    for value in all {
        let text = tvm_ffi::extra::repr::repr(value.as_view()).unwrap();
        assert!(!text.is_empty(), "{value:?}");
    }
}

#[test]
fn structural_keys_work_as_map_keys() {
    let key = Function::get_global("ffi.StructuralKey").unwrap();
    let make = |v: Vec<i64>| -> Any {
        let items: Array = Array::from_vec(v.into_iter().map(Any::from).collect());
        key.call((items,)).unwrap()
    };
    let mut map = Map::new();
    map.insert(make(vec![1, 2]), Any::from("found"));
    let got = map
        .get(&make(vec![1, 2]))
        .expect("an equal structure finds the entry");
    assert_eq!(got.cast::<String>().unwrap(), "found");
    assert!(map.get(&make(vec![2, 1])).is_none());
}

#[test]
fn repr_escapes_every_kind_of_character_and_marks_cycles() {
    let text = "q\" b\\ n\n r\r t\t c\x01 d\x7f é 𝄞";
    let printed = tvm_ffi::extra::repr::repr(Any::from(text).as_view()).unwrap();
    for escaped in [
        "\\\"",
        "\\\\",
        "\\n",
        "\\r",
        "\\t",
        "\\x01",
        "\\x7f",
        "\\u00e9",
        "\\U0001d11e",
    ] {
        assert!(printed.contains(escaped), "{escaped} not in {printed}");
    }
    let list = List::new();
    list.push(Any::from(1i64));
    list.push(Any::from(list.clone()));
    let printed = tvm_ffi::extra::repr::repr(Any::from(list.clone()).as_view()).unwrap();
    assert!(printed.contains("..."), "{printed}");
    list.clear(); // breaks the cycle, so the list is freed
}

#[test]
fn functions_and_errors_compare_by_identity_or_say_why_not() {
    let f: Any = Function::from_packed(|_| Ok(Any::none())).into();
    let g: Any = Function::from_packed(|_| Ok(Any::none())).into();
    let e: Any = tvm_ffi::Error::new(tvm_ffi::ErrorKind::ValueError, "bad").into();
    for value in [&f, &e] {
        match structural_hash(value.as_view(), false, false) {
            Ok(_) => {
                assert!(structural_equal(value.as_view(), value.as_view(), false, false).unwrap())
            }
            Err(err) => assert_eq!(err.kind(), "TypeError", "{err}"),
        }
        assert!(recursive_eq(value.as_view(), value.as_view()).unwrap());
        recursive_hash(value.as_view()).unwrap();
    }
    if let Ok(equal) = structural_equal(f.as_view(), g.as_view(), false, false) {
        assert!(!equal, "two functions are not one");
    }
}

tvm_ffi::define_object! {
    /// An object whose recursive comparison is its type's own hooks: only `key` counts.
    pub struct KeyedNode : "test.value_comparisons.KeyedNode" extends tvm_ffi::Object {
        pub key: Any,
        pub label: i64,
    }
}

#[test]
fn recursive_hooks_get_a_callback_for_sub_values() {
    use tvm_ffi::{ObjectCore, ObjectRef};
    let key = |v: &tvm_ffi::AnyView<'_>| v.cast::<ObjectRef<KeyedNode>>().map(|n| n.key.clone());
    let eq_hook = Function::from_packed(move |args| {
        let fn_eq: Function = args[2].cast()?;
        fn_eq.call((key(&args[0])?, key(&args[1])?))
    });
    let cmp_hook = Function::from_packed(move |args| {
        let fn_cmp: Function = args[2].cast()?;
        fn_cmp.call((key(&args[0])?, key(&args[1])?))
    });
    let hash_hook = Function::from_packed(move |args| {
        let fn_hash: Function = args[1].cast()?;
        fn_hash.call((key(&args[0])?,))
    });
    let index = KeyedNode::type_index();
    for (name, hook) in [
        ("__ffi_eq__", eq_hook),
        ("__ffi_compare__", cmp_hook),
        ("__ffi_hash__", hash_hook),
    ] {
        tvm_ffi::reflection::register_type_attr(index, name, &Any::from(hook)).unwrap();
    }
    let make = |key: Any, label| -> Any {
        ObjectRef::new(KeyedNode {
            base: tvm_ffi::Object::header(),
            key,
            label,
        })
        .into()
    };
    let pair = |a: i64, b: i64| -> Any { Array::from_vec(vec![a.into(), b.into()]).into() };
    let (a, b, c) = (
        make(pair(1, 2), 10),
        make(pair(1, 2), 20),
        make(pair(1, 3), 0),
    );
    assert!(recursive_eq(a.as_view(), b.as_view()).unwrap());
    assert!(!recursive_eq(a.as_view(), c.as_view()).unwrap());
    assert_eq!(
        recursive_cmp(a.as_view(), b.as_view()).unwrap(),
        Ordering::Equal
    );
    assert_eq!(
        recursive_cmp(a.as_view(), c.as_view()).unwrap(),
        Ordering::Less
    );
    assert_eq!(
        recursive_cmp(c.as_view(), a.as_view()).unwrap(),
        Ordering::Greater
    );
    let hash = |v: &Any| recursive_hash(v.as_view()).unwrap();
    assert_eq!(hash(&a), hash(&b));
    assert_ne!(hash(&a), hash(&c));
    // A key holding the object itself: the cycle is seen through the callback.
    let cyclic = List::new();
    let d = make(cyclic.clone().into(), 0);
    cyclic.push(d.clone());
    assert!(recursive_eq(d.as_view(), d.as_view()).unwrap());
    hash(&d);
    // Reference counting frees no cycle: break it.
    cyclic.clear();
}

#[test]
fn recursive_order_rules_for_none_nan_maps_sequences_and_cycles() {
    let cmp = |a: Any, b: Any| recursive_cmp(a.as_view(), b.as_view());
    let kind = |r: tvm_ffi::Result<Ordering>| r.unwrap_err().kind().into_owned();
    assert_eq!(cmp(Any::none(), 42i64.into()).unwrap(), Ordering::Less);
    assert_eq!(cmp("s".into(), Any::none()).unwrap(), Ordering::Greater);
    assert_eq!(cmp(Any::none(), Any::none()).unwrap(), Ordering::Equal);
    assert_eq!(kind(cmp(f64::NAN.into(), 1.0f64.into())), "TypeError");
    assert_eq!(kind(cmp(f64::NAN.into(), f64::NAN.into())), "TypeError");
    // An array and a list are different types.
    let array: Any = Array::from_vec(vec![1i64.into()]).into();
    let list: Any = [Any::from(1i64)].into_iter().collect::<List>().into();
    assert!(!recursive_eq(array.as_view(), list.as_view()).unwrap());
    assert_eq!(kind(cmp(array, list)), "TypeError");
    // Equal maps compare equal; unequal ones cannot be ordered.
    let dict = |v: i64| -> Any {
        let d = Dict::new();
        d.insert("x", v);
        d.into()
    };
    assert_eq!(cmp(dict(1), dict(1)).unwrap(), Ordering::Equal);
    assert_eq!(kind(cmp(dict(1), dict(2))), "TypeError");
    // Distinct cyclic lists are equal but cannot be ordered.
    let cyclic = || -> Any {
        let l = List::new();
        l.push(l.clone());
        l.into()
    };
    let (a, b) = (cyclic(), cyclic());
    assert!(recursive_eq(a.as_view(), b.as_view()).unwrap());
    let err = recursive_cmp(a.as_view(), b.as_view()).unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    assert!(err.message().contains("cyclic reference"), "{err}");
    for v in [&a, &b] {
        v.cast::<List>().unwrap().clear();
    }
}

#[test]
fn recursive_hash_agrees_with_equality() {
    let hash = |v: Any| recursive_hash(v.as_view()).unwrap();
    assert_eq!(hash((-0.0f64).into()), hash(0.0f64.into()));
    assert!(recursive_eq(Any::from(-0.0f64).as_view(), Any::from(0.0f64).as_view()).unwrap());
    // Objects without reflected fields (functions) are all equal and hash alike.
    let f: Any = Function::from_packed(|_| Ok(Any::none())).into();
    let g: Any = Function::from_packed(|_| Ok(Any::from(1i64))).into();
    assert!(recursive_eq(f.as_view(), g.as_view()).unwrap());
    assert_eq!(hash(f), hash(g));
}

tvm_ffi::define_object! {
    /// An object with an equality hook and no hash hook.
    pub struct EqOnlyNode : "test.value_comparisons.EqOnlyNode" extends tvm_ffi::Object {
        pub key: i64,
    }
}

#[test]
fn recursive_hash_refuses_a_type_with_equality_but_no_hash_hook() {
    use tvm_ffi::{ObjectCore, ObjectRef};
    let eq_hook = Function::from_packed(|_| Ok(Any::from(true)));
    let index = EqOnlyNode::type_index();
    tvm_ffi::reflection::register_type_attr(index, "__ffi_eq__", &Any::from(eq_hook)).unwrap();
    let node: Any = ObjectRef::new(EqOnlyNode {
        base: tvm_ffi::Object::header(),
        key: 1,
    })
    .into();
    let nested: Any = Array::from_vec(vec![node]).into();
    let err = recursive_hash(nested.as_view()).unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    assert!(
        err.message()
            .contains("__ffi_eq__ or __ffi_compare__ but not __ffi_hash__"),
        "{err}"
    );
}

#[test]
fn ordering_distinct_cyclic_dicts_is_a_value_error() {
    let cyclic = || -> Dict {
        let d = Dict::new();
        d.insert("self", d.clone());
        d
    };
    let (a, b) = (cyclic(), cyclic());
    let (x, y): (Any, Any) = (a.clone().into(), b.clone().into());
    assert!(recursive_eq(x.as_view(), y.as_view()).unwrap());
    let err = recursive_cmp(x.as_view(), y.as_view()).unwrap_err();
    assert_eq!(err.kind(), "ValueError", "{err}");
    // A missing key makes maps unordered.
    let other = Dict::new();
    other.insert("other", 1i64);
    let z: Any = other.into();
    assert_eq!(
        recursive_cmp(x.as_view(), z.as_view()).unwrap_err().kind(),
        "TypeError"
    );
    a.clear();
    b.clear();
}

#[test]
fn deep_nesting_is_a_value_error_not_a_stack_overflow() {
    // A small stack, so that the walks run out of it long before their depth limits.
    let run = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(|| {
            let nested = || {
                let mut v = Any::from(1i64);
                for _ in 0..9_000 {
                    v = Array::from_vec(vec![v]).into();
                }
                v
            };
            let (a, b) = (nested(), nested());
            let errors = [
                recursive_eq(a.as_view(), b.as_view()).map(drop),
                recursive_cmp(a.as_view(), b.as_view()).map(drop),
                recursive_hash(a.as_view()).map(drop),
                tvm_ffi::extra::deep_copy::deep_copy(a.as_view()).map(drop),
                structural_equal(a.as_view(), b.as_view(), false, false).map(drop),
                structural_hash(a.as_view(), false, false).map(drop),
                tvm_ffi::extra::serialization::to_json_graph_string(
                    a.as_view(),
                    Any::none().as_view(),
                )
                .map(drop),
            ];
            let text = format!("{}{}", "[".repeat(9_000), "]".repeat(9_000));
            let parsed = tvm_ffi::extra::serialization::from_json_graph_string(&text).map(drop);
            // The printer shows what nests deeper than the stack allows as `...`.
            assert!(
                tvm_ffi::extra::repr::repr(a.as_view())
                    .unwrap()
                    .contains("...")
            );
            for err in errors.into_iter().chain([parsed]) {
                let err = err.unwrap_err();
                assert_eq!(err.kind(), "ValueError", "{err}");
                assert!(err.message().contains("nested too deeply"), "{err}");
            }
        })
        .unwrap();
    run.join().unwrap();
}
