//! Sizes a caller asks for that no memory holds are `MemoryError`s, not aborts.

use tvm_ffi::containers::map::{Dict, Map, MapRead};
use tvm_ffi::extra::serialization::json;
use tvm_ffi::{Any, Array, List};

fn assert_memory_error(result: tvm_ffi::Result<impl Sized>, naming: &str) {
    let Err(err) = result else {
        panic!("no error");
    };
    assert!(err.is_kind("MemoryError"), "{err:?}");
    assert!(err.message().contains(naming), "{err:?}");
}

#[test]
fn json_indentation_past_memory_is_a_memory_error() {
    let value: Any = Array::from_vec(vec![Any::from(1i64), Any::from(2i64)]).into();
    assert_memory_error(json::stringify(value.as_view(), Some(1 << 62)), "JSON text");
    // An indent times the depth that overflows is refused the same way.
    let nested: Any = Array::from_vec(vec![value.clone()]).into();
    assert_memory_error(
        json::stringify(nested.as_view(), Some(usize::MAX)),
        "JSON text",
    );
    assert_eq!(
        json::stringify(value.as_view(), Some(1)).unwrap(),
        "[\n 1,\n 2\n]"
    );
}

#[test]
fn containers_reserved_past_memory_are_memory_errors() {
    let list = List::new();
    assert_memory_error(
        list.try_reserve(1 << 60),
        "a list of 1152921504606846976 values",
    );
    assert_memory_error(list.try_reserve(usize::MAX), "values");
    list.try_reserve(10).unwrap();
    assert_eq!(list.len(), 0);
    assert_memory_error(
        Dict::try_with_capacity(1 << 58),
        "a map of 288230376151711744",
    );
    assert_memory_error(
        Map::try_with_capacity(1 << 58),
        "a map of 288230376151711744",
    );
    assert_memory_error(Map::try_with_capacity(usize::MAX), &usize::MAX.to_string());
    let dict = Dict::try_with_capacity(100).unwrap();
    dict.insert("a", 1i64);
    assert_eq!(dict.len(), 1);
    let mut map = Map::try_with_capacity(3).unwrap();
    map.insert("b", 2i64);
    assert_eq!(map.len(), 1);
}

#[test]
fn fallible_constructors_build_what_they_are_given() {
    let array = Array::try_from_vec(vec![Any::from(7i64)]).unwrap();
    assert_eq!(array.len(), 1);
    let shape = tvm_ffi::Shape::try_new(&[2, 3]).unwrap();
    assert_eq!(shape.as_slice(), &[2, 3]);
    let text = tvm_ffi::String::try_new("more than seven bytes").unwrap();
    assert_eq!(text, "more than seven bytes");
    let bytes = tvm_ffi::Bytes::try_from_bytes(b"abc").unwrap();
    assert_eq!(bytes.as_bytes(), b"abc");
}
