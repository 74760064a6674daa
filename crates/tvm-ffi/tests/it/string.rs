//! Small and heap strings and bytes.

use proptest::prelude::*;
use tvm_ffi::abi;
use tvm_ffi::{Any, Bytes, String};

#[test]
fn small_strings_are_inline_with_zero_tail() {
    let s = String::new("hello");
    assert!(s.is_small());
    let raw = *Any::from(s).as_raw();
    assert_eq!(raw.type_index, abi::kTVMFFISmallStr);
    assert_eq!(raw.small_str_len, 5);
    // SAFETY: small strings keep their bytes in the payload.
    assert_eq!(unsafe { raw.payload.v_bytes }, *b"hello\0\0\0");
}

#[test]
fn seven_bytes_inline_eight_bytes_on_the_heap() {
    assert!(String::new("1234567").is_small());
    let heap = String::new("12345678");
    assert!(!heap.is_small());
    let any = Any::from(heap.clone());
    assert_eq!(any.type_index(), abi::kTVMFFIStr);
    let obj = any.as_object_ptr().unwrap();
    // SAFETY: a heap string: header, then a byte array, then the content and a NUL.
    unsafe {
        let cell = &*obj.cast::<u8>().add(24).cast::<abi::TVMFFIByteArray>();
        assert_eq!(cell.size, 8);
        assert_eq!(cell.data, obj.cast::<u8>().add(40).cast());
        assert_eq!(*cell.data.add(8), 0, "heap strings end with a NUL");
    }
}

#[test]
fn bytes_are_distinct_from_strings() {
    let b = Bytes::from(&b"\x00\xffbin"[..]);
    assert_eq!(Any::from(b.clone()).type_index(), abi::kTVMFFISmallBytes);
    assert!(Any::from(b).try_as::<String>().is_none());
    let long = Bytes::from(vec![7u8; 100]);
    assert_eq!(Any::from(long.clone()).type_index(), abi::kTVMFFIBytes);
    assert_eq!(long.len(), 100);
}

#[test]
fn non_utf8_strings_report_the_content() {
    let s = String::from_bytes(b"ab\xffcd");
    let err = s.to_str().unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    assert!(err.message().contains("ab"), "{err}");
}

#[test]
fn string_from_byte_array_through_c() {
    let mut out = abi::TVMFFIAny::NONE;
    let text = b"through the C API";
    let array = abi::TVMFFIByteArray {
        data: text.as_ptr().cast(),
        size: text.len(),
    };
    // SAFETY: valid pointers; the result is an owned value.
    let value = unsafe { abi::TVMFFIStringFromByteArray(&array, &mut out) };
    assert_eq!(value, 0);
    // SAFETY: the output is an owned value.
    let any = unsafe { Any::from_raw(out) };
    assert_eq!(any.cast::<String>().unwrap(), "through the C API");
}

proptest! {
    #[test]
    fn bytes_round_trip_at_every_length(v in proptest::collection::vec(any::<u8>(), 0..24)) {
        let b = Bytes::from(v.clone());
        prop_assert_eq!(b.is_small(), v.len() <= 7);
        let back = Any::from(b).cast::<Bytes>().unwrap();
        prop_assert_eq!(back.as_bytes(), &v[..]);
    }
}

#[test]
fn small_strings_of_every_length_keep_their_bytes_and_a_zero_tail() {
    let text = b"abcdefg";
    for len in 0..=7 {
        let s = String::from_bytes(&text[..len]);
        assert!(s.is_small());
        let raw = *Any::from(s.clone()).as_raw();
        assert_eq!(raw.small_str_len as usize, len);
        let mut expected = [0u8; 8];
        expected[..len].copy_from_slice(&text[..len]);
        // SAFETY: small strings keep their bytes in the payload.
        assert_eq!(unsafe { raw.payload.v_bytes }, expected, "length {len}");
        assert_eq!(s.as_bytes(), &text[..len]);
    }
}

#[test]
fn a_string_that_is_not_utf8_is_named_where_text_is_expected() {
    let bad: tvm_ffi::Any = tvm_ffi::String::from_bytes(b"/tmp/lib\xff.so").into();
    let f =
        tvm_ffi::Function::from_typed("test.TakesText", |s: std::string::String| s.len() as i64);
    let err = f.call_packed(&[bad.as_view()]).unwrap_err();
    assert_eq!(err.kind(), "ValueError", "{err}");
    let message = err.message();
    assert!(
        message.contains("Argument #0 when calling `test.TakesText(0: ffi.String) -> int`"),
        "{message}"
    );
    assert!(message.contains(r#"b"/tmp/lib\xff.so""#), "{message}");
    assert!(
        message.contains("byte 0xff at offset 8 is not valid UTF-8"),
        "{message}"
    );
    let err = bad.cast::<std::string::String>().unwrap_err();
    assert_eq!(err.kind(), "ValueError", "{err}");
    assert!(
        err.message()
            .starts_with("Cannot convert: expected `ffi.String` as valid UTF-8"),
        "{err}"
    );
    // Other values, and other targets, keep the type error.
    assert_eq!(bad.cast::<i64>().unwrap_err().kind(), "TypeError");
    assert_eq!(
        f.call_packed(&[tvm_ffi::Any::from(1).as_view()])
            .unwrap_err()
            .kind(),
        "TypeError"
    );
}
