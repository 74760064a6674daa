//! The marker types of the built-in objects (`StrObj`, `BytesHeapObj`, `ArrayObj`, `ListObj`):
//! their static type indices match the runtime values, each accepts exactly its own objects, and
//! casts that the marker accepts share the object instead of copying it.

use tvm_ffi::abi;
use tvm_ffi::containers::array::{ArrayObj, ListObj, SeqObj};
use tvm_ffi::string::{BytesHeapObj, StrObj};
use tvm_ffi::{Any, Array, Bytes, Function, List, Object, ObjectCore, ObjectRef, String};

/// One heap value of each marked type, plus objects and values of other types.
fn samples() -> Vec<Any> {
    vec![
        Any::from(String::new("a heap string of some length")),
        Any::from(Bytes::from(vec![1u8; 32])),
        Any::from(Array::from_vec(vec![Any::from(1i64)])),
        Any::from(List::from_iter([1i64])),
        Any::from(Function::from_packed(|_| Ok(Any::none()))),
        Any::from(String::new("small")),
        Any::from(Bytes::from(&b"small"[..])),
        Any::from(7i64),
        Any::none(),
    ]
}

#[test]
fn static_indices_match_the_runtime_values() {
    let values = samples();
    assert_eq!(StrObj::type_index(), abi::kTVMFFIStr);
    assert_eq!(StrObj::type_index(), values[0].type_index());
    assert_eq!(BytesHeapObj::type_index(), abi::kTVMFFIBytes);
    assert_eq!(BytesHeapObj::type_index(), values[1].type_index());
    assert_eq!(ArrayObj::type_index(), abi::kTVMFFIArray);
    assert_eq!(ArrayObj::type_index(), values[2].type_index());
    assert_eq!(ListObj::type_index(), abi::kTVMFFIList);
    assert_eq!(ListObj::type_index(), values[3].type_index());
}

#[test]
fn each_marker_views_exactly_its_own_objects() {
    for (i, value) in samples().iter().enumerate() {
        let index = value.type_index();
        assert_eq!(
            value.as_object::<StrObj>().is_some(),
            index == abi::kTVMFFIStr,
            "sample {i} as StrObj"
        );
        assert_eq!(
            value.as_object::<BytesHeapObj>().is_some(),
            index == abi::kTVMFFIBytes,
            "sample {i} as BytesHeapObj"
        );
        assert_eq!(
            value.as_object::<ArrayObj>().is_some(),
            index == abi::kTVMFFIArray,
            "sample {i} as ArrayObj"
        );
        assert_eq!(
            value.as_object::<ListObj>().is_some(),
            index == abi::kTVMFFIList,
            "sample {i} as ListObj"
        );
    }
}

#[test]
fn downcasts_from_the_root_type_check_the_marker() {
    for (i, value) in samples().into_iter().enumerate() {
        let Ok(root) = value.cast::<ObjectRef<Object>>() else {
            assert!(!value.is_object(), "sample {i}");
            continue;
        };
        let index = root.type_index();
        assert_eq!(
            root.clone().downcast::<StrObj>().is_ok(),
            index == abi::kTVMFFIStr,
            "sample {i}"
        );
        assert_eq!(
            root.clone().downcast::<BytesHeapObj>().is_ok(),
            index == abi::kTVMFFIBytes,
            "sample {i}"
        );
        assert_eq!(
            root.clone().downcast::<ArrayObj>().is_ok(),
            index == abi::kTVMFFIArray,
            "sample {i}"
        );
        assert_eq!(
            root.downcast::<ListObj>().is_ok(),
            index == abi::kTVMFFIList,
            "sample {i}"
        );
    }
}

#[test]
fn casts_to_the_same_sequence_type_share_the_object() {
    let array = Array::from_vec(vec![Any::from(1i64), Any::from(2i64)]);
    let back = Any::from(array.clone()).cast::<Array>().unwrap();
    assert_eq!(back.as_object().as_raw(), array.as_object().as_raw());

    let list = List::from_iter([1i64, 2]);
    let alias = Any::from(list.clone()).cast::<List>().unwrap();
    assert_eq!(alias.as_object().as_raw(), list.as_object().as_raw());
    alias.push(3i64);
    assert_eq!(list.len(), 3, "a list cast from an Any is the same list");
}

#[test]
fn casts_between_array_and_list_copy() {
    let list = List::from_iter([1i64, 2]);
    let array = Any::from(list.clone()).cast::<Array>().unwrap();
    assert_ne!(array.as_object().as_raw(), list.as_object().as_raw());
    assert_eq!(Any::from(array.clone()).type_index(), abi::kTVMFFIArray);
    list.push(3i64);
    assert_eq!(array.len(), 2, "the array is a snapshot");

    let copy = Any::from(array.clone()).cast::<List>().unwrap();
    assert_ne!(copy.as_object().as_raw(), array.as_object().as_raw());
    assert_eq!(Any::from(copy.clone()).type_index(), abi::kTVMFFIList);
    copy.push(4i64);
    assert_eq!(array.len(), 2);
}

#[test]
fn the_common_sequence_layout_reports_its_length() {
    let empty_array = Array::new();
    let array = Array::from_vec(vec![Any::from(1i64), Any::from(2i64)]);
    let one = List::from_iter([5i64]);
    // SAFETY: arrays and lists share the `SeqObj` layout; each object outlives its view.
    let (empty, full, list) = unsafe {
        (
            &*empty_array.as_object().as_raw().cast::<SeqObj>(),
            &*array.as_object().as_raw().cast::<SeqObj>(),
            &*one.as_object().as_raw().cast::<SeqObj>(),
        )
    };
    assert!(empty.is_empty());
    assert_eq!(empty.len(), 0);
    assert!(!full.is_empty());
    assert_eq!(full.len(), 2);
    assert!(!list.is_empty());
    assert_eq!(list.len(), 1);
}
