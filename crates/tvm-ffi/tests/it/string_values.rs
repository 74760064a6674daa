//! `String` and `Bytes` as values: equality, hashing, emptiness, formatting, conversions, the
//! borrowed bytes of an `Any`, and the NUL that ends every heap value.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use tvm_ffi::string::bytes_of_any;
use tvm_ffi::{Any, Bytes, String};

fn hash_of<T: Hash>(value: &T) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// Contents on both sides of the small/heap boundary.
const TEXTS: [&str; 6] = ["", "a", "b", "seven!!", "eight!!!", "a longer heap string"];

#[test]
fn equality_follows_the_content() {
    for (i, a) in TEXTS.iter().enumerate() {
        for (j, b) in TEXTS.iter().enumerate() {
            assert_eq!(String::new(a) == String::new(b), i == j, "{a:?} vs {b:?}");
            let (x, y) = (Bytes::from(a.as_bytes()), Bytes::from(b.as_bytes()));
            assert_eq!(x == y, i == j, "bytes {a:?} vs {b:?}");
        }
    }
}

#[test]
fn comparisons_with_rust_strings_and_slices() {
    for (i, a) in TEXTS.iter().enumerate() {
        let s = String::new(a);
        let b = Bytes::from(a.as_bytes());
        for (j, other) in TEXTS.iter().enumerate() {
            assert_eq!(s == **other, i == j, "{a:?} == str {other:?}");
            assert_eq!(s == *other, i == j, "{a:?} == &str {other:?}");
            assert_eq!(b == *other.as_bytes(), i == j, "bytes {a:?} == {other:?}");
        }
    }
}

#[test]
fn hashes_agree_with_equality() {
    for (i, a) in TEXTS.iter().enumerate() {
        // Two separately built values with the same content hash alike.
        assert_eq!(hash_of(&String::new(a)), hash_of(&String::new(a)));
        assert_eq!(
            hash_of(&Bytes::from(a.as_bytes())),
            hash_of(&Bytes::from(a.as_bytes()))
        );
        for b in &TEXTS[i + 1..] {
            assert_ne!(
                hash_of(&String::new(a)),
                hash_of(&String::new(b)),
                "{a:?} {b:?}"
            );
            assert_ne!(
                hash_of(&Bytes::from(a.as_bytes())),
                hash_of(&Bytes::from(b.as_bytes())),
                "{a:?} {b:?}"
            );
        }
    }
}

#[test]
fn emptiness() {
    assert!(String::new("").is_empty());
    assert!(String::default().is_empty());
    assert!(Bytes::from(&b""[..]).is_empty());
    for text in &TEXTS[1..] {
        assert!(!String::new(text).is_empty(), "{text:?}");
        assert!(!Bytes::from(text.as_bytes()).is_empty(), "{text:?}");
    }
}

#[test]
fn display_and_debug() {
    for text in TEXTS {
        assert_eq!(String::new(text).to_string(), text);
        assert_eq!(format!("{:?}", String::new(text)), format!("{text:?}"));
    }
    assert_eq!(String::from_bytes(b"a\xffb").to_string(), "a\u{fffd}b");
    // Bytes print as a Rust byte-string literal of the same bytes.
    assert_eq!(format!("{:?}", Bytes::from(&b"abc"[..])), r#"b"abc""#);
    assert_eq!(
        format!("{:?}", Bytes::from(&b"\x00\xff\"q\\\n"[..])),
        r#"b"\x00\xff\"q\\\n""#
    );
    assert_eq!(
        format!("{:?}", Bytes::from(vec![b'z'; 9])),
        r#"b"zzzzzzzzz""#
    );
    assert_eq!(
        format!("{:?}", Any::from(Bytes::from(&b"\x01"[..]))),
        r#"b"\x01""#
    );
}

#[test]
fn conversions_from_rust_strings_copy_the_text() {
    for text in TEXTS {
        let owned = String::from(text.to_owned());
        assert_eq!(owned.as_bytes(), text.as_bytes());
        assert_eq!(String::from(text).as_bytes(), text.as_bytes());
    }
}

#[test]
fn bytes_of_any_borrows_strings_and_bytes_only() {
    for text in TEXTS {
        let s = Any::from(String::new(text));
        assert_eq!(bytes_of_any(&s), Some(text.as_bytes()), "{text:?}");
        let b = Any::from(Bytes::from(text.as_bytes()));
        assert_eq!(bytes_of_any(&b), Some(text.as_bytes()), "bytes {text:?}");
    }
    assert_eq!(bytes_of_any(&Any::from(3i64)), None);
    assert_eq!(bytes_of_any(&Any::none()), None);
    assert_eq!(bytes_of_any(&Any::from(tvm_ffi::Array::new())), None);
}

#[test]
fn heap_values_end_with_a_nul_at_every_length() {
    for len in 8..=80usize {
        let text: std::string::String = (0..len)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        for any in [
            Any::from(String::new(&text)),
            Any::from(Bytes::from(text.as_bytes())),
        ] {
            let obj = any.as_object_ptr().expect("a heap value");
            // SAFETY: a heap string or bytes object: the content at offset 40 is followed by a
            // NUL inside the same block.
            let (content, nul) = unsafe {
                let data = obj.cast::<u8>().add(40);
                (std::slice::from_raw_parts(data, len), *data.add(len))
            };
            assert_eq!(content, text.as_bytes());
            assert_eq!(nul, 0, "length {len}");
        }
    }
}

#[test]
fn raw_c_strings_become_owned_strings_through_c() {
    use tvm_ffi::abi::{self, TVMFFIAny};
    for text in [
        c"",
        c"hello",
        c"seven!!",
        c"eight!!!",
        c"a longer heap string",
    ] {
        let view = TVMFFIAny::raw_c_str(text.as_ptr());
        let mut out = TVMFFIAny::NONE;
        // SAFETY: a valid raw string value and output.
        assert_eq!(unsafe { abi::TVMFFIAnyViewToOwnedAny(&view, &mut out) }, 0);
        let small = text.to_bytes().len() <= 7;
        let expected = if small {
            abi::kTVMFFISmallStr
        } else {
            abi::kTVMFFIStr
        };
        assert_eq!(out.type_index, expected, "{text:?}");
        // SAFETY: the output is an owned value.
        let owned = unsafe { Any::from_raw(out) };
        assert_eq!(bytes_of_any(&owned), Some(text.to_bytes()));
    }
    // A NULL raw string is still an error.
    let view = TVMFFIAny::raw_c_str(std::ptr::null());
    let mut out = TVMFFIAny::NONE;
    // SAFETY: a valid value and output.
    assert_eq!(unsafe { abi::TVMFFIAnyViewToOwnedAny(&view, &mut out) }, -1);
    let err = tvm_ffi::Error::take_raised().unwrap();
    assert!(err.message().contains("NULL string pointer"), "{err}");
}

#[test]
fn heap_values_made_after_others_are_released_keep_their_own_content() {
    // Released blocks are handed to the next value of the same size: the content, the NUL and
    // the kind must be the new value's.
    for round in 0..3 {
        for len in [8usize, 9, 24, 100, 150, 207, 208, 300] {
            let text: std::string::String = (0..len)
                .map(|i| char::from(b'a' + ((i + round + len) % 26) as u8))
                .collect();
            let first = String::from(text.as_str());
            let held = Bytes::from(text.as_bytes());
            drop(first);
            let second = String::from(text.as_str());
            assert_eq!(second.as_bytes(), text.as_bytes());
            assert_eq!(held.as_bytes(), text.as_bytes());
            let any: Any = second.into();
            assert_eq!(bytes_of_any(&any), Some(text.as_bytes()));
            drop(held);
            let other = Bytes::from(&text.as_bytes()[..len - 1]);
            assert_eq!(other.as_bytes(), &text.as_bytes()[..len - 1]);
        }
    }
    // Values released on another thread than the one that made them.
    let made: Vec<String> = (0..8)
        .map(|i| String::from("x".repeat(40 + i).as_str()))
        .collect();
    std::thread::spawn(move || drop(made)).join().unwrap();
    assert_eq!(
        String::from("y".repeat(47).as_str()).as_bytes(),
        "y".repeat(47).as_bytes()
    );
}
