//! `Any`/`AnyView` conversions and ownership.

use proptest::prelude::*;
use tvm_ffi::abi;
use tvm_ffi::{Any, AnyView, DataType, Device, ErrorKind, Function, String};

#[test]
fn pod_values_have_canonical_encodings() {
    let none = Any::none();
    assert_eq!(none.type_index(), abi::kTVMFFINone);
    let b = Any::from(true);
    assert_eq!(b.type_index(), abi::kTVMFFIBool);
    // SAFETY: bools store `v_int64`.
    assert_eq!(unsafe { b.as_raw().payload.v_int64 }, 1);
    let dtype = Any::from(DataType::float(32));
    // SAFETY: reading the whole payload of a plain value.
    let value = unsafe { dtype.as_raw().payload.v_uint64 };
    assert_eq!(value >> 32, 0, "dtype padding must be zero");
    let device = Any::from(Device::cuda(3));
    assert_eq!(device.cast::<Device>().unwrap(), Device::cuda(3));
}

#[test]
fn int_float_bool_conversions_follow_the_typed_rules() {
    assert_eq!(Any::from(7i64).cast::<f64>().unwrap(), 7.0);
    assert!(Any::from(1i64).cast::<bool>().unwrap());
    assert_eq!(Any::from(true).cast::<i64>().unwrap(), 1);
    assert!(Any::from(2.5f64).try_as::<i64>().is_none());
    assert!(Any::from(300i64).try_as::<u8>().is_none());
    let err = Any::from("text").cast::<i64>().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TypeError.as_str());
    assert!(
        err.message().contains("`ffi.String`") && err.message().contains("int"),
        "{err}"
    );
}

#[test]
fn dtype_accepts_strings() {
    assert_eq!(
        Any::from("float16").cast::<DataType>().unwrap(),
        DataType::float(16)
    );
    assert!(Any::from("flaot32").try_as::<DataType>().is_none());
}

#[test]
fn raw_c_strings_become_owned_strings() {
    let text = c"a raw C string longer than seven bytes";
    let raw = abi::TVMFFIAny {
        type_index: abi::kTVMFFIRawStr,
        small_str_len: 0,
        payload: abi::TVMFFIAnyPayload {
            v_c_str: text.as_ptr(),
        },
    };
    // SAFETY: the C string outlives the view.
    let view = unsafe { AnyView::from_raw(raw) };
    let owned = view.to_owned();
    assert_eq!(owned.type_index(), abi::kTVMFFIStr);
    assert_eq!(
        owned.cast::<String>().unwrap(),
        "a raw C string longer than seven bytes"
    );
}

#[test]
fn rvalue_refs_move_once() {
    let original = Any::from(Function::from_packed(|_| Ok(Any::none())));
    // SAFETY: an object value keeps its pointer in the payload; the slot owns this reference.
    let mut ptr = unsafe { original.clone().into_raw().payload.v_obj };
    let raw = abi::TVMFFIAny {
        type_index: abi::kTVMFFIObjectRValueRef,
        small_str_len: 0,
        payload: abi::TVMFFIAnyPayload {
            v_ptr: (&mut ptr as *mut *mut abi::TVMFFIObject).cast(),
        },
    };
    // SAFETY: the slot outlives the view.
    let view = unsafe { AnyView::from_raw(raw) };
    let moved = view.try_to_owned().unwrap();
    assert_eq!(moved.type_index(), abi::kTVMFFIFunction);
    assert!(ptr.is_null());
    let err = view.try_to_owned().unwrap_err();
    assert!(err.message().contains("already moved"), "{err}");
    let obj = original.as_object_ptr().unwrap();
    // SAFETY: the header is live; `original` and `moved` hold one reference each.
    let value = unsafe { (*obj.cast::<tvm_ffi::Object>()).strong_count() };
    assert_eq!(value, 2);
    drop(moved);
}

proptest! {
    #[test]
    fn ints_round_trip(v in any::<i64>()) {
        prop_assert_eq!(Any::from(v).cast::<i64>().unwrap(), v);
    }

    #[test]
    fn floats_round_trip_bit_exactly(v in any::<f64>()) {
        prop_assert_eq!(Any::from(v).cast::<f64>().unwrap().to_bits(), v.to_bits());
    }

    #[test]
    fn strings_round_trip(s in ".{0,40}") {
        let any = Any::from(s.as_str());
        let expected = if s.len() <= 7 { abi::kTVMFFISmallStr } else { abi::kTVMFFIStr };
        prop_assert_eq!(any.type_index(), expected);
        prop_assert_eq!(any.cast::<std::string::String>().unwrap(), s);
    }
}
