//! The memory layout shared with C++ header code: size and offset constants, the jump table
//! [`PROBE`], the `repr(C)` structs of the common object part, pairs and dense items, and the
//! reads of the common part (layout, size).

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::ptr;

use crate::abi::TVMFFIAny;
use crate::object::Object;

/// Bit 63 of `slots_`: the table uses the small (inline, linear) layout.
pub(super) const SMALL_FLAG: u64 = 1 << 63;
/// Most entries a small table holds.
pub(super) const SMALL_MAX: u64 = 4;
/// Slot count of a new small table.
pub(super) const SMALL_INIT: u64 = 2;
/// Inline pairs every object made here has room for.
pub(super) const INLINE_KVS: usize = 4;
/// Size of the common part of the object (header + data/size/slots/deleter).
pub(super) const BASE_SIZE: usize = 56;
/// Size of a dense object (common part + fib shift + iteration list ends).
pub(super) const DENSE_OBJECT_SIZE: usize = 80;
/// Offset of `fib_shift_` in a dense object.
pub(super) const OFF_FIB_SHIFT: usize = 56;
/// Offset of `iter_list_head_` in a dense object.
pub(super) const OFF_HEAD: usize = 64;
/// Offset of `iter_list_tail_` in a dense object.
pub(super) const OFF_TAIL: usize = 72;
/// Slots per block.
pub(super) const BLOCK_CAP: u64 = 16;
/// Bytes of one item: key, value, prev, next.
pub(super) const ITEM_SIZE: usize = 48;
/// Bytes of one block: 16 metadata bytes and 16 items.
pub(super) const BLOCK_SIZE: usize = 16 + BLOCK_CAP as usize * ITEM_SIZE;
/// Metadata of an empty slot.
pub(super) const META_EMPTY: u8 = 0xFF;
/// Metadata of an empty slot that must not be filled while a chain is being relocated.
pub(super) const META_PROTECTED: u8 = 0xFE;
/// Metadata bit telling a non-head chain member from a chain head.
pub(super) const META_TAIL_BIT: u8 = 0x80;
/// Metadata bits holding the jump index into [`PROBE`] (0: end of chain).
pub(super) const META_JUMP_MASK: u8 = 0x7F;
/// "No slot" in the iteration list.
pub(super) const NO_SLOT: u64 = u64::MAX;
/// Fibonacci hashing multiplier (2^64 / golden ratio).
pub(super) const FIB_MULTIPLIER: u64 = 11_400_714_819_323_198_485;
/// Smallest dense slot count.
pub(super) const DENSE_MIN_SLOTS: u64 = 8;

/// The large jump distances that follow the triangle numbers in [`PROBE`].
const PROBE_LARGE: [u64; 43] = [
    8515,
    19110,
    42778,
    96141,
    216153,
    486591,
    1092981,
    2458653,
    5532801,
    12442566,
    27993903,
    62983476,
    141717030,
    318844378,
    717352503,
    1614057336,
    3631522476,
    8170957530,
    18384510628,
    41364789378,
    93070452520,
    209408356380,
    471168559170,
    1060128894105,
    2385289465695,
    5366898840628,
    12075518705635,
    27169915244790,
    61132312065111,
    137547689707000,
    309482283181501,
    696335127828753,
    1566753995631385,
    3525196511162271,
    7931691992677701,
    17846306936293605,
    40154190677507445,
    90346928918121501,
    203280589587557251,
    457381325854679626,
    1029107982097042876,
    2315492959180353330,
    5209859154120846435,
];

const fn build_probe() -> [u64; 126] {
    let mut table = [0u64; 126];
    let mut i = 0;
    while i < 16 {
        table[i] = i as u64;
        i += 1;
    }
    // Triangle numbers T(6) = 21 ..= T(72) = 2628.
    let mut n = 6u64;
    while n <= 72 {
        table[i] = n * (n + 1) / 2;
        i += 1;
        n += 1;
    }
    let mut k = 0;
    while k < PROBE_LARGE.len() {
        table[i] = PROBE_LARGE[k];
        i += 1;
        k += 1;
    }
    assert!(i == 126);
    table
}

/// Jump distances of the dense layout: the next chain member after slot `i` with jump index `j`
/// is slot `(i + PROBE[j]) mod slots`. Entry 0 means "end of chain".
pub const PROBE: [u64; 126] = build_probe();

/// Frees a buffer passed as a `data_` pointer.
pub type DataDeleter = Option<unsafe extern "C" fn(*mut c_void)>;

/// The fields of the common part after the header.
#[repr(C)]
pub(super) struct MapCell {
    pub(super) data: *mut c_void,
    pub(super) size: u64,
    pub(super) slots: u64,
    pub(super) data_deleter: DataDeleter,
}

/// The common layout of maps and dicts (56 bytes): header, then `data_`, `size_`, `slots_` and
/// `data_deleter_`. Layout-specific fields follow and are reached through raw pointers only.
#[repr(C)]
pub struct MapBaseObj {
    pub(super) base: Object,
    pub(super) cell: UnsafeCell<MapCell>,
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<MapBaseObj>() == BASE_SIZE);
    assert!(offset_of!(MapBaseObj, cell) == 24);
    assert!(offset_of!(MapCell, size) == 8);
    assert!(offset_of!(MapCell, slots) == 16);
    assert!(offset_of!(MapCell, data_deleter) == 24);
    assert!(size_of::<Kv>() == 32);
    assert!(size_of::<Item>() == ITEM_SIZE);
    assert!(BLOCK_SIZE == 784);
    assert!(BASE_SIZE + INLINE_KVS * size_of::<Kv>() >= DENSE_OBJECT_SIZE);
};

/// A key-value pair as stored in both layouts.
#[repr(C)]
pub(super) struct Kv {
    pub(super) key: TVMFFIAny,
    pub(super) value: TVMFFIAny,
}

/// A dense slot's item.
#[repr(C)]
pub(super) struct Item {
    pub(super) kv: Kv,
    pub(super) prev: u64,
    pub(super) next: u64,
}

/// The common fields of a map object.
///
/// # Safety
/// `p` points at a live map object.
#[inline]
pub(super) unsafe fn cell(p: *mut MapBaseObj) -> *mut MapCell {
    // SAFETY: per the caller; the cell is an `UnsafeCell`, so writing through it is allowed.
    unsafe { UnsafeCell::raw_get(ptr::addr_of!((*p).cell)) }
}

/// Whether the object uses the small layout.
///
/// # Safety
/// `p` points at a live map object.
#[inline]
pub(super) unsafe fn is_small(p: *mut MapBaseObj) -> bool {
    // SAFETY: per the caller.
    unsafe { (*cell(p)).slots & SMALL_FLAG != 0 }
}

/// Number of entries.
///
/// # Safety
/// `p` points at a live map object.
#[inline]
pub(super) unsafe fn raw_len(p: *mut MapBaseObj) -> usize {
    // SAFETY: per the caller.
    unsafe { (*cell(p)).size as usize }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_table_grows_from_unit_steps_through_triangle_numbers_to_large_jumps() {
        // Evaluated at run time here (PROBE itself is computed at compile time).
        let table = build_probe();
        assert_eq!(table, PROBE);
        let first: Vec<u64> = (0..16).collect();
        assert_eq!(table[..16], first[..]);
        assert_eq!((table[16], table[16 + 66]), (21, 2628), "T(6) ..= T(72)");
        assert_eq!(table[16 + 67..], PROBE_LARGE[..]);
        assert!(table.windows(2).all(|w| w[0] < w[1]), "strictly increasing");
    }
}
