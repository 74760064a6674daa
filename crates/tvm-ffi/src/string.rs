//! `String` and `Bytes`: values of up to 7 bytes live inline in the 16-byte `Any` (small forms);
//! longer ones are immutable heap objects whose content follows the cell and ends with a NUL.
//! Also the Python literal text of string and bytes content, which error messages and the repr
//! printer share.

use std::borrow::Cow;
use std::ffi::{c_int, c_void};
use std::fmt::{self, Write as _};
use std::marker::PhantomData;

use crate::abi::{
    self, TVMFFIAny, TVMFFIAnyPayload, TVMFFIByteArray, kTVMFFIBytes, kTVMFFISmallBytes,
    kTVMFFISmallStr, kTVMFFIStr,
};
use crate::any::{Any, AnyView};
use crate::error::{Error, ErrorKind};
use crate::object::{Object, ObjectCore, init_header};
use crate::spare_block::{self, BlockKind};

/// Most bytes stored inline; one byte of the 8-byte payload stays a terminating NUL.
pub const MAX_SMALL_LEN: usize = 7;

/// The layout of a heap string or bytes object; the content follows at offset 40.
#[repr(C)]
pub struct BytesObj {
    base: Object,
    bytes: TVMFFIByteArray,
}

impl BytesObj {
    /// The content bytes.
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: the object owns `size` bytes at `data` for its whole life.
        unsafe { self.bytes.as_bytes() }
    }
}

// SAFETY: the content is immutable and owned by the object.
unsafe impl Send for BytesObj {}
// SAFETY: as above.
unsafe impl Sync for BytesObj {}

/// Marker for heap strings (`ffi.String`, index 65).
#[repr(transparent)]
pub struct StrObj(BytesObj);

// SAFETY: repr(C)/transparent with the header first; the static index of `ffi.String`.
unsafe impl ObjectCore for StrObj {
    const TYPE_KEY: &'static str = "ffi.String";
    fn type_index() -> i32 {
        kTVMFFIStr
    }
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFIStr
    }
}

/// Marker for heap bytes (`ffi.Bytes`, index 66).
#[repr(transparent)]
pub struct BytesHeapObj(BytesObj);

// SAFETY: repr(C)/transparent with the header first; the static index of `ffi.Bytes`.
unsafe impl ObjectCore for BytesHeapObj {
    const TYPE_KEY: &'static str = "ffi.Bytes";
    fn type_index() -> i32 {
        kTVMFFIBytes
    }
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFIBytes
    }
}

/// Up to 8 bytes as a little-endian word, zero-padded. Assembled in registers from two
/// overlapping loads: a copy through memory would be read back at once as one word, which
/// stalls on the narrower stores of a short copy.
#[inline]
fn small_word(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    debug_assert!(n <= 8);
    if n >= 4 {
        let low = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let high = u32::from_le_bytes([bytes[n - 4], bytes[n - 3], bytes[n - 2], bytes[n - 1]]);
        // The two words overlap on equal bytes, so OR joins them.
        u64::from(low) | (u64::from(high) << ((n - 4) * 8))
    } else if n >= 2 {
        let low = u16::from_le_bytes([bytes[0], bytes[1]]);
        let high = u16::from_le_bytes([bytes[n - 2], bytes[n - 1]]);
        u64::from(low) | (u64::from(high) << ((n - 2) * 8))
    } else {
        bytes.first().map_or(0, |&byte| u64::from(byte))
    }
}

/// Builds an owning `Any` holding `bytes` in small form (index `small_index`) or as a heap
/// object (index `heap_index`); a `MemoryError` when the heap object cannot be allocated.
#[inline]
pub(crate) fn new_bytes_any(bytes: &[u8], small_index: i32, heap_index: i32) -> Result<Any, Error> {
    let raw = if bytes.len() <= MAX_SMALL_LEN {
        TVMFFIAny {
            type_index: small_index,
            small_str_len: bytes.len() as u32,
            payload: TVMFFIAnyPayload {
                v_bytes: small_word(bytes).to_le_bytes(),
            },
        }
    } else {
        // Both forms are assembled here, so the value travels in registers, not memory.
        TVMFFIAny {
            type_index: heap_index,
            small_str_len: 0,
            payload: TVMFFIAnyPayload {
                v_obj: new_heap_bytes(bytes, heap_index)?,
            },
        }
    };
    // SAFETY: a small value owns nothing; a heap value owns the new object's one reference.
    Ok(unsafe { Any::from_raw(raw) })
}

/// The heap form of [`new_bytes_any`]: a new bytes object of type `heap_index` holding one
/// reference, which the caller takes.
#[inline(never)]
fn new_heap_bytes(bytes: &[u8], heap_index: i32) -> Result<*mut abi::TVMFFIObject, Error> {
    let block = block_size(bytes.len())
        .map(take_block)
        .filter(|block| !block.is_null())
        .ok_or_else(|| out_of_memory(bytes.len(), heap_index))?
        .cast::<BytesObj>();
    // SAFETY: the block has room for the object, the content and the NUL, and malloc's
    // alignment; the header and the cell are written before the object is handed out.
    unsafe {
        init_header(block.cast(), heap_index, heap_bytes_deleter);
        let content = block.add(1).cast::<u8>();
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), content, bytes.len());
        content.add(bytes.len()).write(0);
        (&raw mut (*block).bytes).write(TVMFFIByteArray::from_bytes(std::slice::from_raw_parts(
            content,
            bytes.len(),
        )));
    }
    Ok(block.cast())
}

/// The `MemoryError` of a string or bytes value of `len` bytes that does not fit in memory.
#[cold]
fn out_of_memory(len: usize, heap_index: i32) -> Error {
    let what = if heap_index == kTVMFFIStr {
        "a string"
    } else {
        "a bytes value"
    };
    Error::new(
        ErrorKind::MemoryError,
        format!("cannot allocate {what} of {len} bytes"),
    )
}

/// Bytes of the block of a heap string or bytes object with `len` content bytes: the object,
/// the content and its NUL, rounded up to the usable size of the chunk glibc's malloc gives for
/// that request anyway (16-byte chunks, 8 bytes of them its own), so that blocks of one size
/// class are interchangeable at no cost in memory.
fn block_size(len: usize) -> Option<usize> {
    size_of::<BytesObj>()
        .checked_add(len)
        .and_then(|size| size.checked_add(1 + 8 + 15))
        .map(|size| (size & !15) - 8)
}

/// Longest content whose block a thread may keep as its spare.
const SPARE_MAX_LEN: usize = SPARE_MAX - size_of::<BytesObj>() - 1;

/// Largest block a thread keeps as its spare ([`spare_block`]).
const SPARE_MAX: usize = 248;

/// A block of `size` bytes: this thread's spare if it has that size, a new one otherwise (NULL
/// when memory runs out).
#[inline]
fn take_block(size: usize) -> *mut c_void {
    if size <= SPARE_MAX {
        spare_block::take(BlockKind::Bytes, size)
    } else {
        spare_block::try_allocate(size)
    }
}

/// The deleter of heap strings and bytes: they own nothing, so the weak flag gives the block
/// back (kept as the thread's spare when there is none, freed otherwise).
unsafe extern "C" fn heap_bytes_deleter(obj: *mut c_void, flags: c_int) {
    if flags & abi::kTVMFFIObjectDeleterFlagBitMaskWeak == 0 {
        return;
    }
    // SAFETY: a heap bytes object whose last reference is gone; its cell is intact.
    let len = unsafe { (*obj.cast::<BytesObj>()).bytes.size };
    let short = block_size(len).filter(|_| len <= SPARE_MAX_LEN);
    if let Some(size) = short {
        // SAFETY: the block came from `take_block` with the size of its content's length, and
        // no reference remains.
        unsafe { spare_block::give_back(BlockKind::Bytes, obj, size) };
    } else {
        // SAFETY: the block came from `libc::malloc` and no reference remains.
        unsafe { libc::free(obj) };
    }
}

/// The bytes of a string-like value: small forms, heap objects, raw C strings and byte-array
/// pointers. `None` for any other type.
#[inline]
pub(crate) fn bytes_of_view<'a>(view: &'a AnyView<'_>) -> Option<&'a [u8]> {
    // SAFETY: a view's objects and pointers stay valid for its lifetime.
    unsafe { bytes_of_raw(view.as_raw()) }
}

/// The bytes of a string or bytes value (small or heap), borrowed from it; `None` for other
/// types.
pub fn bytes_of_any(value: &Any) -> Option<&[u8]> {
    match value.type_index() {
        // SAFETY: the value owns its object (if any) while borrowed.
        kTVMFFISmallStr | kTVMFFIStr | kTVMFFISmallBytes | kTVMFFIBytes => unsafe {
            bytes_of_raw(value.as_raw())
        },
        _ => None,
    }
}

/// The bytes of a raw string-like value (small forms, heap objects, raw C strings and byte-array
/// pointers), read in place (no copy of the value); `None` for any other type.
///
/// # Safety
/// Objects and pointers held by `raw` stay valid while `raw` is borrowed.
#[inline]
pub unsafe fn bytes_of_raw(raw: &TVMFFIAny) -> Option<&[u8]> {
    // SAFETY: each branch reads the payload member its type index selects; objects and
    // pointers are valid per the caller's guarantee.
    unsafe {
        match raw.type_index {
            kTVMFFISmallStr | kTVMFFISmallBytes => {
                let len = (raw.small_str_len as usize).min(MAX_SMALL_LEN);
                let payload: &[u8; 8] = &*std::ptr::addr_of!(raw.payload.v_bytes);
                Some(&payload[..len])
            }
            kTVMFFIStr | kTVMFFIBytes => Some((*raw.payload.v_obj.cast::<BytesObj>()).as_bytes()),
            abi::kTVMFFIRawStr => {
                let ptr = raw.payload.v_c_str;
                if ptr.is_null() {
                    return None;
                }
                Some(std::ffi::CStr::from_ptr(ptr).to_bytes())
            }
            abi::kTVMFFIByteArrayPtr => {
                let array = raw.payload.v_ptr.cast::<TVMFFIByteArray>();
                if array.is_null() {
                    return None;
                }
                Some((*array).as_bytes())
            }
            _ => None,
        }
    }
}

/// What tells the two kinds of [`ByteSeq`] apart: their type indices and schema name.
/// Implemented by [`Text`] and [`Binary`] only.
pub trait ByteKind: sealed::Sealed {
    /// Type index of the inline form (7 bytes or fewer).
    const SMALL_INDEX: i32;
    /// Type index of the heap object form.
    const HEAP_INDEX: i32;
    /// Type index of the borrowed form that a conversion from a view copies (a raw C string for
    /// text, a byte-array pointer for bytes).
    const BORROWED_INDEX: i32;
    /// The schema name used in type errors.
    const TYPE_NAME: &'static str;
}

mod sealed {
    /// Keeps [`ByteKind`](super::ByteKind) implemented by this module's markers only.
    pub trait Sealed {}
}

/// The kind of [`String`]: text (`ffi.String`, index 65; small form index 11).
pub enum Text {}

impl sealed::Sealed for Text {}

impl ByteKind for Text {
    const SMALL_INDEX: i32 = kTVMFFISmallStr;
    const HEAP_INDEX: i32 = kTVMFFIStr;
    const BORROWED_INDEX: i32 = abi::kTVMFFIRawStr;
    const TYPE_NAME: &'static str = "ffi.String";
}

/// The kind of [`Bytes`]: binary data (`ffi.Bytes`, index 66; small form index 12).
pub enum Binary {}

impl sealed::Sealed for Binary {}

impl ByteKind for Binary {
    const SMALL_INDEX: i32 = kTVMFFISmallBytes;
    const HEAP_INDEX: i32 = kTVMFFIBytes;
    const BORROWED_INDEX: i32 = abi::kTVMFFIByteArrayPtr;
    const TYPE_NAME: &'static str = "ffi.Bytes";
}

/// An immutable byte sequence of kind `K`, small (inline in the `Any`) or on the heap; used
/// through its aliases [`String`] and [`Bytes`].
pub struct ByteSeq<K: ByteKind> {
    value: Any,
    kind: PhantomData<K>,
}

/// An immutable text value (`ffi.String`); Rust-made values are UTF-8, values made by C may
/// hold any bytes.
pub type String = ByteSeq<Text>;

/// An immutable byte value (`ffi.Bytes`).
pub type Bytes = ByteSeq<Binary>;

impl<K: ByteKind> ByteSeq<K> {
    /// Wraps an owning value of this kind.
    fn wrap(value: Any) -> Self {
        ByteSeq {
            value,
            kind: PhantomData,
        }
    }

    /// Copies `bytes` into a new value. Aborts when memory runs out, as a `Vec` does; see
    /// [`ByteSeq::try_from_bytes`] for content sized by a caller.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        Self::try_from_bytes(bytes)
            .unwrap_or_else(|_| spare_block::abort_out_of_memory(bytes.len()))
    }

    /// Copies `bytes` into a new value; a `MemoryError` when it does not fit in memory.
    #[inline]
    pub fn try_from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        Ok(Self::wrap(new_bytes_any(
            bytes,
            K::SMALL_INDEX,
            K::HEAP_INDEX,
        )?))
    }

    /// The content bytes (without the terminating NUL).
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: `value` owns its object, if any.
        unsafe { bytes_of_raw(self.value.as_raw()) }.unwrap_or(&[])
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the value is stored inline (7 bytes or fewer).
    pub fn is_small(&self) -> bool {
        self.value.type_index() == K::SMALL_INDEX
    }

    /// The owning `Any` holding this value.
    pub fn into_any(self) -> Any {
        self.value
    }

    /// Copies the content of a string-like view, if it has one of the accepted types.
    pub fn try_from_view(view: &AnyView<'_>) -> Option<Self> {
        let index = view.type_index();
        if index == K::SMALL_INDEX || index == K::HEAP_INDEX {
            Some(Self::wrap(view.to_owned()))
        } else if index == K::BORROWED_INDEX {
            bytes_of_view(view).map(Self::from_bytes)
        } else {
            None
        }
    }

    /// The schema name used in type errors.
    pub const TYPE_NAME: &'static str = K::TYPE_NAME;
}

impl<K: ByteKind> Clone for ByteSeq<K> {
    fn clone(&self) -> Self {
        Self::wrap(self.value.clone())
    }
}

impl<K: ByteKind> PartialEq for ByteSeq<K> {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl<K: ByteKind> Eq for ByteSeq<K> {}

impl<K: ByteKind> std::hash::Hash for ByteSeq<K> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state)
    }
}

impl<K: ByteKind> Default for ByteSeq<K> {
    fn default() -> Self {
        Self::from_bytes(b"")
    }
}

impl<K: ByteKind> From<ByteSeq<K>> for Any {
    fn from(value: ByteSeq<K>) -> Any {
        value.value
    }
}

impl ByteSeq<Text> {
    /// Creates a string holding a copy of `text`.
    pub fn new(text: &str) -> String {
        String::from_bytes(text.as_bytes())
    }

    /// Creates a string holding a copy of `text`; a `MemoryError` when it does not fit.
    pub fn try_new(text: &str) -> Result<String, Error> {
        String::try_from_bytes(text.as_bytes())
    }

    /// The content as `&str`; a `ValueError` naming the content if it is not UTF-8.
    pub fn to_str(&self) -> Result<&str, Error> {
        std::str::from_utf8(self.as_bytes()).map_err(|_| {
            Error::new(
                ErrorKind::ValueError,
                format!("string is not valid UTF-8: {:?}", self.to_string_lossy()),
            )
        })
    }

    /// The content with invalid UTF-8 sequences replaced.
    pub fn to_string_lossy(&self) -> Cow<'_, str> {
        std::string::String::from_utf8_lossy(self.as_bytes())
    }
}

impl From<&str> for String {
    fn from(text: &str) -> String {
        String::new(text)
    }
}

impl From<std::string::String> for String {
    fn from(text: std::string::String) -> String {
        String::new(&text)
    }
}

impl PartialEq<str> for String {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for String {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl fmt::Display for String {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_string_lossy())
    }
}

impl fmt::Debug for String {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_string_lossy())
    }
}

impl From<&[u8]> for Bytes {
    fn from(bytes: &[u8]) -> Bytes {
        Bytes::from_bytes(bytes)
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(bytes: Vec<u8>) -> Bytes {
        Bytes::from_bytes(&bytes)
    }
}

impl PartialEq<[u8]> for Bytes {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_bytes() == other
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `escape_ascii` already escapes quotes and backslashes: quoting its output with `{:?}`
        // would escape them a second time (`b"\\x00"` for a NUL byte).
        write!(f, "b\"{}\"", self.as_bytes().escape_ascii())
    }
}

/// Appends `bytes` as a double-quoted literal (`b"..."` for bytes) that Python reads back.
pub(crate) fn push_python_literal(bytes: &[u8], is_bytes: bool, out: &mut std::string::String) {
    if is_bytes {
        out.push('b');
    }
    out.push('"');
    let text = if is_bytes {
        None
    } else {
        std::str::from_utf8(bytes).ok()
    };
    let escape = |c: char, out: &mut std::string::String| match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x20 || c as u32 == 0x7f => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if c.is_ascii() => out.push(c),
        c if (c as u32) <= 0xffff => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\U{:08x}", c as u32);
        }
    };
    match text {
        Some(text) => text.chars().for_each(|c| escape(c, out)),
        None => {
            for &b in bytes {
                if b.is_ascii() {
                    escape(char::from(b), out);
                } else {
                    let _ = write!(out, "\\x{b:02x}");
                }
            }
        }
    }
    out.push('"');
}

/// `bytes` as a Python bytes literal (`b"a\xff"`), cut after `limit` bytes with `...`.
pub(crate) fn bytes_literal(bytes: &[u8], limit: usize) -> std::string::String {
    let mut out = std::string::String::new();
    push_python_literal(&bytes[..bytes.len().min(limit)], true, &mut out);
    if bytes.len() > limit {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_quote_as_python_literals() {
        let mut out = std::string::String::new();
        push_python_literal("a\"b\\\n\x1b\0é".as_bytes(), false, &mut out);
        assert_eq!(out, r#""a\"b\\\n\x1b\x00\u00e9""#);
        let mut out = std::string::String::new();
        push_python_literal(b"ab\x00\xff", true, &mut out);
        assert_eq!(out, r#"b"ab\x00\xff""#);
    }
}
