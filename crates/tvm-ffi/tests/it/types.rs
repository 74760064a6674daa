//! The type table through the C API: keys, indices, allocation and bad input.

use tvm_ffi::abi::{self, TVMFFIByteArray};
use tvm_ffi::{Error, ErrorKind, types};

fn key(s: &str) -> TVMFFIByteArray {
    TVMFFIByteArray {
        data: s.as_ptr().cast(),
        size: s.len(),
    }
}

#[test]
fn builtin_types_are_registered() {
    for (name, index) in [
        ("None", 0),
        ("int", 1),
        ("ffi.Object", 64),
        ("ffi.String", 65),
        ("ffi.Dict", 76),
    ] {
        assert_eq!(types::type_key_to_index(name).unwrap(), index, "{name}");
    }
    let info = types::type_info(abi::kTVMFFIArray).unwrap();
    assert_eq!(info.type_depth, 1);
    // SAFETY: depth-1 types have one ancestor.
    let parent = unsafe { &**info.type_ancestors };
    assert_eq!(parent.type_index, abi::kTVMFFIObject);
}

#[test]
fn unknown_keys_and_indices_are_errors_not_exits() {
    let err = types::type_key_to_index("no.such.Type").unwrap_err();
    assert_eq!(err.kind(), "KeyError");
    assert!(err.message().contains("no.such.Type"), "{err}");
    // SAFETY: any index may be queried.
    assert!(unsafe { abi::TVMFFIGetTypeInfo(100_000) }.is_null());
    let err = Error::take_raised().unwrap();
    assert_eq!(err.kind(), "KeyError");
    assert!(err.message().contains("100000"), "{err}");
}

#[test]
fn child_slots_are_reserved_for_subtypes() {
    // SAFETY: valid arrays; plain integer arguments.
    unsafe {
        let parent = abi::TVMFFITypeGetOrAllocIndex(&key("slots.Parent"), -1, 1, 4, 1, 64);
        assert!(parent >= abi::kTVMFFIDynObjectBegin);
        let child = abi::TVMFFITypeGetOrAllocIndex(&key("slots.Child"), -1, 2, 0, 1, parent);
        assert_eq!(
            child,
            parent + 1,
            "children take the parent's reserved range"
        );
        assert_eq!(
            abi::TVMFFITypeGetOrAllocIndex(&key("slots.Parent"), -1, 1, 4, 1, 64),
            parent
        );
        assert_eq!(
            abi::TVMFFITypeGetOrAllocIndex(&key("slots.Missing"), -1, 1, 0, 1, -2),
            -2
        );
        assert_eq!(
            abi::TVMFFITypeGetOrAllocIndex(&key("slots.BadDepth"), -1, 5, 0, 1, 64),
            -1
        );
        let err = Error::take_raised().unwrap();
        assert!(err.message().contains("slots.BadDepth"), "{err}");
    }
}

#[test]
fn huge_slot_counts_and_static_indices_are_errors_not_aliases() {
    // SAFETY: valid arrays; plain integer arguments.
    unsafe {
        for slots in [i32::MAX, i32::MAX - 1, 1 << 30] {
            let index = abi::TVMFFITypeGetOrAllocIndex(&key("huge.Slots"), -1, 1, slots, 1, 64);
            assert_eq!(index, -1, "num_child_slots {slots} must not wrap around");
            let err = Error::take_raised().unwrap();
            assert!(err.is_kind(ErrorKind::ValueError), "{err}");
            assert!(err.message().contains(&slots.to_string()), "{err}");
        }
        for index in [1 << 30, abi::kTVMFFIDynObjectBegin, i32::MAX] {
            let got = abi::TVMFFITypeGetOrAllocIndex(&key("huge.Static"), index, 1, 0, 1, 64);
            assert_eq!(
                got, -1,
                "static index {index} must be refused, not allocated"
            );
            let err = Error::take_raised().unwrap();
            assert!(err.message().contains("static range"), "{err}");
        }
        // Registration still works afterwards, at a fresh index.
        let after = abi::TVMFFITypeGetOrAllocIndex(&key("huge.After"), -1, 1, 0, 1, 64);
        assert!(after >= abi::kTVMFFIDynObjectBegin, "{after}");
        let mut found = 0;
        assert_eq!(abi::TVMFFITypeKeyToIndex(&key("ffi.String"), &mut found), 0);
        assert_ne!(after, found);
    }
}

#[test]
fn non_utf8_type_keys_are_not_found() {
    // The header: -1 with a KeyError naming the key when it is not registered; a key that is not
    // UTF-8 names no type.
    let bad = b"bad\xffkey";
    let array = TVMFFIByteArray {
        data: bad.as_ptr().cast(),
        size: bad.len(),
    };
    let mut out = 0;
    // SAFETY: valid pointers.
    assert_eq!(unsafe { abi::TVMFFITypeKeyToIndex(&array, &mut out) }, -1);
    let err = Error::take_raised().unwrap();
    assert_eq!(err.kind(), "KeyError");
    assert!(err.message().contains("bad"), "{err}");
}

#[test]
fn null_out_pointers_are_rejected() {
    // SAFETY: NULL outputs must be reported, not written.
    let value = unsafe { abi::TVMFFITypeKeyToIndex(&key("int"), std::ptr::null_mut()) };
    assert_eq!(value, -1);
    assert!(Error::take_raised().unwrap().message().contains("NULL"));
}

#[test]
fn attribute_columns_exist_from_the_start() {
    for name in ["__any_hash__", "__any_equal__"] {
        // SAFETY: a valid array.
        let value = unsafe { abi::TVMFFIGetTypeAttrColumn(&key(name)) };
        assert!(!value.is_null(), "{name}");
    }
    // SAFETY: as above.
    assert!(unsafe { abi::TVMFFIGetTypeAttrColumn(&key("__never_created__")) }.is_null());
}

#[test]
fn dtype_text_through_c() {
    let mut dtype = abi::DLDataType::default();
    // SAFETY: valid pointers.
    let value = unsafe { abi::TVMFFIDataTypeFromString(&key("float32x4"), &mut dtype) };
    assert_eq!(value, 0);
    assert_eq!((dtype.code, dtype.bits, dtype.lanes), (2, 32, 4));
    // SAFETY: valid pointers.
    let value = unsafe { abi::TVMFFIDataTypeFromString(&key("flaot32"), &mut dtype) };
    assert_eq!(value, -1);
    let err = Error::take_raised().unwrap();
    assert_eq!(err.kind(), "ValueError");
    assert!(err.message().contains("flaot32"), "{err}");
}

#[test]
fn dtype_text_that_is_not_utf8_is_named_as_such() {
    let bytes = b"float\xff32";
    let text = TVMFFIByteArray {
        data: bytes.as_ptr().cast(),
        size: bytes.len(),
    };
    let mut dtype = abi::DLDataType::default();
    // SAFETY: valid pointers.
    let value = unsafe { abi::TVMFFIDataTypeFromString(&text, &mut dtype) };
    assert_eq!(value, -1);
    let err = Error::take_raised().unwrap();
    assert_eq!(err.kind(), "ValueError");
    assert!(err.message().contains("not UTF-8"), "{err}");
    // A bad name that is UTF-8 keeps the parser's message.
    // SAFETY: valid pointers.
    let value = unsafe { abi::TVMFFIDataTypeFromString(&key("int65"), &mut dtype) };
    assert_eq!(value, -1);
    let err = Error::take_raised().unwrap();
    assert_eq!(
        err.message(),
        "invalid bits in `int65`: integers have at most 64"
    );
}

#[test]
fn version_matches_the_header_macros() {
    let mut v = abi::TVMFFIVersion::default();
    // SAFETY: a valid output.
    unsafe { abi::TVMFFIGetVersion(&mut v) };
    assert_eq!((v.major, v.minor, v.patch), (0, 1, 16));
}

#[test]
fn start_up_columns_and_core_sizes_exist() {
    // apache-tvm-ffi's headers assume these columns exist once the library is loaded.
    for name in [
        "__ffi_enum__",
        "__s_visit__",
        "__s_mutate__",
        "__s_maybe_inplace_mutate__",
        "__ffi_init__",
        "__ffi_new__",
    ] {
        let key = tvm_ffi::abi::TVMFFIByteArray::from_text(name);
        // SAFETY: `key` views `name` for the call.
        let column = unsafe { tvm_ffi::abi::TVMFFIGetTypeAttrColumn(&key) };
        assert!(!column.is_null(), "{name}");
    }
    for (index, size) in [
        (tvm_ffi::abi::kTVMFFIObject, 24),
        (tvm_ffi::abi::kTVMFFIBigInt, 32),
    ] {
        let info = tvm_ffi::types::type_info(index).unwrap();
        // SAFETY: metadata lives in the type table for the process.
        let metadata = unsafe { info.metadata.as_ref() }.expect("metadata");
        assert_eq!(metadata.total_size, size);
        assert!(metadata.creator.is_none());
    }
}
