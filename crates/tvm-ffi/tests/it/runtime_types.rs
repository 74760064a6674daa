//! Object types and enums defined at run time (`tvm_ffi::extra::runtime_types`): layout, field
//! getters and setters, defaults, structural kind, checks of a specification, inheritance, the
//! release of fields, and enum types with their entries.

use std::sync::atomic::{AtomicUsize, Ordering};

use tvm_ffi::abi;
use tvm_ffi::extra::dataclass::{self, FieldStorage};
use tvm_ffi::extra::deep_copy::deep_copy;
use tvm_ffi::extra::enums::{self, IntEnumObj};
use tvm_ffi::extra::repr::repr;
use tvm_ffi::extra::runtime_types::{
    self, EnumKind, FieldDefault, FieldSpec, TypeSpec, USER_FIELD_FLAGS, layout_fields,
    storage_layout,
};
use tvm_ffi::extra::serialization::{from_json_graph_string, to_json_graph_string};
use tvm_ffi::extra::structural::{structural_equal, structural_hash};
use tvm_ffi::reflection::fields_of;
use tvm_ffi::{Any, AnyView, Array, ErrorKind, Function, Object, ObjectCore, types};

/// A key no other test uses.
fn fresh_key(name: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "test.runtime_types.{name}{}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn spec(name: &str, static_type_index: i32, storage: FieldStorage) -> FieldSpec {
    FieldSpec {
        name: name.into(),
        static_type_index,
        storage,
        flags: abi::kTVMFFIFieldFlagBitMaskWritable,
        default: FieldDefault::Required,
    }
}

fn type_spec(key: &str, parent_index: i32, fields: Vec<FieldSpec>) -> TypeSpec {
    TypeSpec {
        type_key: key.into(),
        parent_index,
        fields,
        structural_kind: abi::kTVMFFISEqHashKindTreeNode,
    }
}

/// `flag: bool, count: int, label: str (Any) = "none", items: Array = factory ()`.
fn sample_type() -> (i32, Vec<usize>) {
    let mut label = spec("label", abi::kTVMFFIStr, FieldStorage::Any);
    label.default = FieldDefault::Value(Any::from("none"));
    let mut items = spec("items", abi::kTVMFFIArray, FieldStorage::Object);
    items.default = FieldDefault::Factory(Function::from_typed("make_items", || {
        Array::from_iter([Any::from(1i64)])
    }));
    let fields = vec![
        spec("flag", abi::kTVMFFIBool, FieldStorage::Bool),
        spec("count", abi::kTVMFFIInt, FieldStorage::Int),
        label,
        items,
    ];
    runtime_types::define_type(&type_spec(&fresh_key("Sample"), abi::kTVMFFIObject, fields))
        .unwrap()
}

fn get(obj: &Any, name: &str) -> Any {
    fields_of(obj.type_index())
        .find(|f| f.name() == name)
        .unwrap()
        .get(obj.as_view())
        .unwrap()
}

fn set(obj: &Any, name: &str, value: Any) -> tvm_ffi::Result<()> {
    fields_of(obj.type_index())
        .find(|f| f.name() == name)
        .unwrap()
        .set(obj.as_view(), value.as_view())
}

fn init(type_index: i32, args: &[Any]) -> tvm_ffi::Result<Any> {
    let init: Function = dataclass::type_attr(type_index, "__ffi_init__")
        .unwrap()
        .cast()
        .unwrap();
    let views: Vec<AnyView<'_>> = args.iter().map(Any::as_view).collect();
    init.call_packed(&views)
}

#[test]
fn storage_layouts_and_field_offsets() {
    assert_eq!(storage_layout(FieldStorage::Int), (8, 8));
    assert_eq!(storage_layout(FieldStorage::Float), (8, 8));
    assert_eq!(storage_layout(FieldStorage::OpaquePtr), (8, 8));
    assert_eq!(storage_layout(FieldStorage::Bool), (1, 1));
    assert_eq!(storage_layout(FieldStorage::DataType), (4, 2));
    assert_eq!(storage_layout(FieldStorage::Device), (8, 4));
    assert_eq!(storage_layout(FieldStorage::Any), (16, 8));
    assert_eq!(storage_layout(FieldStorage::Object), (8, 8));
    let storages = [
        FieldStorage::Bool,
        FieldStorage::Int,
        FieldStorage::Bool,
        FieldStorage::DataType,
        FieldStorage::Device,
        FieldStorage::Bool,
    ];
    assert_eq!(
        layout_fields(24, &storages),
        (vec![24, 32, 40, 42, 48, 56], 64)
    );
    assert_eq!(layout_fields(24, &[]), (vec![], 24));
}

#[test]
fn defined_types_store_read_and_default_their_fields() {
    let (index, offsets) = sample_type();
    assert_eq!(offsets, vec![24, 32, 40, 56]);
    assert_eq!(types::total_size(index), Some(64));
    let info = types::type_info(index).unwrap();
    // SAFETY: a defined type has metadata, owned by the type table.
    let metadata = unsafe { &*info.metadata };
    assert_eq!(
        metadata.structural_eq_hash_kind,
        abi::kTVMFFISEqHashKindTreeNode
    );
    assert!(metadata.creator.is_none());

    let obj = init(index, &[Any::from(true), Any::from(7i64)]).unwrap();
    assert!(get(&obj, "flag").cast::<bool>().unwrap());
    assert_eq!(get(&obj, "count").cast::<i64>().unwrap(), 7);
    assert_eq!(get(&obj, "label").cast::<String>().unwrap(), "none");
    assert_eq!(get(&obj, "items").cast::<Array>().unwrap().len(), 1);

    set(&obj, "count", Any::from(9i64)).unwrap();
    set(&obj, "label", Any::from("a longer label than inline")).unwrap();
    assert_eq!(get(&obj, "count").cast::<i64>().unwrap(), 9);
    let text = repr(obj.as_view()).unwrap();
    assert!(text.contains("count=9"), "{text}");
    assert!(text.contains("a longer label than inline"), "{text}");
}

#[test]
fn setters_check_values_and_name_the_field() {
    let (index, _) = sample_type();
    let obj = init(index, &[Any::from(false), Any::from(1i64)]).unwrap();
    let err = set(&obj, "count", Any::from("x")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TypeError.as_str());
    assert!(err.message().contains("field `count`"), "{}", err.message());
    let err = set(&obj, "items", Any::from(tvm_ffi::Shape::new(&[1]))).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TypeError.as_str());
    assert!(
        err.message().contains("expects `ffi.Array`"),
        "{}",
        err.message()
    );
    // None is allowed in an object slot.
    set(&obj, "items", Any::none()).unwrap();
    assert!(get(&obj, "items").is_none());
}

#[test]
fn a_boxed_typed_field_refuses_values_of_another_type() {
    let (index, _) = sample_type();
    let obj = init(index, &[Any::from(false), Any::from(1i64)]).unwrap();
    for (value, shown) in [
        (Any::from(5i64), "got `int` (5)"),
        (Any::none(), "got `None` (None)"),
        (
            Any::from(tvm_ffi::Bytes::from(&b"raw"[..])),
            "got `ffi.SmallBytes`",
        ),
    ] {
        let err = set(&obj, "label", value).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TypeError.as_str());
        let wanted = format!(
            "field `label` of `{}` expects `ffi.String`, {shown}",
            types::type_key_of(index)
        );
        assert!(err.message().starts_with(&wanted), "{}", err.message());
    }
    assert_eq!(get(&obj, "label").cast::<String>().unwrap(), "none");
    // Both forms of a string are strings.
    set(&obj, "label", Any::from("s")).unwrap();
    set(
        &obj,
        "label",
        Any::from("a string too long to be stored inline"),
    )
    .unwrap();
    assert!(
        get(&obj, "label")
            .cast::<String>()
            .unwrap()
            .starts_with("a string")
    );
}

/// The setter function of field `position` of `type_index`'s own fields.
fn setter_of(type_index: i32, position: usize) -> Function {
    let info = types::type_info(type_index).unwrap();
    // SAFETY: the entry lists `num_fields` records that live for the process.
    let field = unsafe { &*info.fields.add(position) };
    assert!(field.flags & abi::kTVMFFIFieldFlagBitMaskSetterIsFunctionObj != 0);
    let raw = abi::TVMFFIAny {
        type_index: abi::kTVMFFIFunction,
        small_str_len: 0,
        payload: abi::TVMFFIAnyPayload {
            v_obj: field.setter.cast(),
        },
    };
    // SAFETY: with the flag, the setter is a function object the type table keeps alive.
    unsafe { AnyView::from_raw(raw) }.cast().unwrap()
}

#[test]
fn setter_functions_reject_bad_calls() {
    let (index, _) = sample_type();
    let setter = setter_of(index, 1);
    let err = setter.call_packed(&[]).unwrap_err();
    assert!(err.message().contains("(field address, value)"));
    let null = Any::from(std::ptr::null_mut::<std::ffi::c_void>());
    let err = setter
        .call_packed(&[null.as_view(), Any::from(1i64).as_view()])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ValueError.as_str());
    assert!(err.message().contains("NULL field address"));
}

#[test]
fn defined_types_copy_serialize_and_compare() {
    let (index, _) = sample_type();
    let obj = init(index, &[Any::from(true), Any::from(3i64)]).unwrap();
    let copy = deep_copy(obj.as_view()).unwrap();
    assert_ne!(copy.as_object_ptr(), obj.as_object_ptr());
    assert!(structural_equal(copy.as_view(), obj.as_view(), false, false).unwrap());
    let text = to_json_graph_string(obj.as_view(), Any::none().as_view()).unwrap();
    let back = from_json_graph_string(&text).unwrap();
    assert_eq!(back.type_index(), index);
    assert_eq!(
        structural_hash(back.as_view(), false, false).unwrap(),
        structural_hash(obj.as_view(), false, false).unwrap()
    );
    let other = init(index, &[Any::from(true), Any::from(4i64)]).unwrap();
    assert!(!structural_equal(other.as_view(), obj.as_view(), false, false).unwrap());
}

#[test]
fn children_extend_their_parent_and_release_their_fields() {
    let (parent, _) = sample_type();
    let key = fresh_key("Child");
    let child_fields = vec![
        spec("other", abi::kTVMFFIObject, FieldStorage::Object),
        spec("anything", abi::kTVMFFIAny, FieldStorage::Any),
    ];
    let (child, offsets) =
        runtime_types::define_type(&type_spec(&key, parent, child_fields)).unwrap();
    assert_eq!(offsets, vec![64, 72]);
    assert_eq!(types::total_size(child), Some(88));
    assert!(types::is_instance_of(child, parent));

    let held = Array::from_iter([Any::from(1i64)]);
    let count = |array: &Array| {
        Any::from(array.clone())
            .as_object::<Object>()
            .unwrap()
            .strong_count()
    };
    let before = count(&held);
    // The generated constructor takes the required fields first.
    let obj = init(
        child,
        &[
            Any::from(true),
            Any::from(1i64),
            Any::from(held.clone()),
            Any::from(held.clone()),
            Any::from("l"),
            Any::from(held.clone()),
        ],
    )
    .unwrap();
    assert_eq!(count(&held), before + 3);
    drop(obj);
    assert_eq!(count(&held), before);
}

fn define_error(spec: &TypeSpec) -> tvm_ffi::Error {
    let err = runtime_types::define_type(spec).expect_err("rejected");
    // A rejected definition registers nothing (a key in use stays as it was).
    if !err.message().contains("already registered") {
        assert!(types::type_key_to_index(&spec.type_key).is_err());
    }
    err
}

#[test]
fn invalid_specifications_are_rejected_before_registration() {
    let object = abi::kTVMFFIObject;
    let int = || spec("x", abi::kTVMFFIInt, FieldStorage::Int);
    let check = |spec: TypeSpec, needle: &str| {
        let err = define_error(&spec);
        assert_eq!(
            err.kind(),
            ErrorKind::ValueError.as_str(),
            "{}",
            err.message()
        );
        assert!(
            err.message().contains(needle),
            "{}: {needle}",
            err.message()
        );
    };
    check(type_spec("", object, vec![]), "must not be empty");
    check(type_spec("ffi.Array", object, vec![]), "already registered");
    check(
        type_spec(&fresh_key("BadParent"), abi::kTVMFFIArray, vec![]),
        "must be ffi.Object or a type defined at run time",
    );
    check(
        type_spec(&fresh_key("RustParent"), IntEnumObj::type_index(), vec![]),
        "must be ffi.Object",
    );
    let mut kind = type_spec(&fresh_key("Kind"), object, vec![]);
    kind.structural_kind = 9;
    check(kind, "unknown structural kind 9");
    check(
        type_spec(
            &fresh_key("Empty"),
            object,
            vec![spec("", -1, FieldStorage::Any)],
        ),
        "empty name",
    );
    check(
        type_spec(&fresh_key("Twice"), object, vec![int(), int()]),
        "field `x` twice",
    );
    let (parent, _) = sample_type();
    check(
        type_spec(
            &fresh_key("Inherited"),
            parent,
            vec![spec("count", 1, FieldStorage::Int)],
        ),
        "field `count` twice",
    );
    check(
        type_spec(
            &fresh_key("Misfit"),
            object,
            vec![spec("x", abi::kTVMFFIFloat, FieldStorage::Int)],
        ),
        "cannot hold type index",
    );
    check(
        type_spec(
            &fresh_key("Text"),
            object,
            vec![spec("x", abi::kTVMFFIStr, FieldStorage::Object)],
        ),
        "cannot hold type index",
    );
    check(
        type_spec(
            &fresh_key("Untyped"),
            object,
            vec![spec("x", -1, FieldStorage::Object)],
        ),
        "cannot hold type index",
    );
    check(
        type_spec(
            &fresh_key("Unstorable"),
            object,
            vec![spec("x", 7, FieldStorage::Int)],
        ),
        "cannot hold type index",
    );
    let mut flagged = int();
    flagged.flags = abi::kTVMFFIFieldFlagBitMaskSetterIsFunctionObj;
    assert_eq!(flagged.flags & USER_FIELD_FLAGS, 0);
    check(
        type_spec(&fresh_key("Flags"), object, vec![flagged]),
        "not settable",
    );
}

#[test]
fn total_size_of_known_and_unknown_types() {
    assert_eq!(types::total_size(abi::kTVMFFIObject), Some(24));
    assert_eq!(
        types::total_size(IntEnumObj::type_index()),
        Some(size_of::<IntEnumObj>())
    );
    assert_eq!(types::total_size(1_000_000), None);
    let bare = types::register_type(&fresh_key("Bare"), abi::kTVMFFIObject, 0, true).unwrap();
    assert_eq!(types::total_size(bare), None);
}

#[test]
fn enum_types_hold_singleton_entries_of_each_kind() {
    // An int enum's entries are indexed by their values, a str enum's named by theirs.
    for (kind, values, names) in [
        (
            EnumKind::Plain,
            [Any::none(), Any::none()],
            ["First", "Second"],
        ),
        (
            EnumKind::Int,
            [Any::from(42i64), Any::from(-7i64)],
            ["First", "Second"],
        ),
        (
            EnumKind::Str,
            [Any::from("forty-two"), Any::from("seven")],
            ["forty-two", "seven"],
        ),
    ] {
        let key = fresh_key("Enum");
        let index = runtime_types::define_enum_type(&key, kind).unwrap();
        assert!(types::is_instance_of(index, kind.parent_index()));
        assert!(enums::is_enum_type(index));
        let add =
            |name, value: &Any| runtime_types::add_enum_entry(index, kind, name, value.as_view());
        let first = add("First", &values[0]).unwrap();
        let second = add("Second", &values[1]).unwrap();
        assert_eq!(first.type_index(), index);
        assert_eq!(
            repr(second.as_view()).unwrap(),
            format!("{key}.{}", names[1])
        );
        assert_eq!(
            enums::entry_name(first.as_view()).as_deref(),
            Some(names[0])
        );
        let found = enums::entry_by_name(&key, names[1]).unwrap();
        assert_eq!(found.as_object_ptr(), second.as_object_ptr());
        if kind != EnumKind::Plain {
            let value = get(&first, "value");
            assert_eq!(value, values[0]);
        }
        let text = to_json_graph_string(first.as_view(), Any::none().as_view()).unwrap();
        let back = from_json_graph_string(&text).unwrap();
        assert_eq!(back.as_object_ptr(), first.as_object_ptr());
        let err = add("First", &values[0]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ValueError.as_str());
    }
}

#[test]
fn enum_definitions_and_entries_reject_bad_input() {
    let err = runtime_types::define_enum_type("", EnumKind::Plain).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ValueError.as_str());
    let key = fresh_key("Taken");
    let index = runtime_types::define_enum_type(&key, EnumKind::Int).unwrap();
    let err = runtime_types::define_enum_type(&key, EnumKind::Int).unwrap_err();
    assert!(err.message().contains("already registered"));
    // An int enum's entry needs an int value.
    let err = runtime_types::add_enum_entry(index, EnumKind::Int, "A", Any::from("x").as_view())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TypeError.as_str());
    // The kind must match the type, and the base enum types take no entries.
    for (target, kind) in [
        (index, EnumKind::Str),
        (EnumKind::Int.parent_index(), EnumKind::Int),
        (abi::kTVMFFIObject, EnumKind::Plain),
    ] {
        let err =
            runtime_types::add_enum_entry(target, kind, "A", Any::none().as_view()).unwrap_err();
        assert_eq!(
            err.kind(),
            ErrorKind::TypeError.as_str(),
            "{}",
            err.message()
        );
    }
}

/// A chain of `links` objects of `index` (a type with `next: Object` and `any_next: Any`),
/// its links alternating between the object slot and the `Any` slot.
fn chain(index: i32, links: usize) -> Any {
    let mut head = Any::none();
    for i in 0..links {
        head = if i % 2 == 0 {
            init(index, &[head]).unwrap()
        } else {
            let link = init(index, &[Any::none()]).unwrap();
            set(&link, "any_next", head).unwrap();
            link
        };
    }
    head
}

#[test]
fn long_chains_are_freed_and_traversed_without_overflowing_the_stack() {
    let mut any_next = spec("any_next", abi::kTVMFFIAny, FieldStorage::Any);
    any_next.default = FieldDefault::Value(Any::none());
    let fields = vec![
        spec("next", abi::kTVMFFIObject, FieldStorage::Object),
        any_next,
    ];
    let key = fresh_key("Chain");
    let (index, _) =
        runtime_types::define_type(&type_spec(&key, abi::kTVMFFIObject, fields)).expect("define");
    // A test thread's stack is small (2 MiB): releasing or walking the links one frame per link
    // would overflow it. Valgrind runs the test some 30 times slower, so it gets chains that
    // are shorter but still far past what that stack holds frame by frame.
    let links = if std::env::var_os("TVM_UNDER_VALGRIND").is_some() {
        50_000
    } else {
        200_000
    };
    let (head, twin) = (chain(index, links), chain(index, links));
    let too_deep = |e: tvm_ffi::Error| {
        assert_eq!(e.kind(), ErrorKind::ValueError.as_str(), "{}", e.message());
        assert!(e.message().contains("nested too deeply"), "{}", e.message());
    };
    too_deep(structural_hash(head.as_view(), false, false).unwrap_err());
    too_deep(structural_equal(head.as_view(), twin.as_view(), false, false).unwrap_err());
    too_deep(deep_copy(head.as_view()).unwrap_err());
    too_deep(to_json_graph_string(head.as_view(), Any::none().as_view()).unwrap_err());
    assert!(repr(head.as_view()).unwrap().contains("..."));
    drop((head, twin));
}
