//! Structural traversal and rewriting (`tvm_ffi::extra::structural::{visit, mutate}`): definition
//! regions over reflected fields, the variable remap, in-place rewriting of uniquely owned
//! values, and the visit context of errors.

use std::sync::{Arc, Mutex};

use tvm_ffi::abi::{self, TVMFFIByteArray, TVMFFITypeMetadata};
use tvm_ffi::extra::structural::mutate::structural_map;
use tvm_ffi::extra::structural::visit::structural_walk;
use tvm_ffi::extra::structural::visit_error::{VisitErrorContextObj, find_access_paths};
use tvm_ffi::{Any, AnyView, Array, ErrorKind, Function, ObjectCore};

use crate::dataclass::{define, field};

const ANY: i32 = abi::kTVMFFIAny;

/// Registers the structural kind of a type laid out at run time.
pub(crate) fn set_kind(index: i32, total_size: i32, kind: i32) {
    let metadata = TVMFFITypeMetadata {
        doc: TVMFFIByteArray::EMPTY,
        creator: None,
        total_size,
        structural_eq_hash_kind: kind,
    };
    // SAFETY: a valid record for the call; the runtime copies it.
    let rc = unsafe { abi::TVMFFITypeRegisterMetadata(index, &metadata) };
    assert_eq!(rc, 0);
}

/// `test.traversal.Var`: a free variable with `name` and `ty` (any value).
pub(crate) fn var_type() -> i32 {
    static INDEX: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *INDEX.get_or_init(|| {
        let fields = [field("name", ANY, 16, 24), field("ty", ANY, 16, 40)];
        let index = define("test.traversal.Var", &fields, 56);
        set_kind(index, 56, abi::kTVMFFISEqHashKindFreeVar);
        index
    })
}

/// `test.traversal.Func`: `params` (a pattern definition), `simple` (a simple definition) and
/// `body` (uses).
pub(crate) fn func_type() -> i32 {
    static INDEX: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *INDEX.get_or_init(|| {
        let mut params = field("params", ANY, 16, 24);
        params.flags = abi::kTVMFFIFieldFlagBitMaskSEqHashDef;
        let mut simple = field("simple", ANY, 16, 40);
        simple.flags = abi::kTVMFFIFieldFlagBitMaskSEqHashDefSimple;
        let fields = [params, simple, field("body", ANY, 16, 56)];
        let index = define("test.traversal.Func", &fields, 72);
        set_kind(index, 72, abi::kTVMFFISEqHashKindTreeNode);
        index
    })
}

pub(crate) fn make(type_index: i32, values: Vec<Any>) -> Any {
    let init: Function = tvm_ffi::extra::dataclass::type_attr(type_index, "__ffi_init__")
        .unwrap()
        .cast()
        .unwrap();
    init.call_packed(&values.iter().map(Any::as_view).collect::<Vec<_>>())
        .unwrap()
}

pub(crate) fn var(name: &str, ty: Any) -> Any {
    make(var_type(), vec![name.into(), ty])
}

pub(crate) fn get(obj: &Any, name: &str) -> Any {
    let field = tvm_ffi::reflection::fields_of(obj.type_index())
        .find(|f| f.name() == name)
        .unwrap();
    field.get(obj.as_view()).unwrap()
}

pub(crate) fn arr(items: Vec<Any>) -> Any {
    Array::from_vec(items).into()
}

/// A callback table `[[type_index, callback]]`.
pub(crate) fn table(type_index: i32, callback: Function) -> Any {
    arr(vec![arr(vec![
        Any::from(i64::from(type_index)),
        callback.into(),
    ])])
}

#[test]
fn walks_see_the_definition_region_of_each_occurrence() {
    let ty = var("t", Any::none());
    let x = var("x", ty.clone());
    let y = var("y", Any::none());
    let root = make(
        func_type(),
        vec![arr(vec![x.clone()]), x.clone(), arr(vec![x, y])],
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let callback = Function::from_packed(move |args| {
        let name: String = get(&args[0].to_owned(), "name").cast().unwrap();
        let kind: i64 = args[1].cast().unwrap();
        record.lock().unwrap().push(format!("{name}:{kind}"));
        Ok(Any::none())
    });
    let outcome = structural_walk(
        root.as_view(),
        AnyView::none(),
        table(var_type(), callback).as_view(),
        0,
    )
    .unwrap();
    assert!(outcome.is_none());
    // The pattern binds `x` and its type; the simple definition binds `x` alone (its type is a
    // use); the body's variables are uses.
    assert_eq!(
        *seen.lock().unwrap(),
        ["x:1", "t:1", "x:2", "t:0", "x:0", "t:0", "y:0"]
    );
}

#[test]
fn a_rewritten_definition_is_shared_by_its_uses() {
    let x = var("x", Any::from(1i64));
    let root = make(
        func_type(),
        vec![arr(vec![]), x.clone(), arr(vec![x.clone(), x.clone()])],
    );
    let increment = Function::from_packed(|args| Ok(Any::from(args[0].cast::<i64>()? + 1)));
    let table = table(abi::kTVMFFIInt, increment);
    let mapped = structural_map(root.clone(), table.as_view(), AnyView::none(), 1).unwrap();
    let simple = get(&mapped, "simple");
    assert_eq!(get(&simple, "ty").cast::<i64>().unwrap(), 2);
    let body: Array = get(&mapped, "body").cast().unwrap();
    for use_ in body.iter() {
        assert_eq!(use_.as_object_ptr(), simple.as_object_ptr());
    }
    // The source is unchanged.
    assert_eq!(get(&x, "ty").cast::<i64>().unwrap(), 1);
    assert_eq!(get(&root, "simple").as_object_ptr(), x.as_object_ptr());
}

#[test]
fn a_uniquely_owned_root_changes_in_place_and_a_shared_one_is_copied() {
    let negate = Function::from_packed(|args| Ok(Any::from(-args[0].cast::<i64>()?)));
    let table = table(abi::kTVMFFIInt, negate);

    let owned = arr(vec![arr(vec![Any::from(1i64)]), Any::from(2i64)]);
    let (outer, inner) = (owned.as_object_ptr(), get_item(&owned, 0).as_object_ptr());
    let mapped = structural_map(owned, table.as_view(), AnyView::none(), 1).unwrap();
    assert_eq!(mapped.as_object_ptr(), outer);
    assert_eq!(get_item(&mapped, 0).as_object_ptr(), inner);
    assert_eq!(
        get_item(&get_item(&mapped, 0), 0).cast::<i64>().unwrap(),
        -1
    );

    let shared = arr(vec![Any::from(3i64)]);
    let mapped = structural_map(shared.clone(), table.as_view(), AnyView::none(), 1).unwrap();
    assert_ne!(mapped.as_object_ptr(), shared.as_object_ptr());
    assert_eq!(get_item(&shared, 0).cast::<i64>().unwrap(), 3);
    assert_eq!(get_item(&mapped, 0).cast::<i64>().unwrap(), -3);
}

pub(crate) fn get_item(array: &Any, index: usize) -> Any {
    array.cast::<Array>().unwrap().as_slice()[index].clone()
}

/// The visit context an error of a traversal carries.
pub(crate) fn visit_context(err: &tvm_ffi::Error) -> &VisitErrorContextObj {
    err.extra_context()
        .and_then(|c| c.as_object::<VisitErrorContextObj>())
        .expect("a visit error context")
}

#[test]
fn an_error_names_the_objects_it_left_and_their_paths() {
    let inner = arr(vec![Any::from(1i64), Any::from(2i64)]);
    let root = arr(vec![Any::from(0i64), inner.clone()]);
    let fail_on_two = Function::from_packed(|args| {
        if args[0].cast::<i64>()? == 2 {
            tvm_ffi::bail!(ErrorKind::ValueError, "two is not allowed");
        }
        Ok(Any::none())
    });
    let err = structural_walk(
        root.as_view(),
        table(abi::kTVMFFIInt, fail_on_two).as_view(),
        AnyView::none(),
        1,
    )
    .unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    let context = visit_context(&err);
    let trail = context.reverse_visit_pattern.to_vec();
    assert_eq!(trail.len(), 2);
    assert_eq!(trail[0].as_object_ptr(), inner.as_object_ptr());
    let paths = find_access_paths(root.as_view(), context, false).unwrap();
    let texts: Vec<_> = paths.iter().map(|p| p.to_text().unwrap()).collect();
    assert_eq!(texts, ["<root>[1]"]);
    // The global function agrees, and the type is registered under its key.
    let find = Function::get_global("ffi.VisitErrorContext.FindAccessPaths").unwrap();
    let found: Array = find
        .call((root, err.extra_context().unwrap().to_owned(), false))
        .unwrap()
        .cast()
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(
        tvm_ffi::types::type_key_of(VisitErrorContextObj::type_index()),
        "ffi.VisitErrorContext"
    );
}

#[test]
fn bad_tables_and_orders_are_clear_errors() {
    let root = arr(vec![Any::from(1i64)]);
    let err = structural_walk(
        root.as_view(),
        Any::from(5i64).as_view(),
        AnyView::none(),
        0,
    )
    .unwrap_err();
    assert_eq!(err.kind(), "TypeError");
    let short = arr(vec![arr(vec![Any::from(1i64)])]);
    let err = structural_walk(root.as_view(), short.as_view(), AnyView::none(), 0).unwrap_err();
    assert!(err.message().contains("1 items"), "{}", err.message());
    let err = structural_walk(root.as_view(), AnyView::none(), AnyView::none(), 7).unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    let err = structural_map(root, AnyView::none(), AnyView::none(), -1).unwrap_err();
    assert_eq!(err.kind(), "ValueError");
}
