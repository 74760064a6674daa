//! Decimal text of integers wider than 64 bits (`ffi.BigInt`), for repr and serialization.

use crate::abi::{self, TVMFFIAny, TVMFFIByteArray, kTVMFFIBigInt};
use crate::any::{Any, AnyView};
use crate::error::{Error, ErrorKind, Result};

/// The little-endian two's-complement words of a `ffi.BigInt` value.
fn words_of(value: AnyView<'_>) -> Option<Vec<i64>> {
    if value.type_index() != kTVMFFIBigInt {
        return None;
    }
    // SAFETY: the value is a live BigInt; the returned array views its words while it lives.
    let bytes = unsafe { abi::TVMFFIBigIntGetContentByteArray(value.as_raw()) };
    if bytes.data.is_null() {
        return Some(vec![0]);
    }
    // SAFETY: the runtime returns `size` readable bytes that live as long as the value.
    let raw = unsafe { std::slice::from_raw_parts(bytes.data.cast::<u8>(), bytes.size) };
    Some(
        raw.chunks(8)
            .map(|c| {
                let mut word = [0u8; 8];
                word[..c.len()].copy_from_slice(c);
                i64::from_le_bytes(word)
            })
            .collect(),
    )
}

/// The decimal text of a `ffi.BigInt` value; `None` for other values.
pub fn to_decimal(value: AnyView<'_>) -> Option<String> {
    let words = words_of(value)?;
    let negative = words.last().is_some_and(|w| *w < 0);
    // Magnitude in base-2^32 limbs, least significant first.
    let mut limbs: Vec<u32> = words
        .iter()
        .flat_map(|w| [*w as u64 as u32, ((*w as u64) >> 32) as u32])
        .collect();
    if negative {
        // Two's complement negation: invert and add one.
        let mut carry = 1u64;
        for limb in &mut limbs {
            let v = u64::from(!*limb) + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
    }
    let mut digits = Vec::new();
    while limbs.iter().any(|l| *l != 0) {
        let mut rem = 0u64;
        for limb in limbs.iter_mut().rev() {
            let cur = (rem << 32) | u64::from(*limb);
            *limb = (cur / 1_000_000_000) as u32;
            rem = cur % 1_000_000_000;
        }
        digits.push(rem as u32);
    }
    let mut text = String::from(if negative { "-" } else { "" });
    match digits.split_last() {
        None => text.push('0'),
        Some((top, rest)) => {
            text.push_str(&top.to_string());
            for chunk in rest.iter().rev() {
                text.push_str(&format!("{chunk:09}"));
            }
        }
    }
    Some(text)
}

/// The integer value of decimal `text` (an `int` if it fits in 64 bits, else a `ffi.BigInt`);
/// a `ValueError` naming the text if it is not an integer.
pub fn from_decimal(text: &str) -> Result<Any> {
    let bad = || {
        Error::new(
            ErrorKind::ValueError,
            format!("invalid integer text {text:?}"),
        )
    };
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    if let Ok(v) = text.parse::<i64>() {
        return Ok(Any::from(v));
    }
    let mut limbs: Vec<u32> = vec![0];
    for b in digits.bytes() {
        let mut carry = u64::from(b - b'0');
        for limb in &mut limbs {
            let v = u64::from(*limb) * 10 + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            limbs.push(carry as u32);
        }
    }
    // One more limb pair so the sign bit is free, then negate if needed.
    limbs.extend([0, 0]);
    if limbs.len() % 2 == 1 {
        limbs.push(0);
    }
    if negative {
        let mut carry = 1u64;
        for limb in &mut limbs {
            let v = u64::from(!*limb) + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
    }
    let bytes: Vec<u8> = limbs
        .chunks(2)
        .flat_map(|p| ((u64::from(p[1]) << 32) | u64::from(p[0])).to_le_bytes())
        .collect();
    let array = TVMFFIByteArray {
        data: bytes.as_ptr().cast(),
        size: bytes.len(),
    };
    let mut out = TVMFFIAny::NONE;
    // SAFETY: `array` views `bytes` for the call; `out` is writable and owns nothing yet.
    if unsafe { abi::TVMFFIBigIntFromByteArray(&array, &mut out) } != 0 {
        return Err(Error::take_raised_or(ErrorKind::ValueError, text));
    }
    // SAFETY: on success the runtime wrote an owning value.
    Ok(unsafe { Any::from_raw(out) })
}
