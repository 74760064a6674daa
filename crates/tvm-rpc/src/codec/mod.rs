//! The pure codec of the wire protocol: values, packed sequences and packet bodies to and from
//! bytes. No I/O and no process state, so that a fuzz target can drive every decoder.
//!
//! Decoding never trusts a length: every count and size is checked against the bytes that are
//! actually there before anything is allocated, and a bad packet is a [`DecodeError`] naming
//! what was wrong and where.

mod message;
mod value;

use std::fmt;

pub use message::{
    Message, decode_copy_header, decode_message, encode_copy_header, encode_message,
    tensor_header_len,
};
pub use value::{RPC_CALLBACK_INDEX, RPC_OBJECT_REF_INDEX, TensorMeta, WireValue};

/// The most dimensions a tensor on the wire may have.
pub const MAX_NDIM: i32 = 64;

/// A malformed packet: what was expected, and the offset in the packet body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// What was wrong.
    pub what: String,
    /// Byte offset in the body where decoding stopped.
    pub offset: usize,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "malformed RPC packet: {} (at byte {})",
            self.what, self.offset
        )
    }
}

impl std::error::Error for DecodeError {}

impl From<DecodeError> for tvm_ffi::Error {
    fn from(err: DecodeError) -> tvm_ffi::Error {
        tvm_ffi::Error::new(tvm_ffi::ErrorKind::ValueError, err.to_string())
    }
}

/// Appends little-endian scalars and byte strings to a packet body.
#[derive(Default)]
pub struct Encoder {
    buf: Vec<u8>,
}

impl Encoder {
    /// An empty body.
    pub fn new() -> Encoder {
        Encoder::default()
    }

    /// The bytes written so far.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// Number of bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Writes a little-endian `i32`.
    pub fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Writes a little-endian `u32`.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Writes a little-endian `u64`.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Writes a little-endian `i64`.
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Writes a `u64` length, then the bytes.
    pub fn bytes(&mut self, v: &[u8]) {
        self.u64(v.len() as u64);
        self.buf.extend_from_slice(v);
    }

    /// Writes raw bytes with no length.
    pub fn raw(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }
}

/// Reads little-endian scalars and byte strings from a packet body, checking every size.
pub struct Decoder<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    /// A decoder at the start of `data`.
    pub fn new(data: &'a [u8]) -> Decoder<'a> {
        Decoder { data, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The current offset.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// An error at the current offset.
    pub fn error(&self, what: impl Into<String>) -> DecodeError {
        DecodeError {
            what: what.into(),
            offset: self.pos,
        }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(self.error(format!(
                "{what} needs {n} bytes but only {} remain",
                self.remaining()
            )));
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], DecodeError> {
        let bytes = self.take(N, what)?;
        Ok(bytes.try_into().expect("take returned N bytes"))
    }

    /// Reads a little-endian `i32`.
    pub fn i32(&mut self, what: &str) -> Result<i32, DecodeError> {
        self.array(what).map(i32::from_le_bytes)
    }

    /// Reads a little-endian `u32`.
    pub fn u32(&mut self, what: &str) -> Result<u32, DecodeError> {
        self.array(what).map(u32::from_le_bytes)
    }

    /// Reads a little-endian `u64`.
    pub fn u64(&mut self, what: &str) -> Result<u64, DecodeError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// Reads a little-endian `i64`.
    pub fn i64(&mut self, what: &str) -> Result<i64, DecodeError> {
        self.array(what).map(i64::from_le_bytes)
    }

    /// Reads a `u64` length and that many bytes.
    pub fn bytes(&mut self, what: &str) -> Result<&'a [u8], DecodeError> {
        let len = self.u64(what)?;
        match usize::try_from(len) {
            Ok(len) if len <= self.remaining() => self.take(len, what),
            _ => Err(self.error(format!(
                "{what} claims {len} bytes but only {} remain",
                self.remaining()
            ))),
        }
    }

    /// Fails unless every byte was read.
    pub fn finish(&self, what: &str) -> Result<(), DecodeError> {
        if self.remaining() != 0 {
            return Err(self.error(format!(
                "{} unexpected bytes after the {what}",
                self.remaining()
            )));
        }
        Ok(())
    }
}
