//! [`Input`]: structured values read from the fuzz bytes. Reading never fails: once the bytes
//! run out every read returns zeros, so any byte string decodes to some input.

use tvm_ffi::abi::DLDataType;

/// Integers that break arithmetic: zero, ±1, the edges of every signed and unsigned width.
pub const INTERESTING_I64: [i64; 20] = [
    0,
    1,
    -1,
    2,
    3,
    7,
    8,
    64,
    -2,
    i64::MIN,
    i64::MAX,
    i64::MIN + 1,
    i64::MAX - 1,
    1 << 62,
    -(1 << 62),
    i32::MAX as i64,
    i32::MIN as i64,
    u32::MAX as i64,
    1 << 31,
    1 << 32,
];

/// A cursor over the fuzz bytes.
pub struct Input<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    /// A cursor at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Input { bytes, pos: 0 }
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        &self.bytes[self.pos.min(self.bytes.len())..]
    }

    /// The next byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        let b = self.bytes.get(self.pos).copied().unwrap_or(0);
        self.pos = self.pos.saturating_add(1);
        b
    }

    /// The next `N` bytes, zero-padded past the end.
    pub fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        for b in &mut out {
            *b = self.u8();
        }
        out
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.array())
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.array())
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }

    /// A bool from the low bit of one byte.
    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    /// A value in `0..n` (`n` at most 256; 0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        usize::from(self.u8()) % n
    }

    /// A value in `lo..=hi` from one or two bytes.
    pub fn range_i64(&mut self, lo: i64, hi: i64) -> i64 {
        let span = hi.wrapping_sub(lo) as u64 + 1;
        let raw = if span <= 256 {
            u64::from(self.u8())
        } else {
            u64::from(self.u16())
        };
        lo.wrapping_add((raw % span) as i64)
    }

    /// An `i64` that is usually small (`small_lo..=small_hi`), sometimes one of
    /// [`INTERESTING_I64`] and sometimes eight raw bytes: one selector byte, then the value.
    pub fn i64_mostly(&mut self, small_lo: i64, small_hi: i64) -> i64 {
        match self.u8() % 8 {
            0 => INTERESTING_I64[self.below(INTERESTING_I64.len())],
            1 => self.u64() as i64,
            _ => self.range_i64(small_lo, small_hi),
        }
    }

    /// A dtype: one time in `raw_one_in` three raw fields (any code, bits and lanes), else a
    /// code below `codes` with bits and lanes from the tables.
    pub fn dtype(&mut self, raw_one_in: u8, codes: u8, bits: &[u8], lanes: &[u16]) -> DLDataType {
        if self.u8().is_multiple_of(raw_one_in) {
            DLDataType {
                code: self.u8(),
                bits: self.u8(),
                lanes: self.u16(),
            }
        } else {
            DLDataType {
                code: self.u8() % codes,
                bits: bits[self.below(bits.len())],
                lanes: lanes[self.below(lanes.len())],
            }
        }
    }

    /// Up to `max` bytes: a length byte, then that many bytes (fewer at the end).
    pub fn bytes(&mut self, max: usize) -> &'a [u8] {
        let n = self.below(max + 1);
        let start = self.pos.min(self.bytes.len());
        let end = start.saturating_add(n).min(self.bytes.len());
        self.pos = start.saturating_add(n);
        &self.bytes[start..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_past_the_end_are_zero() {
        let mut input = Input::new(&[1, 2]);
        assert_eq!(input.u16(), 0x0201);
        assert!(input.is_empty());
        assert_eq!(input.u64(), 0);
        assert_eq!(input.bytes(8), b"");
        assert_eq!(input.range_i64(-3, 3), -3);
    }

    #[test]
    fn ranges_stay_inside() {
        for b in 0..=255u8 {
            let v = Input::new(&[b, b]).range_i64(-5, 300);
            assert!((-5..=300).contains(&v), "{v}");
            assert!(Input::new(&[b]).below(7) < 7);
        }
    }
}
