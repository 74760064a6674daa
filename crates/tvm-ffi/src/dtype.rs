//! Data types ([`DLDataType`]): the dtype string grammar and the [`DataType`] wrapper.
//!
//! A dtype string is `name[bits][xlanes]`, for example `float32`, `int8x4`, `bfloat16` or
//! `int64xvscalex4` (a scalable vector). Fixed-width float families such as `float8_e4m3fn` take
//! no bit count. `void` and the empty string both denote `(kDLOpaqueHandle, 0, 0)`.

use std::fmt::{self, Write as _};
use std::str::FromStr;

use crate::abi::{
    self, DLDataType, kDLBfloat, kDLBool, kDLComplex, kDLFloat, kDLInt, kDLOpaqueHandle, kDLUInt,
};

/// The dtype of `void` (and of the empty string): `(kDLOpaqueHandle, 0, 0)`.
const VOID: DLDataType = DLDataType {
    code: kDLOpaqueHandle,
    bits: 0,
    lanes: 0,
};

/// The fixed-width float families: (type code, bits, canonical name).
const FIXED_FLOATS: [(u8, u8, &str); 11] = [
    (abi::kDLFloat8_e3m4, 8, "float8_e3m4"),
    (abi::kDLFloat8_e4m3, 8, "float8_e4m3"),
    (abi::kDLFloat8_e4m3b11fnuz, 8, "float8_e4m3b11fnuz"),
    (abi::kDLFloat8_e4m3fn, 8, "float8_e4m3fn"),
    (abi::kDLFloat8_e4m3fnuz, 8, "float8_e4m3fnuz"),
    (abi::kDLFloat8_e5m2, 8, "float8_e5m2"),
    (abi::kDLFloat8_e5m2fnuz, 8, "float8_e5m2fnuz"),
    (abi::kDLFloat8_e8m0fnu, 8, "float8_e8m0fnu"),
    (abi::kDLFloat6_e2m3fn, 6, "float6_e2m3fn"),
    (abi::kDLFloat6_e3m2fn, 6, "float6_e3m2fn"),
    (abi::kDLFloat4_e2m1fn, 4, "float4_e2m1fn"),
];

/// The families printed as name followed by the bit count: (type code, name).
const SIZED_NAMES: [(u8, &str); 5] = [
    (kDLInt, "int"),
    (kDLUInt, "uint"),
    (kDLFloat, "float"),
    (kDLBfloat, "bfloat"),
    (kDLComplex, "complex"),
];

/// Prefix of a scalable lane count (`int64xvscalex4`), after the first `x`.
const VSCALE_PREFIX: &str = "vscalex";

/// Parses a dtype string such as `float32`, `i8`, `bf16`, `float16x4`, `fp8_e4m3fn`, `handle`,
/// `int64xvscalex4` or `void`.
///
/// Bits default to 32 for `int`/`uint`/`float`, 16 for `bfloat`, 64 for `complex` and `handle`,
/// 8 for `bool` (an explicit count such as `bool1` or `handle32` is accepted too); the short
/// aliases `iN`, `uN`, `fN` and `bfN` require a bit count. Lanes default
/// to 1 and must be in `1..=65535` (`1..=32768` for scalable vectors, stored as the negated count
/// in 16 bits). `custom[name]` types are rejected because resolving their names needs global
/// functions that the core does not provide. The error message names the whole input.
pub fn parse_dtype(s: &str) -> Result<DLDataType, String> {
    parse_dtype_bytes(s.as_bytes())
}

/// [`parse_dtype`] of raw bytes: every accepted string is ASCII, so bytes that are not UTF-8
/// always fail (the message shows them lossily).
pub fn parse_dtype_bytes(s: &[u8]) -> Result<DLDataType, String> {
    if s.is_empty() || s == b"void" {
        return Ok(VOID);
    }
    if s.starts_with(b"custom[") {
        return Err(format!(
            "custom data type `{}` is not supported: resolving custom type names needs the \
             `dtype.get_custom_type_code` global function",
            shown(s)
        ));
    }
    // Only `complex` contains an `x`; after the name, the first `x` starts the lane suffix.
    let name_skip = if s.starts_with(b"complex") {
        b"complex".len()
    } else {
        0
    };
    let (head, lanes_spec) = match s[name_skip..].iter().position(|&b| b == b'x') {
        // `float4_e2m1fn_x2`: the lane suffix of a named float may follow an underscore.
        Some(at) => {
            let head = &s[..name_skip + at];
            let head = match head.strip_suffix(b"_") {
                Some(trimmed) if trimmed.contains(&b'_') => trimmed,
                _ => head,
            };
            (head, Some(&s[name_skip + at + 1..]))
        }
        None => (s, None),
    };
    let (code, bits) = parse_name_and_bits(head, s)?;
    let lanes = match lanes_spec {
        None => 1,
        Some(spec) => {
            parse_lanes(spec).ok_or_else(|| format!("invalid lanes in `{}`", shown(s)))?
        }
    };
    Ok(DLDataType { code, bits, lanes })
}

/// The input as text for an error message.
fn shown(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// The fixed-width float family `head` names, if any: `float8_e4m3fn` or its aliases with
/// `fp`/`f` for `float` (`fp8_e4m3fn`, `f8_e4m3fn`).
fn fixed_float(head: &[u8]) -> Option<(u8, u8)> {
    let rest = head
        .strip_prefix(b"float")
        .or_else(|| head.strip_prefix(b"fp"))
        .or_else(|| head.strip_prefix(b"f"))?;
    // Every family is `float` + one digit + `_` + the format: a cheap test rejects `float32`.
    if rest.get(1) != Some(&b'_') {
        return None;
    }
    FIXED_FLOATS
        .iter()
        .find(|(_, _, name)| &name.as_bytes()[b"float".len()..] == rest)
        .map(|&(code, bits, _)| (code, bits))
}

/// A run of ASCII digits as a `u32`, like `str::parse` (leading zeros allowed); `None` when
/// empty or too large.
fn parse_digits(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u32, |n, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(u32::from(b - b'0'))
    })
}

/// Parses the part before the lane suffix into (code, bits); `whole` is used for messages.
fn parse_name_and_bits(head: &[u8], whole: &[u8]) -> Result<(u8, u8), String> {
    if let Some(found) = fixed_float(head) {
        return Ok(found);
    }
    let name_len = head
        .iter()
        .rposition(|b| !b.is_ascii_digit())
        .map_or(0, |last| last + 1);
    let (name, digits) = head.split_at(name_len);
    // (code, default bits or None when a bit count is required)
    let (code, default_bits) = match name {
        b"float" => (kDLFloat, Some(32)),
        b"int" => (kDLInt, Some(32)),
        b"uint" => (kDLUInt, Some(32)),
        b"bfloat" => (kDLBfloat, Some(16)),
        b"complex" => (kDLComplex, Some(64)),
        b"handle" => (kDLOpaqueHandle, Some(64)),
        b"bool" => (kDLBool, Some(8)),
        b"i" => (kDLInt, None),
        b"u" => (kDLUInt, None),
        b"f" => (kDLFloat, None),
        b"bf" => (kDLBfloat, None),
        _ => return Err(format!("Unknown data type `{}`", shown(whole))),
    };
    if digits.is_empty() {
        return default_bits
            .map(|bits| (code, bits))
            .ok_or_else(|| format!("Unknown data type `{}`", shown(whole)));
    }
    let bits = parse_digits(digits).filter(|b| (1..=255).contains(b));
    let Some(bits) = bits else {
        return Err(format!(
            "invalid bits in `{}`: must be in 1..=255",
            shown(whole)
        ));
    };
    let allowed: &[u32] = match code {
        kDLFloat => &[16, 32, 64],
        kDLBfloat => &[16],
        kDLComplex => &[64, 128],
        kDLBool => &[1, 8],
        kDLOpaqueHandle => &[32, 64],
        _ => &[],
    };
    if !allowed.is_empty() && !allowed.contains(&bits) {
        return Err(format!(
            "invalid bits in `{}`: this type has {}",
            shown(whole),
            allowed
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if matches!(code, kDLInt | kDLUInt) && bits > 64 {
        return Err(format!(
            "invalid bits in `{}`: integers have at most 64",
            shown(whole)
        ));
    }
    Ok((code, bits as u8))
}

/// Parses the text after the first `x`: `N` (1..=65535) or `vscalexN` (1..=32768).
fn parse_lanes(spec: &[u8]) -> Option<u16> {
    let (digits, scalable) = match spec.strip_prefix(VSCALE_PREFIX.as_bytes()) {
        Some(rest) => (rest, true),
        None => (spec, false),
    };
    let n = parse_digits(digits)?;
    if scalable {
        // Stored as the two's-complement negation of the count in 16 bits.
        (1..=32768)
            .contains(&n)
            .then_some((n as u16).wrapping_neg())
    } else {
        (1..=65535).contains(&n).then_some(n as u16)
    }
}

/// Prints the canonical string of a dtype; never panics.
///
/// `(3, 0, 0)` prints as the empty string and `(3, 64, 1)` as `handle`. Bits are omitted for the
/// fixed-width float families, for `bool` with 8 bits and for `handle` with 64 bits. Lanes that
/// are negative as `i16` print as `xvscalexN`, other lanes than 1 as `xN`. Codes without a name
/// print as `custom[CODE]BITS`.
pub fn dtype_to_string(t: DLDataType) -> String {
    if t == VOID {
        return String::new();
    }
    let mut out = String::new();
    if t.code == kDLOpaqueHandle || t.code == kDLBool {
        let (name, default_bits) = if t.code == kDLBool {
            ("bool", 8)
        } else {
            ("handle", 64)
        };
        out.push_str(name);
        if t.bits != default_bits {
            let _ = write!(out, "{}", t.bits);
        }
    } else if let Some(&(_, name)) = SIZED_NAMES.iter().find(|entry| entry.0 == t.code) {
        let _ = write!(out, "{name}{}", t.bits);
    } else if let Some(&(_, _, name)) = FIXED_FLOATS.iter().find(|entry| entry.0 == t.code) {
        out.push_str(name);
    } else {
        let _ = write!(out, "custom[{}]{}", t.code, t.bits);
    }
    let signed_lanes = t.lanes as i16;
    if signed_lanes < 0 {
        let _ = write!(out, "x{VSCALE_PREFIX}{}", -i32::from(signed_lanes));
    } else if t.lanes != 1 {
        let _ = write!(out, "x{}", t.lanes);
    }
    out
}

/// A [`DLDataType`] with string conversion and convenience constructors.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct DataType(pub DLDataType);

impl DataType {
    /// A data type from its type code, bit width and lane count.
    pub const fn new(code: u8, bits: u8, lanes: u16) -> Self {
        Self(DLDataType { code, bits, lanes })
    }

    /// Signed integer with `bits` bits, one lane.
    pub const fn int(bits: u8) -> Self {
        Self::new(kDLInt, bits, 1)
    }

    /// Unsigned integer with `bits` bits, one lane.
    pub const fn uint(bits: u8) -> Self {
        Self::new(kDLUInt, bits, 1)
    }

    /// IEEE float with `bits` bits, one lane.
    pub const fn float(bits: u8) -> Self {
        Self::new(kDLFloat, bits, 1)
    }

    /// `bfloat16`.
    pub const fn bfloat16() -> Self {
        Self::new(kDLBfloat, 16, 1)
    }

    /// `bool`, stored in 8 bits.
    pub const fn bool_() -> Self {
        Self::new(kDLBool, 8, 1)
    }

    /// `handle`: an opaque 64-bit pointer.
    pub const fn handle() -> Self {
        Self::new(kDLOpaqueHandle, 64, 1)
    }

    /// `void`: `(kDLOpaqueHandle, 0, 0)`, printed as the empty string.
    pub const fn void() -> Self {
        Self(VOID)
    }

    /// The DLPack type code.
    pub const fn code(self) -> u8 {
        self.0.code
    }

    /// The number of bits of one lane.
    pub const fn bits(self) -> u8 {
        self.0.bits
    }

    /// The raw lane count (negative as `i16` for scalable vectors).
    pub const fn lanes(self) -> u16 {
        self.0.lanes
    }

    /// Bytes of one element: `(bits * lanes + 7) / 8`, using the raw lane count.
    pub const fn itemsize(self) -> usize {
        (self.0.bits as usize * self.0.lanes as usize).div_ceil(8)
    }
}

impl FromStr for DataType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        parse_dtype(s).map(Self)
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&dtype_to_string(self.0))
    }
}

impl fmt::Debug for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == VOID {
            f.write_str("void")
        } else {
            fmt::Display::fmt(self, f)
        }
    }
}

impl From<DLDataType> for DataType {
    fn from(t: DLDataType) -> Self {
        Self(t)
    }
}

impl From<DataType> for DLDataType {
    fn from(t: DataType) -> Self {
        t.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn dt(code: u8, bits: u8, lanes: u16) -> DLDataType {
        DLDataType { code, bits, lanes }
    }

    #[track_caller]
    fn check(input: &str, expected: (u8, u8, u16), canonical: &str) {
        let t = parse_dtype(input).unwrap_or_else(|e| panic!("`{input}`: {e}"));
        assert_eq!(t, dt(expected.0, expected.1, expected.2), "parse `{input}`");
        assert_eq!(dtype_to_string(t), canonical, "print `{input}`");
    }

    #[test]
    fn reference_table() {
        check("float32", (2, 32, 1), "float32");
        check("int8", (0, 8, 1), "int8");
        check("i32", (0, 32, 1), "int32");
        check("uint1", (1, 1, 1), "uint1");
        check("bool", (6, 8, 1), "bool");
        check("bfloat16", (4, 16, 1), "bfloat16");
        check("bf16", (4, 16, 1), "bfloat16");
        check("float16x4", (2, 16, 4), "float16x4");
        check("f16", (2, 16, 1), "float16");
        check("float8_e4m3fn", (10, 8, 1), "float8_e4m3fn");
        check("fp8_e4m3fn", (10, 8, 1), "float8_e4m3fn");
        check("handle", (3, 64, 1), "handle");
        check("void", (3, 0, 0), "");
        check("", (3, 0, 0), "");
        check("int64xvscalex4", (0, 64, (-4i16) as u16), "int64xvscalex4");
    }

    #[test]
    fn integer_and_float_widths() {
        for bits in [8u8, 16, 32, 64] {
            check(&format!("int{bits}"), (0, bits, 1), &format!("int{bits}"));
            check(&format!("uint{bits}"), (1, bits, 1), &format!("uint{bits}"));
            check(&format!("i{bits}"), (0, bits, 1), &format!("int{bits}"));
            check(&format!("u{bits}"), (1, bits, 1), &format!("uint{bits}"));
        }
        for bits in [16u8, 32, 64] {
            check(
                &format!("float{bits}"),
                (2, bits, 1),
                &format!("float{bits}"),
            );
            check(&format!("f{bits}"), (2, bits, 1), &format!("float{bits}"));
        }
        check("complex64", (5, 64, 1), "complex64");
        check("complex128", (5, 128, 1), "complex128");
        check("complex64x2", (5, 64, 2), "complex64x2");
    }

    #[test]
    fn default_bits() {
        check("int", (0, 32, 1), "int32");
        check("uint", (1, 32, 1), "uint32");
        check("float", (2, 32, 1), "float32");
        check("bfloat", (4, 16, 1), "bfloat16");
        check("floatx4", (2, 32, 4), "float32x4");
        check("complex", (5, 64, 1), "complex64");
        check("complexx2", (5, 64, 2), "complex64x2");
    }

    #[test]
    fn fixed_float_families() {
        for &(code, bits, name) in &FIXED_FLOATS {
            check(name, (code, bits, 1), name);
            let alias = name.replacen("float", "fp", 1);
            check(&alias, (code, bits, 1), name);
            check(&format!("{alias}x8"), (code, bits, 8), &format!("{name}x8"));
        }
        check("float4_e2m1fn", (17, 4, 1), "float4_e2m1fn");
        check("float8_e4m3fnuz", (11, 8, 1), "float8_e4m3fnuz");
        check("float8_e4m3b11fnuz", (9, 8, 1), "float8_e4m3b11fnuz");
        check("float8_e4m3", (8, 8, 1), "float8_e4m3");
    }

    #[test]
    fn lanes() {
        check("int8x1", (0, 8, 1), "int8");
        check("int8x65535", (0, 8, 65535), "int8xvscalex1");
        check("boolx4", (6, 8, 4), "boolx4");
        check("handlex2", (3, 64, 2), "handlex2");
        check(
            "float32xvscalex32768",
            (2, 32, 32768),
            "float32xvscalex32768",
        );
        check("float32xvscalex1", (2, 32, 65535), "float32xvscalex1");
    }

    #[test]
    fn errors_name_the_input() {
        let cases = [
            ("flaot32", "Unknown data type `flaot32`"),
            ("Float32", "Unknown data type `Float32`"),
            ("i", "Unknown data type `i`"),
            ("bf", "Unknown data type `bf`"),
            ("fp16", "Unknown data type `fp16`"),
            ("complx64", "Unknown data type `complx64`"),
            ("fp8e4m3fn", "Unknown data type `fp8e4m3fn`"),
            ("float8_e4m3fn8", "Unknown data type `float8_e4m3fn8`"),
            ("int32 ", "Unknown data type `int32 `"),
            (" int32", "Unknown data type ` int32`"),
            ("int32abc", "Unknown data type `int32abc`"),
            ("voidx4", "Unknown data type `voidx4`"),
            ("x4", "Unknown data type `x4`"),
            ("int0", "invalid bits in `int0`"),
            ("int256", "invalid bits in `int256`"),
            ("int99999999999", "invalid bits in `int99999999999`"),
            ("float32x0", "invalid lanes in `float32x0`"),
            ("float32x", "invalid lanes in `float32x`"),
            ("float32x65536", "invalid lanes in `float32x65536`"),
            ("float32x4x2", "invalid lanes in `float32x4x2`"),
            ("float32x+4", "invalid lanes in `float32x+4`"),
            ("float32x4 ", "invalid lanes in `float32x4 `"),
            ("int64xvscalex0", "invalid lanes in `int64xvscalex0`"),
            (
                "int64xvscalex32769",
                "invalid lanes in `int64xvscalex32769`",
            ),
            ("int64xvscale4", "invalid lanes in `int64xvscale4`"),
        ];
        for (input, message) in cases {
            let err = parse_dtype(input).expect_err(input);
            assert!(
                err.starts_with(message),
                "`{input}`: got `{err}`, want `{message}`"
            );
        }
        let err = parse_dtype("custom[posit]16").unwrap_err();
        assert!(
            err.contains("custom[posit]16") && err.contains("not supported"),
            "{err}"
        );
    }

    #[test]
    fn printing_never_panics() {
        assert_eq!(dtype_to_string(dt(99, 16, 1)), "custom[99]16");
        assert_eq!(dtype_to_string(dt(200, 8, 4)), "custom[200]8x4");
        assert_eq!(dtype_to_string(dt(0, 32, 0)), "int32x0");
        assert_eq!(dtype_to_string(dt(3, 0, 1)), "handle0");
        assert_eq!(dtype_to_string(dt(6, 1, 1)), "bool1");
        assert_eq!(dtype_to_string(dt(3, 32, 1)), "handle32");
        for code in 0..=255u8 {
            for lanes in [0u16, 1, 2, 32767, 32768, 65535] {
                let _ = dtype_to_string(dt(code, 255, lanes));
                let _ = dtype_to_string(dt(code, 0, lanes));
            }
        }
    }

    #[test]
    fn data_type_api() {
        assert_eq!(DataType::int(32), "int32".parse().unwrap());
        assert_eq!(DataType::uint(8).to_string(), "uint8");
        assert_eq!(DataType::float(16).to_string(), "float16");
        assert_eq!(DataType::bfloat16().to_string(), "bfloat16");
        assert_eq!(DataType::bool_().to_string(), "bool");
        assert_eq!(DataType::handle().to_string(), "handle");
        assert_eq!(DataType::void().to_string(), "");
        assert_eq!(format!("{:?}", DataType::void()), "void");
        assert_eq!(format!("{:?}", DataType::new(2, 16, 4)), "float16x4");
        let t: DataType = "float16x4".parse().unwrap();
        assert_eq!((t.code(), t.bits(), t.lanes()), (2, 16, 4));
        assert_eq!(t.itemsize(), 8);
        assert_eq!(DataType::uint(1).itemsize(), 1);
        assert_eq!(DataType::new(1, 1, 9).itemsize(), 2);
        assert_eq!(DataType::new(17, 4, 3).itemsize(), 2);
        assert_eq!(
            DataType::new(2, 255, 65535).itemsize(),
            (255usize * 65535).div_ceil(8)
        );
        let raw: DLDataType = t.into();
        assert_eq!(DataType::from(raw), t);
        assert!(
            "flaot32"
                .parse::<DataType>()
                .unwrap_err()
                .contains("flaot32")
        );
    }

    /// Every valid dtype: integers of 1..=64 bits, the other named codes with their bit counts,
    /// fixed-width floats with their own bits, any lane count in 1..=65535.
    fn expressible() -> impl Strategy<Value = DLDataType> {
        let integers = (0u8..=1, 1u8..=64);
        let named: [(u8, u8); 9] = [
            (kDLFloat, 16),
            (kDLFloat, 32),
            (kDLFloat, 64),
            (kDLBfloat, 16),
            (kDLComplex, 64),
            (kDLComplex, 128),
            (kDLBool, 1),
            (kDLBool, 8),
            (kDLOpaqueHandle, 32),
        ];
        let named = (0..named.len()).prop_map(move |i| named[i]);
        let sized = prop_oneof![integers, named];
        let fixed = (0..FIXED_FLOATS.len()).prop_map(|i| (FIXED_FLOATS[i].0, FIXED_FLOATS[i].1));
        (prop_oneof![sized, fixed], 1u16..=65535).prop_map(|((code, bits), lanes)| DLDataType {
            code,
            bits,
            lanes,
        })
    }

    proptest! {
        #[test]
        fn print_then_parse_round_trips(t in expressible()) {
            let s = dtype_to_string(t);
            prop_assert_eq!(parse_dtype(&s), Ok(t), "via `{}`", s);
        }
    }
}
