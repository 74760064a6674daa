//! `__ffi_convert__` of the core types: registered at load, converting by the typed layer's
//! rules, failing with a TypeError that names both types.

use tvm_ffi::abi;
use tvm_ffi::containers::map::{Dict, Map, MapRead};
use tvm_ffi::extra::dataclass::type_attr;
use tvm_ffi::{Any, Array, Error, Function, List, Shape, Tensor};

fn converter(type_index: i32) -> Function {
    // Any use of the registry makes sure the core's entries are in place.
    let _ = Function::get_global("ffi.Array");
    type_attr(type_index, "__ffi_convert__")
        .unwrap_or_else(|| panic!("no __ffi_convert__ for type index {type_index}"))
        .cast::<Function>()
        .expect("a function")
}

fn convert(type_index: i32, value: impl Into<Any>) -> Result<Any, Error> {
    converter(type_index).call((value.into(),))
}

fn ints(values: &[i64]) -> Vec<Any> {
    values.iter().map(|&v| Any::from(v)).collect()
}

#[test]
fn every_core_object_type_has_a_converter() {
    for index in [
        abi::kTVMFFIObject,
        abi::kTVMFFIStr,
        abi::kTVMFFIBytes,
        abi::kTVMFFIError,
        abi::kTVMFFIFunction,
        abi::kTVMFFIShape,
        abi::kTVMFFITensor,
        abi::kTVMFFIArray,
        abi::kTVMFFIMap,
        abi::kTVMFFIList,
        abi::kTVMFFIDict,
    ] {
        converter(index);
    }
    // Types apache-tvm-ffi leaves without one.
    let _ = Function::get_global("ffi.Array");
    assert!(type_attr(abi::kTVMFFIModule, "__ffi_convert__").is_none());
}

#[test]
fn shape_from_arrays_and_lists_of_ints() {
    let from_array = convert(abi::kTVMFFIShape, Array::from_vec(ints(&[1, 2, 3]))).unwrap();
    assert_eq!(from_array.type_index(), abi::kTVMFFIShape);
    assert_eq!(&*from_array.cast::<Shape>().unwrap(), &[1, 2, 3]);

    let list: List = ints(&[4, 5]).into_iter().collect();
    let from_list = convert(abi::kTVMFFIShape, list).unwrap();
    assert_eq!(&*from_list.cast::<Shape>().unwrap(), &[4, 5]);

    let empty = convert(abi::kTVMFFIShape, Array::from_vec(Vec::new())).unwrap();
    assert!(empty.cast::<Shape>().unwrap().is_empty());

    // A shape is returned as it is.
    let shape = Shape::new(&[7]);
    let same = convert(abi::kTVMFFIShape, shape.clone()).unwrap();
    assert_eq!(same.cast::<Shape>().unwrap(), shape);
}

#[test]
fn shape_rejects_what_is_not_a_sequence_of_ints() {
    let mixed = Array::from_vec(vec![Any::from(1i64), Any::from("x")]);
    let err = convert(abi::kTVMFFIShape, mixed).unwrap_err();
    assert_eq!(err.kind(), "TypeError");
    assert_eq!(err.message(), "Cannot cast from `ffi.Array` to `ffi.Shape`");

    let err = convert(abi::kTVMFFIShape, 3i64).unwrap_err();
    assert_eq!(err.message(), "Cannot cast from `int` to `ffi.Shape`");
    let floats = Array::from_vec(vec![Any::from(1.5f64)]);
    let err = convert(abi::kTVMFFIShape, floats).unwrap_err();
    assert_eq!(err.message(), "Cannot cast from `ffi.Array` to `ffi.Shape`");
}

#[test]
fn sequences_and_maps_convert_between_their_kinds() {
    let list: List = ints(&[1, 2]).into_iter().collect();
    let array = convert(abi::kTVMFFIArray, list.clone()).unwrap();
    assert_eq!(array.type_index(), abi::kTVMFFIArray);
    assert_eq!(array.cast::<Array>().unwrap().len(), 2);
    let back = convert(abi::kTVMFFIList, array).unwrap();
    assert_eq!(back.type_index(), abi::kTVMFFIList);

    let dict = Dict::new();
    dict.insert("k", 1i64);
    let map = convert(abi::kTVMFFIMap, dict).unwrap();
    assert_eq!(map.type_index(), abi::kTVMFFIMap);
    assert_eq!(map.cast::<Map>().unwrap().len(), 1);
    let dict = convert(abi::kTVMFFIDict, map).unwrap();
    assert_eq!(dict.type_index(), abi::kTVMFFIDict);

    let err = convert(abi::kTVMFFIMap, list).unwrap_err();
    assert_eq!(err.message(), "Cannot cast from `ffi.List` to `ffi.Map`");
}

#[test]
fn strings_objects_and_the_rest() {
    let text = "a string of more than seven bytes";
    let string = convert(abi::kTVMFFIStr, text).unwrap();
    assert_eq!(string.type_index(), abi::kTVMFFIStr);
    assert_eq!(string.cast::<std::string::String>().unwrap(), text);
    let err = convert(abi::kTVMFFIStr, 1i64).unwrap_err();
    assert_eq!(err.message(), "Cannot cast from `int` to `ffi.String`");
    let bytes = convert(abi::kTVMFFIBytes, tvm_ffi::Bytes::from(&b"raw bytes!"[..])).unwrap();
    assert_eq!(bytes.type_index(), abi::kTVMFFIBytes);

    // ffi.Object takes any object, or None; nothing else.
    let array = Array::from_vec(ints(&[1]));
    let object = convert(abi::kTVMFFIObject, array.clone()).unwrap();
    assert_eq!(object.type_index(), abi::kTVMFFIArray);
    assert!(convert(abi::kTVMFFIObject, ()).unwrap().is_none());
    let err = convert(abi::kTVMFFIObject, 2.5f64).unwrap_err();
    assert_eq!(err.message(), "Cannot cast from `float` to `ffi.Object`");

    let tensor = Tensor::from_slice(&[1.0f32], &[1]).unwrap();
    assert_eq!(
        convert(abi::kTVMFFITensor, tensor).unwrap().type_index(),
        abi::kTVMFFITensor
    );
    let err = convert(abi::kTVMFFITensor, array.clone()).unwrap_err();
    assert_eq!(
        err.message(),
        "Cannot cast from `ffi.Array` to `ffi.Tensor`"
    );
    let err = convert(abi::kTVMFFIFunction, array).unwrap_err();
    assert_eq!(
        err.message(),
        "Cannot cast from `ffi.Array` to `ffi.Function`"
    );
    let err = convert(abi::kTVMFFIError, "x").unwrap_err();
    assert_eq!(
        err.message(),
        "Cannot cast from `ffi.SmallStr` to `ffi.Error`"
    );

    // One argument exactly.
    let err = converter(abi::kTVMFFIShape).call(()).unwrap_err();
    assert_eq!(err.kind(), "TypeError");
    assert_eq!(
        err.message(),
        "__ffi_convert__ of `ffi.Shape` takes 1 argument, got 0"
    );
}
