//! The binary container of serialized device modules (TVM's `support::Stream`): little-endian
//! integers, strings and byte strings as a `u64` length and the bytes, sequences as a `u64`
//! count and the items, maps as a `u64` count and (key, value) pairs.

use tvm_ffi::abi::DLDataType;
use tvm_ffi::{DataType, Error, ErrorKind, Result};

/// Reads a serialized module, refusing truncated data and counts the data cannot hold.
pub struct BinaryReader<'a> {
    data: &'a [u8],
    offset: usize,
    /// What is being read, for messages ("vulkan module").
    what: &'a str,
}

impl<'a> BinaryReader<'a> {
    /// A reader of `data`, which `what` names in errors.
    pub fn new(data: &'a [u8], what: &'a str) -> BinaryReader<'a> {
        BinaryReader {
            data,
            offset: 0,
            what,
        }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.offset
    }

    fn error(&self, message: String) -> Error {
        Error::new(
            ErrorKind::ValueError,
            format!("malformed {} at byte {}: {message}", self.what, self.offset),
        )
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.error(format!(
                "needs {n} more bytes, {} are left",
                self.remaining()
            )));
        }
        let out = &self.data[self.offset..self.offset + n];
        self.offset += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.bytes(N)?.try_into().expect("N bytes were taken"))
    }

    /// A `u32`.
    pub fn u32(&mut self) -> Result<u32> {
        self.array().map(u32::from_le_bytes)
    }

    /// An `i32`.
    pub fn i32(&mut self) -> Result<i32> {
        self.array().map(i32::from_le_bytes)
    }

    /// A `u64`.
    pub fn u64(&mut self) -> Result<u64> {
        self.array().map(u64::from_le_bytes)
    }

    /// A count of items that take at least `min_item_bytes` each, checked against the bytes
    /// left before anything is allocated for them.
    pub fn count(&mut self, min_item_bytes: usize) -> Result<usize> {
        let count = self.u64()?;
        let fits = usize::try_from(count)
            .ok()
            .filter(|c| c.saturating_mul(min_item_bytes.max(1)) <= self.remaining());
        fits.ok_or_else(|| {
            self.error(format!(
                "a count of {count} items does not fit in the {} bytes left",
                self.remaining()
            ))
        })
    }

    /// A byte string.
    pub fn byte_string(&mut self) -> Result<&'a [u8]> {
        let len = self.count(1)?;
        self.bytes(len)
    }

    /// A UTF-8 string.
    pub fn string(&mut self) -> Result<String> {
        let bytes = self.byte_string()?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.error("a string is not UTF-8".into()))
    }

    /// A sequence of strings.
    pub fn strings(&mut self) -> Result<Vec<String>> {
        let count = self.count(8)?;
        (0..count).map(|_| self.string()).collect()
    }

    /// A data type (code, bits, lanes).
    pub fn dtype(&mut self) -> Result<DataType> {
        let [code, bits, lanes_low, lanes_high] = self.array()?;
        Ok(DataType(DLDataType {
            code,
            bits,
            lanes: u16::from_le_bytes([lanes_low, lanes_high]),
        }))
    }

    /// Fails unless every byte was read.
    pub fn finish(&self) -> Result<()> {
        match self.remaining() {
            0 => Ok(()),
            left => Err(self.error(format!("{left} bytes follow the end"))),
        }
    }
}

/// Writes the binary container [`BinaryReader`] reads.
#[derive(Default)]
pub struct BinaryWriter {
    data: Vec<u8>,
}

impl BinaryWriter {
    /// An empty writer.
    pub fn new() -> BinaryWriter {
        BinaryWriter::default()
    }

    /// The bytes written.
    pub fn into_bytes(self) -> Vec<u8> {
        self.data
    }

    /// Raw bytes, with no length.
    pub fn bytes(&mut self, bytes: &[u8]) {
        self.data.extend_from_slice(bytes);
    }

    /// A `u32`.
    pub fn u32(&mut self, value: u32) {
        self.bytes(&value.to_le_bytes());
    }

    /// An `i32`.
    pub fn i32(&mut self, value: i32) {
        self.bytes(&value.to_le_bytes());
    }

    /// A `u64` (counts and lengths).
    pub fn u64(&mut self, value: u64) {
        self.bytes(&value.to_le_bytes());
    }

    /// A byte string.
    pub fn byte_string(&mut self, bytes: &[u8]) {
        self.u64(bytes.len() as u64);
        self.bytes(bytes);
    }

    /// A string.
    pub fn string(&mut self, text: &str) {
        self.byte_string(text.as_bytes());
    }

    /// A sequence of strings.
    pub fn strings(&mut self, texts: &[String]) {
        self.u64(texts.len() as u64);
        for text in texts {
            self.string(text);
        }
    }

    /// A data type.
    pub fn dtype(&mut self, dtype: DataType) {
        let DLDataType { code, bits, lanes } = dtype.0;
        self.bytes(&[code, bits]);
        self.bytes(&lanes.to_le_bytes());
    }
}
