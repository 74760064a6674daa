//! Integers wider than 64 bits (`ffi.BigInt`, index 78): a word count and int64 words, least
//! significant first, in minimal two's complement. Values that fit in int64 are plain ints.

use std::ffi::c_int;

use tvm_ffi::boundary::{ffi_boundary, ffi_status};
use tvm_ffi::error::{Error, ErrorKind};
use tvm_ffi::object::{Object, alloc_object};
use tvm_ffi_sys::{TVMFFIAny, TVMFFIAnyPayload, TVMFFIByteArray, kTVMFFIBigInt, kTVMFFIInt};

use crate::args::{bytes_arg, out_arg};

#[repr(C)]
struct BigIntObj {
    base: Object,
    num_words: usize,
}

/// Drops redundant sign words so the representation is minimal.
fn normalize(words: &mut Vec<i64>) {
    while words.len() > 1 {
        let top = words[words.len() - 1];
        let below_negative = words[words.len() - 2] < 0;
        if (top == 0 && !below_negative) || (top == -1 && below_negative) {
            words.pop();
        } else {
            break;
        }
    }
}

/// Builds an integer value from little-endian two's-complement words.
///
/// # Safety
/// `words` is a valid byte array; `out` is valid for writes.
/// The words of a BigInt value, least significant first.
fn words_of<'a>(value: &'a tvm_ffi::AnyView<'_>) -> &'a [i64] {
    let Some(obj) = value
        .as_object_ptr()
        .filter(|_| value.type_index() == kTVMFFIBigInt)
    else {
        return &[];
    };
    let obj = obj.cast::<BigIntObj>();
    // SAFETY: a live BigInt object: its word count, then that many words right after it.
    unsafe { std::slice::from_raw_parts(obj.add(1).cast::<i64>(), (*obj).num_words) }
}

/// Map keys of `ffi.BigInt` compare and hash by value (its normalized words).
struct BigIntKeys;

impl tvm_ffi::containers::hash::AnyHashHooks for BigIntKeys {
    fn hash(value: tvm_ffi::AnyView<'_>) -> i64 {
        words_of(&value)
            .iter()
            .fold(0x2545_f491_4f6c_dd1d_i64, |h, &w| {
                (h ^ w).wrapping_mul(0x0100_0000_01b3).rotate_left(29)
            })
    }

    fn equal(a: tvm_ffi::AnyView<'_>, b: tvm_ffi::AnyView<'_>) -> bool {
        words_of(&a) == words_of(&b)
    }
}

/// Registers the map-key hooks of `ffi.BigInt`.
pub(crate) fn register_key_hooks() -> tvm_ffi::Result<()> {
    tvm_ffi::containers::hash::register_hooks::<BigIntKeys>(kTVMFFIBigInt)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIBigIntFromByteArray(
    words: *const TVMFFIByteArray,
    out: *mut TVMFFIAny,
) -> c_int {
    ffi_status("TVMFFIBigIntFromByteArray", || {
        // SAFETY: per the contract.
        let (bytes, out) = unsafe { (bytes_arg(words, "words")?, out_arg(out, "out")?) };
        if bytes.len() % 8 != 0 {
            return Err(Error::new(
                ErrorKind::ValueError,
                format!(
                    "BigInt content must contain whole 64-bit words, got {} bytes",
                    bytes.len()
                ),
            ));
        }
        let mut words: Vec<i64> = bytes
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8-byte chunk")))
            .collect();
        normalize(&mut words);
        if words.len() <= 1 {
            let value = words.first().copied().unwrap_or(0);
            *out = TVMFFIAny {
                type_index: kTVMFFIInt,
                small_str_len: 0,
                payload: TVMFFIAnyPayload { v_int64: value },
            };
            return Ok(());
        }
        let header = BigIntObj {
            base: Object::header(),
            num_words: words.len(),
        };
        // SAFETY: repr(C) with the header first; the extra bytes hold plain integers.
        let ptr = unsafe { alloc_object(header, words.len() * 8, kTVMFFIBigInt) };
        // SAFETY: the block has room for the words right after the 32-byte object.
        unsafe {
            std::ptr::copy_nonoverlapping(
                words.as_ptr(),
                ptr.as_ptr().add(1).cast::<i64>(),
                words.len(),
            )
        };
        *out = TVMFFIAny {
            type_index: kTVMFFIBigInt,
            small_str_len: 0,
            payload: TVMFFIAnyPayload {
                v_obj: ptr.as_ptr().cast(),
            },
        };
        Ok(())
    })
}

/// A borrowed view of the words of an int or BigInt value; empty for anything else.
///
/// # Safety
/// `value` is NULL or a valid value that outlives the view.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIBigIntGetContentByteArray(
    value: *const TVMFFIAny,
) -> TVMFFIByteArray {
    ffi_boundary("TVMFFIBigIntGetContentByteArray", || {
        let empty = TVMFFIByteArray::EMPTY;
        // SAFETY: per the contract.
        let Some(value) = (unsafe { value.as_ref() }) else {
            return empty;
        };
        match value.type_index {
            kTVMFFIInt => TVMFFIByteArray {
                data: std::ptr::addr_of!(value.payload).cast(),
                size: 8,
            },
            // SAFETY: a BigInt value holds a live `BigIntObj` followed by its words.
            kTVMFFIBigInt => unsafe {
                let obj = value.payload.v_obj.cast::<BigIntObj>();
                TVMFFIByteArray {
                    data: obj.add(1).cast(),
                    size: (*obj).num_words * 8,
                }
            },
            _ => empty,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tvm_ffi::any::Any;

    fn from_words(words: &[i64]) -> Any {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let array = TVMFFIByteArray::from_bytes(&bytes);
        let mut out = TVMFFIAny::NONE;
        // SAFETY: valid pointers; the result is owned.
        assert_eq!(unsafe { TVMFFIBigIntFromByteArray(&array, &mut out) }, 0);
        // SAFETY: an owned value.
        unsafe { Any::from_raw(out) }
    }

    #[test]
    fn small_values_become_ints() {
        assert_eq!(from_words(&[]).cast::<i64>().unwrap(), 0);
        assert_eq!(from_words(&[-5, -1]).cast::<i64>().unwrap(), -5);
        assert_eq!(from_words(&[7, 0, 0]).cast::<i64>().unwrap(), 7);
    }

    #[test]
    fn wide_values_keep_their_words() {
        // 2^64: low word 0, high word 1.
        let big = from_words(&[0, 1, 0]);
        assert_eq!(big.type_index(), kTVMFFIBigInt);
        // SAFETY: the value outlives the view.
        let view = unsafe { TVMFFIBigIntGetContentByteArray(big.as_raw()) };
        assert_eq!(view.size, 16);
        // A positive value whose top word has the sign bit set keeps a zero word.
        let positive = from_words(&[0, i64::MIN, 0]);
        // SAFETY: as above.
        let view = unsafe { TVMFFIBigIntGetContentByteArray(positive.as_raw()) };
        assert_eq!(view.size, 24);
    }

    #[test]
    fn ragged_input_is_a_value_error() {
        let bytes = [0u8; 5];
        let array = TVMFFIByteArray::from_bytes(&bytes);
        let mut out = TVMFFIAny::NONE;
        // SAFETY: valid pointers.
        assert_eq!(unsafe { TVMFFIBigIntFromByteArray(&array, &mut out) }, -1);
        let err = Error::take_raised().unwrap();
        assert!(err.message().contains('5'), "{err}");
    }
}
