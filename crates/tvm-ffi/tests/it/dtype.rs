//! The dtype parser accepts only the bit counts each named type family has.

use tvm_ffi::DataType;
use tvm_ffi::abi::{kDLBfloat, kDLBool, kDLComplex, kDLFloat, kDLOpaqueHandle};
use tvm_ffi::dtype::{parse_dtype, parse_dtype_bytes};

/// Each family with the bit counts it has and some that it does not.
const FAMILIES: [(&str, u8, &[u8], &[u8]); 5] = [
    ("float", kDLFloat, &[16, 32, 64], &[8, 24, 128]),
    ("bfloat", kDLBfloat, &[16], &[8, 32]),
    ("complex", kDLComplex, &[64, 128], &[32, 16]),
    ("bool", kDLBool, &[1, 8], &[2, 16]),
    ("handle", kDLOpaqueHandle, &[32, 64], &[8, 16]),
];

#[test]
fn named_families_accept_their_own_bit_counts() {
    for (name, code, valid, _) in FAMILIES {
        for bits in valid {
            let input = format!("{name}{bits}");
            let t = parse_dtype(&input).unwrap_or_else(|e| panic!("`{input}`: {e}"));
            assert_eq!((t.code, t.bits, t.lanes), (code, *bits, 1), "`{input}`");
        }
    }
}

#[test]
fn named_families_reject_other_bit_counts() {
    for (name, _, valid, invalid) in FAMILIES {
        let listed = valid
            .iter()
            .map(u8::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        for bits in invalid {
            let input = format!("{name}{bits}");
            let err = parse_dtype(&input).expect_err(&input);
            assert_eq!(
                err,
                format!("invalid bits in `{input}`: this type has {listed}"),
                "`{input}`"
            );
            // With lanes too, and through `DataType`.
            let with_lanes = format!("{input}x4");
            assert!(with_lanes.parse::<DataType>().is_err(), "`{with_lanes}`");
        }
    }
}

#[test]
fn short_float_aliases_are_checked_like_the_full_names() {
    assert_eq!("f16".parse::<DataType>().unwrap(), DataType::float(16));
    assert_eq!("bf16".parse::<DataType>().unwrap(), DataType::bfloat16());
    assert!("f8".parse::<DataType>().is_err());
    assert!("bf32".parse::<DataType>().is_err());
}

#[test]
fn short_names_of_the_small_float_formats_parse_as_the_full_names() {
    for (short, full) in [
        ("f8_e4m3fn", "float8_e4m3fn"),
        ("f8_e5m2fnuz", "float8_e5m2fnuz"),
        ("f6_e2m3fn", "float6_e2m3fn"),
        ("f4_e2m1fn", "float4_e2m1fn"),
        ("fp8_e8m0fnu", "float8_e8m0fnu"),
        ("f8_e4m3fnx4", "float8_e4m3fnx4"),
        ("f4_e2m1fn_x2", "float4_e2m1fnx2"),
        ("fp4_e2m1fn_x2", "float4_e2m1fnx2"),
        ("float4_e2m1fn_x2", "float4_e2m1fnx2"),
    ] {
        let expected = parse_dtype(full).unwrap_or_else(|e| panic!("`{full}`: {e}"));
        let got = parse_dtype(short).unwrap_or_else(|e| panic!("`{short}`: {e}"));
        assert_eq!(
            (got.code, got.bits, got.lanes),
            (expected.code, expected.bits, expected.lanes),
            "`{short}`"
        );
    }
    // The underscore before the lanes belongs to the named formats only.
    assert!(parse_dtype("float32_x4").is_err());
    assert!(parse_dtype("f8_e9m9").is_err());
}

#[test]
fn bytes_parse_like_text() {
    for input in [
        "float32",
        "int8x4",
        "float0016",
        "int64xvscalex4",
        "bool",
        "handle32",
        "",
    ] {
        let text = parse_dtype(input).unwrap_or_else(|e| panic!("`{input}`: {e}"));
        let bytes = parse_dtype_bytes(input.as_bytes()).unwrap();
        assert_eq!(
            (text.code, text.bits, text.lanes),
            (bytes.code, bytes.bits, bytes.lanes)
        );
    }
    // Bit and lane counts too large for u32 are rejected, not wrapped.
    assert!(parse_dtype("float4294967328").is_err());
    assert!(parse_dtype("float32x4294967297").is_err());
    assert!(parse_dtype("float32x+4").is_err());
    // Bytes that are not UTF-8 never parse; the message shows them lossily.
    let err = parse_dtype_bytes(b"float\xff").unwrap_err();
    assert_eq!(err, "Unknown data type `float\u{fffd}`");
}
