//! Targets over text and byte decoders: dtype strings, device strings, string/bytes values and
//! BigInt words, each through the safe API and the exported C function.

use std::str::FromStr;

use tvm_ffi::abi::{self, DLDataType, TVMFFIAny, TVMFFIByteArray};
use tvm_ffi::containers::hash::{any_equal, any_hash};
use tvm_ffi::dtype::{dtype_to_string, parse_dtype};
use tvm_ffi::string::bytes_of_any;
use tvm_ffi::{Any, Bytes, DataType, Device, Error};

/// Takes the error a failed C call raised; it must have raised one.
#[track_caller]
fn take_raised(call: &str) -> Error {
    Error::take_raised().unwrap_or_else(|| panic!("{call} failed without raising an error"))
}

/// `TVMFFIDataTypeFromString` on `bytes`.
fn c_parse_dtype(bytes: &[u8]) -> Result<DLDataType, Error> {
    let text = TVMFFIByteArray::from_bytes(bytes);
    let mut out = DLDataType {
        code: 0xee,
        bits: 0xee,
        lanes: 0xeeee,
    };
    // SAFETY: `text` views live bytes for the call; `out` is writable.
    let rc = unsafe { abi::TVMFFIDataTypeFromString(&text, &mut out) };
    if rc == 0 {
        Ok(out)
    } else {
        Err(take_raised("TVMFFIDataTypeFromString"))
    }
}

/// `TVMFFIDataTypeToString` of `t`, as Rust text.
fn c_print_dtype(t: DLDataType) -> String {
    let mut out = TVMFFIAny::NONE;
    // SAFETY: `t` and `out` are valid for the call; the result is an owned value.
    let rc = unsafe { abi::TVMFFIDataTypeToString(&t, &mut out) };
    assert_eq!(rc, 0, "TVMFFIDataTypeToString failed");
    // SAFETY: an owned value from the call.
    let value = unsafe { Any::from_raw(out) };
    let bytes = bytes_of_any(&value).expect("TVMFFIDataTypeToString returns a string");
    String::from_utf8(bytes.to_vec()).expect("a printed dtype is UTF-8")
}

/// Dtype strings: the parser, the `DataType` parser, the C parser and the printer agree, and
/// whatever parses prints to a string that parses back to the same value. The first four bytes
/// are also read as a raw dtype, which must print without panicking (and consistently).
pub fn dtype_parse(data: &[u8]) {
    let c_result = c_parse_dtype(data);
    match std::str::from_utf8(data) {
        Err(_) => {
            let err = c_result.expect_err("non-UTF-8 dtype text parsed");
            assert!(err.is_kind("ValueError"), "{err:?}");
        }
        Ok(text) => {
            let parsed = parse_dtype(text);
            let typed = DataType::from_str(text);
            assert_eq!(
                parsed.clone().map(DataType),
                typed,
                "DataType::from_str of {text:?}"
            );
            match (&parsed, &c_result) {
                (Ok(t), Ok(c)) => assert_eq!(t, c, "C parser of {text:?}"),
                (Err(msg), Err(err)) => {
                    assert!(err.is_kind("ValueError"), "{err:?}");
                    assert_eq!(err.message(), msg.as_str(), "C parser message of {text:?}");
                }
                _ => panic!("parsers disagree on {text:?}: {parsed:?} vs {c_result:?}"),
            }
            if let Ok(t) = parsed {
                let printed = dtype_to_string(t);
                assert_eq!(
                    parse_dtype(&printed),
                    Ok(t),
                    "{text:?} printed as {printed:?}"
                );
                assert_eq!(DataType(t).to_string(), printed);
                assert_eq!(c_print_dtype(t), printed);
                assert!(
                    !DataType(t).to_string().is_empty() || DataType(t) == DataType::void(),
                    "only void prints empty"
                );
            }
        }
    }
    // Any raw dtype prints; what it prints, if it parses, prints the same again.
    let [code, bits, l0, l1] = crate::input::Input::new(data).array::<4>();
    let raw = DLDataType {
        code,
        bits,
        lanes: u16::from_le_bytes([l0, l1]),
    };
    let printed = dtype_to_string(raw);
    assert_eq!(c_print_dtype(raw), printed);
    let _ = format!("{:?}", DataType(raw));
    if let Ok(again) = parse_dtype(&printed) {
        assert_eq!(
            dtype_to_string(again),
            printed,
            "raw {raw:?} printed {printed:?}"
        );
    }
}

/// Device strings: whatever parses prints to a string that parses back to the same device.
pub fn device_parse(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Device::from_str(text) {
        Ok(device) => {
            let printed = device.to_string();
            assert_eq!(
                Device::from_str(&printed),
                Ok(device),
                "{text:?} printed as {printed:?}"
            );
            assert!(device.device_id() >= 0, "{text:?} parsed to a negative id");
        }
        Err(msg) => assert!(msg.contains(text), "the message {msg:?} names {text:?}"),
    }
    // Every device prints, and its printed form parses back unless the id is negative.
    let mut input = crate::input::Input::new(data);
    let device = Device::new(input.u32() as i32, input.u32() as i32);
    let printed = device.to_string();
    let back = Device::from_str(&printed);
    if device.device_id() >= 0 {
        assert_eq!(back, Ok(device), "{device:?} printed as {printed:?}");
    } else {
        assert!(back.is_err(), "{printed:?} parsed with a negative id");
    }
}

/// A value from one of the byte-array constructors of the C ABI.
fn c_value(
    f: unsafe extern "C" fn(*const TVMFFIByteArray, *mut TVMFFIAny) -> i32,
    bytes: &[u8],
) -> Result<Any, Error> {
    let array = TVMFFIByteArray::from_bytes(bytes);
    let mut out = TVMFFIAny::NONE;
    // SAFETY: `array` views live bytes for the call; `out` receives an owned value.
    let rc = unsafe { f(&array, &mut out) };
    if rc == 0 {
        // SAFETY: an owned value from the call.
        Ok(unsafe { Any::from_raw(out) })
    } else {
        Err(take_raised("a byte-array constructor"))
    }
}

/// Strings and bytes from arbitrary bytes (both sides of the 7-byte inline limit): the C
/// constructors and the Rust ones make equal values with equal hashes holding the same bytes;
/// a string never equals bytes with the same content; UTF-8 decoding matches the standard one.
pub fn strings(data: &[u8]) {
    let c_str = c_value(abi::TVMFFIStringFromByteArray, data).expect("string from bytes");
    let c_bytes = c_value(abi::TVMFFIBytesFromByteArray, data).expect("bytes from bytes");
    let rust_str = tvm_ffi::String::from_bytes(data);
    let rust_bytes = Bytes::from_bytes(data);
    assert_eq!(rust_str.as_bytes(), data);
    assert_eq!(rust_bytes.as_bytes(), data);
    assert_eq!(rust_str.len(), data.len());
    assert_eq!(rust_str.is_small(), data.len() <= 7, "inline limit");
    assert_eq!(rust_bytes.is_small(), data.len() <= 7, "inline limit");
    assert_eq!(
        rust_str.to_str().ok(),
        std::str::from_utf8(data).ok(),
        "UTF-8 check"
    );
    assert_eq!(rust_str.to_string_lossy(), String::from_utf8_lossy(data));
    let small = data.len() <= 7;
    let (str_index, bytes_index) = if small {
        (abi::kTVMFFISmallStr, abi::kTVMFFISmallBytes)
    } else {
        (abi::kTVMFFIStr, abi::kTVMFFIBytes)
    };
    assert_eq!(c_str.type_index(), str_index);
    assert_eq!(c_bytes.type_index(), bytes_index);
    let rust_str_any = rust_str.clone().into_any();
    let rust_bytes_any = rust_bytes.clone().into_any();
    for (a, b) in [(&c_str, &rust_str_any), (&c_bytes, &rust_bytes_any)] {
        assert_eq!(bytes_of_any(a), Some(data));
        assert!(
            any_equal(a.as_raw(), b.as_raw()),
            "equal content, equal values"
        );
        assert_eq!(
            any_hash(a.as_raw()),
            any_hash(b.as_raw()),
            "equal values hash equal"
        );
        assert_eq!(a.clone(), *b);
    }
    assert!(
        !any_equal(c_str.as_raw(), c_bytes.as_raw()),
        "a string never equals bytes"
    );
    // Casts between the forms keep the content.
    let back: tvm_ffi::String = c_str.cast().expect("a string value casts to String");
    assert_eq!(back, rust_str);
    let back: Bytes = c_bytes.cast().expect("a bytes value casts to Bytes");
    assert_eq!(back, rust_bytes);
    if let Ok(text) = std::str::from_utf8(data) {
        let owned: String = c_str.cast().expect("UTF-8 string casts to a Rust string");
        assert_eq!(owned, text);
        assert_eq!(Any::from(text), c_str);
    }
    // Split the input in two: equal halves compare equal, different ones almost never hash
    // equal through a panic (only equality is checked).
    let mid = data.len() / 2;
    let (left, right) = data.split_at(mid);
    let l = tvm_ffi::String::from_bytes(left).into_any();
    let r = tvm_ffi::String::from_bytes(right).into_any();
    assert_eq!(left == right, any_equal(l.as_raw(), r.as_raw()));
}

/// The value of little-endian two's-complement words, sign-extended to `len` words.
fn sign_extend(words: &[i64], len: usize) -> Vec<i64> {
    let fill = if words.last().is_some_and(|w| *w < 0) {
        -1
    } else {
        0
    };
    let mut out = words.to_vec();
    out.resize(len.max(words.len()), fill);
    out
}

/// BigInt words (`TVMFFIBigIntFromByteArray`): a byte length that is not a multiple of 8 is a
/// `ValueError`; anything else makes an int (when it fits in 64 bits) or a BigInt whose words,
/// read back, are the minimal form of the same number.
pub fn bigint_bytes(data: &[u8]) {
    let result = c_value(abi::TVMFFIBigIntFromByteArray, data);
    if !data.len().is_multiple_of(8) {
        let err = result.expect_err("a ragged BigInt byte string was accepted");
        assert!(err.is_kind("ValueError"), "{err:?}");
        return;
    }
    let value = result.expect("whole words make a BigInt");
    let words: Vec<i64> = data
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    // SAFETY: `value` is a live value that outlives the view.
    let content = unsafe { abi::TVMFFIBigIntGetContentByteArray(value.as_raw()) };
    let stored: Vec<i64> = if content.size == 0 {
        Vec::new()
    } else {
        // SAFETY: the view holds `size` readable bytes while `value` lives.
        let bytes = unsafe { std::slice::from_raw_parts(content.data.cast::<u8>(), content.size) };
        assert_eq!(bytes.len() % 8, 0, "BigInt content is whole words");
        bytes
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect()
    };
    let len = words.len().max(stored.len()) + 1;
    assert_eq!(
        sign_extend(&words, len),
        sign_extend(&stored, len),
        "BigInt changed the number"
    );
    if stored.len() <= 1 {
        assert_eq!(
            value.type_index(),
            abi::kTVMFFIInt,
            "a 64-bit value is an int"
        );
        assert_eq!(
            value.cast::<i64>().ok(),
            Some(stored.first().copied().unwrap_or(0))
        );
    } else {
        assert_eq!(value.type_index(), abi::kTVMFFIBigInt);
        let top = stored[stored.len() - 1];
        let below_negative = stored[stored.len() - 2] < 0;
        // The top word is redundant when it only repeats the sign of the word below it.
        let redundant = if below_negative { top == -1 } else { top == 0 };
        assert!(!redundant, "BigInt words are not minimal: {stored:?}");
        // A second reference and its release keep the object alive and balanced.
        let copy = value.clone();
        assert_eq!(copy.type_index(), abi::kTVMFFIBigInt);
    }
}
