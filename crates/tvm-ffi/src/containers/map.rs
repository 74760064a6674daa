//! `Map` (`ffi.Map`, index 72: immutable, copy-on-write) and `Dict` (`ffi.Dict`, index 76:
//! shared-mutable), laid out as the hash table of the original runtime so that C++ header code
//! can probe, iterate and mutate them inline.
//!
//! Layout (offsets from the object header):
//!
//! | Off | Field | Meaning |
//! |---:|---|---|
//! | 24 | `data_` | slot storage |
//! | 32 | `size_` | number of entries |
//! | 40 | `slots_` | bit 63 set: small layout; low bits: slot count |
//! | 48 | `data_deleter_` | frees `data_` when non-NULL |
//! | 56 | `fib_shift_` (u32) | dense only |
//! | 64 | `iter_list_head_` | dense only: first slot in insertion order (`u64::MAX`: none) |
//! | 72 | `iter_list_tail_` | dense only: last slot in insertion order |
//!
//! A small table (at most 4 entries) keeps `{key, value}` pairs inline right after the 56-byte
//! common part, in insertion order. A dense table points `data_` at `malloc`ed blocks of 16
//! metadata bytes followed by 16 items (`{key, value, prev, next}`, 48 bytes). A key lives in the
//! chain whose head sits in its home slot `(hash * 11400714819323198485) >> fib_shift_`; the low
//! 7 metadata bits index [`PROBE`] to find the next chain member, bit 7 tells chain members from
//! heads. Iteration follows the `prev`/`next` list, which keeps insertion order across erasure
//! and rehashing.
//!
//! Objects made here always have room for 4 inline pairs (184 bytes), so a small table can grow
//! to 4 slots and switch to the dense layout without moving the object; objects made elsewhere
//! are handled with whatever room their slot count proves.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ptr::{self, NonNull, addr_of_mut};
use std::sync::atomic::{AtomicU64, Ordering, fence};

use crate::abi::{TVMFFIAny, TVMFFIObject, kTVMFFIDict, kTVMFFIMap, kTVMFFIObjectBothOne};
use crate::any::{Any, AnyView, TryFromAnyView};
use crate::object::{Object, ObjectCore, ObjectRef};

use super::hash::{any_equal, any_hash};

// ---------------------------------------------------------------------------------------------
// Layout constants
// ---------------------------------------------------------------------------------------------

/// Bit 63 of `slots_`: the table uses the small (inline, linear) layout.
const SMALL_FLAG: u64 = 1 << 63;
/// Most entries a small table holds.
const SMALL_MAX: u64 = 4;
/// Slot count of a new small table.
const SMALL_INIT: u64 = 2;
/// Inline pairs every object made here has room for.
const INLINE_KVS: usize = 4;
/// Size of the common part of the object (header + data/size/slots/deleter).
const BASE_SIZE: usize = 56;
/// Size of a dense object (common part + fib shift + iteration list ends).
const DENSE_OBJECT_SIZE: usize = 80;
/// Offset of `fib_shift_` in a dense object.
const OFF_FIB_SHIFT: usize = 56;
/// Offset of `iter_list_head_` in a dense object.
const OFF_HEAD: usize = 64;
/// Offset of `iter_list_tail_` in a dense object.
const OFF_TAIL: usize = 72;
/// Slots per block.
const BLOCK_CAP: u64 = 16;
/// Bytes of one item: key, value, prev, next.
const ITEM_SIZE: usize = 48;
/// Bytes of one block: 16 metadata bytes and 16 items.
const BLOCK_SIZE: usize = 16 + BLOCK_CAP as usize * ITEM_SIZE;
/// Metadata of an empty slot.
const META_EMPTY: u8 = 0xFF;
/// Metadata of an empty slot that must not be filled while a chain is being relocated.
const META_PROTECTED: u8 = 0xFE;
/// Metadata bit telling a non-head chain member from a chain head.
const META_TAIL_BIT: u8 = 0x80;
/// Metadata bits holding the jump index into [`PROBE`] (0: end of chain).
const META_JUMP_MASK: u8 = 0x7F;
/// "No slot" in the iteration list.
const NO_SLOT: u64 = u64::MAX;
/// Fibonacci hashing multiplier (2^64 / golden ratio).
const FIB_MULTIPLIER: u64 = 11_400_714_819_323_198_485;
/// Smallest dense slot count.
const DENSE_MIN_SLOTS: u64 = 8;

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

// ---------------------------------------------------------------------------------------------
// The object
// ---------------------------------------------------------------------------------------------

/// Frees a buffer passed as a `data_` pointer.
pub type DataDeleter = Option<unsafe extern "C" fn(*mut c_void)>;

/// The fields of the common part after the header.
#[repr(C)]
struct MapCell {
    data: *mut c_void,
    size: u64,
    slots: u64,
    data_deleter: DataDeleter,
}

/// The common layout of maps and dicts (56 bytes): header, then `data_`, `size_`, `slots_` and
/// `data_deleter_`. Layout-specific fields follow and are reached through raw pointers only.
#[repr(C)]
pub struct MapBaseObj {
    base: Object,
    cell: UnsafeCell<MapCell>,
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
struct Kv {
    key: TVMFFIAny,
    value: TVMFFIAny,
}

/// A dense slot's item.
#[repr(C)]
struct Item {
    kv: Kv,
    prev: u64,
    next: u64,
}

impl Drop for MapBaseObj {
    fn drop(&mut self) {
        let cell = self.cell.get_mut();
        if !cell.data.is_null() {
            if cell.slots & SMALL_FLAG != 0 {
                let kvs = cell.data.cast::<Kv>();
                for i in 0..cell.size as usize {
                    // SAFETY: the first `size` inline pairs are initialized owning values,
                    // dropped exactly once here.
                    unsafe { drop_kv(ptr::read(kvs.add(i))) };
                }
            } else {
                let dense = Dense {
                    data: cell.data.cast(),
                    slots: cell.slots,
                    shift: 0,
                    size: cell.size,
                    head: NO_SLOT,
                    tail: NO_SLOT,
                };
                for i in 0..dense.slots {
                    // SAFETY: `data` holds `slots` slots; live ones hold owning pairs, dropped
                    // exactly once here.
                    unsafe {
                        if is_live(dense.meta(i)) {
                            drop_kv(ptr::read(addr_of_mut!((*dense.item(i)).kv)));
                        }
                    }
                }
            }
        }
        if let Some(deleter) = cell.data_deleter {
            // SAFETY: whoever installed the deleter made it free this buffer; the elements
            // were released above.
            unsafe { deleter(cell.data) };
        }
    }
}

/// Drops the owning values of a pair.
///
/// # Safety
/// `kv` holds two owning values that nothing else owns.
unsafe fn drop_kv(kv: Kv) {
    // SAFETY: per the caller.
    unsafe {
        drop(Any::from_raw(kv.key));
        drop(Any::from_raw(kv.value));
    }
}

/// Adds the reference an owning copy of `v` needs, returning the copy.
///
/// # Safety
/// `v` is a valid owning value.
unsafe fn clone_raw(v: &TVMFFIAny) -> TVMFFIAny {
    // SAFETY: the borrowed value is not dropped (ManuallyDrop); the clone gains its reference.
    let borrowed = ManuallyDrop::new(unsafe { Any::from_raw(*v) });
    Any::clone(&borrowed).into_raw()
}

/// Deleter of objects made here (by [`alloc_empty`]): lets them be recognised (and so known to have room for
/// [`INLINE_KVS`] inline pairs).
unsafe extern "C" fn map_object_deleter(obj: *mut c_void, flags: c_int) {
    // SAFETY: the object is a `MapBaseObj` in a `calloc` block made here; nested releases are
    // queued like those of every object made by this crate.
    unsafe { crate::object::release_nested(obj, flags, crate::object::destroy::<MapBaseObj>) }
}

/// The deleter installed in (and compared against for) objects made here, reified once so that
/// every use sees the same address.
static OWN_DELETER: unsafe extern "C" fn(*mut c_void, c_int) = map_object_deleter;

/// `data_deleter_` of the dense blocks made here (`malloc`ed).
unsafe extern "C" fn free_blocks(data: *mut c_void) {
    // SAFETY: dense blocks come from `libc::malloc`; `free(NULL)` is a no-op.
    unsafe { libc::free(data) };
}

/// The common fields of a map object.
///
/// # Safety
/// `p` points at a live map object.
#[inline]
unsafe fn cell(p: *mut MapBaseObj) -> *mut MapCell {
    // SAFETY: per the caller; the cell is an `UnsafeCell`, so writing through it is allowed.
    unsafe { UnsafeCell::raw_get(ptr::addr_of!((*p).cell)) }
}

/// Whether the object was made here (and so has room for [`INLINE_KVS`] inline pairs).
///
/// # Safety
/// `p` points at a live map object.
unsafe fn is_own_object(p: *mut MapBaseObj) -> bool {
    // SAFETY: every object starts with its header.
    let deleter = unsafe { (*p.cast::<TVMFFIObject>()).deleter };
    deleter.is_some_and(|d| ptr::fn_addr_eq(d, OWN_DELETER))
}

/// How many inline pairs the small object at `p` has room for.
///
/// # Safety
/// `p` points at a live map object in the small layout.
unsafe fn small_room(p: *mut MapBaseObj) -> u64 {
    // SAFETY: per the caller.
    unsafe {
        if is_own_object(p) {
            INLINE_KVS as u64
        } else {
            (*cell(p)).slots & !SMALL_FLAG
        }
    }
}

/// Allocates an empty small object (room for [`INLINE_KVS`] pairs, 2 slots announced) with
/// [`map_object_deleter`], zero-filled by `calloc`.
fn alloc_empty(type_index: i32) -> NonNull<MapBaseObj> {
    let size = BASE_SIZE + INLINE_KVS * std::mem::size_of::<Kv>();
    // SAFETY: calloc with a non-zero size; the result is checked for NULL below.
    let block = unsafe { libc::calloc(1, size) }.cast::<MapBaseObj>();
    let Some(obj) = NonNull::new(block) else {
        std::alloc::handle_alloc_error(std::alloc::Layout::from_size_align(size, 16).unwrap());
    };
    let p = obj.as_ptr();
    // SAFETY: the block is large enough and malloc-aligned; the value is written before the
    // header fields are filled in, and the inline-pair pointer is derived from the allocation
    // so that it may reach the bytes after the common part.
    unsafe {
        p.write(MapBaseObj {
            base: Object::header(),
            cell: UnsafeCell::new(MapCell {
                data: p.cast::<u8>().add(BASE_SIZE).cast(),
                size: 0,
                slots: SMALL_FLAG | SMALL_INIT,
                data_deleter: None,
            }),
        });
        let header = p.cast::<TVMFFIObject>();
        (*header).combined_ref_count = AtomicU64::new(kTVMFFIObjectBothOne);
        (*header).type_index = type_index;
        (*header).__padding = 0;
        (*header).deleter = Some(OWN_DELETER);
    }
    obj
}

// ---------------------------------------------------------------------------------------------
// Dense tables
// ---------------------------------------------------------------------------------------------

#[inline]
fn is_live(meta: u8) -> bool {
    meta != META_EMPTY && meta != META_PROTECTED
}

#[inline]
fn with_jump(meta: u8, jump: u8) -> u8 {
    (meta & META_TAIL_BIT) | jump
}

/// A working copy of a dense table's fields; the blocks are shared with the object (or owned
/// by the copy while it is being built).
#[derive(Clone, Copy)]
struct Dense {
    data: *mut u8,
    slots: u64,
    shift: u32,
    size: u64,
    head: u64,
    tail: u64,
}

/// Smallest power-of-two slot count for holding `cap` entries (at least twice as many slots
/// unless that means another doubling), as the original sizes tables built from a range.
fn table_size_for(cap: u64) -> u64 {
    let mut slots = 1u64;
    let mut c = cap;
    while c != 0 {
        slots <<= 1;
        c >>= 1;
    }
    if slots < cap.saturating_mul(2) {
        slots <<= 1;
    }
    slots.max(DENSE_MIN_SLOTS)
}

impl Dense {
    /// Reads the fields of a dense object.
    ///
    /// # Safety
    /// `p` points at a live map object in the dense layout.
    unsafe fn load(p: *mut MapBaseObj) -> Dense {
        // SAFETY: per the caller; a dense object is at least 80 bytes.
        unsafe {
            let c = cell(p);
            let bytes = p.cast::<u8>();
            Dense {
                data: (*c).data.cast(),
                slots: (*c).slots,
                shift: bytes.add(OFF_FIB_SHIFT).cast::<u32>().read(),
                size: (*c).size,
                head: bytes.add(OFF_HEAD).cast::<u64>().read(),
                tail: bytes.add(OFF_TAIL).cast::<u64>().read(),
            }
        }
    }

    /// Writes the fields back (all but `data_deleter_`), switching the object to the dense
    /// layout if it was small.
    ///
    /// # Safety
    /// `p` points at a live map object of at least 80 bytes whose inline pairs (if any) were
    /// moved out.
    unsafe fn store(&self, p: *mut MapBaseObj) {
        // SAFETY: per the caller.
        unsafe {
            let c = cell(p);
            let bytes = p.cast::<u8>();
            (*c).data = self.data.cast();
            (*c).size = self.size;
            (*c).slots = self.slots;
            bytes.add(OFF_FIB_SHIFT).cast::<u32>().write(self.shift);
            bytes.add(OFF_FIB_SHIFT + 4).cast::<u32>().write(0);
            bytes.add(OFF_HEAD).cast::<u64>().write(self.head);
            bytes.add(OFF_TAIL).cast::<u64>().write(self.tail);
        }
    }

    /// A new table with `slots` empty slots (`slots` a power of two ≥ 2), blocks from `malloc`.
    fn new_empty(slots: u64) -> Dense {
        debug_assert!(slots.is_power_of_two() && slots >= 2);
        let blocks = slots.div_ceil(BLOCK_CAP) as usize;
        let bytes = blocks.checked_mul(BLOCK_SIZE).expect("map size overflows");
        // SAFETY: a non-zero size; the result is checked for NULL below.
        let data = unsafe { libc::malloc(bytes) }.cast::<u8>();
        if data.is_null() {
            std::alloc::handle_alloc_error(std::alloc::Layout::from_size_align(bytes, 8).unwrap());
        }
        for b in 0..blocks {
            // SAFETY: block `b` lies within the allocation; its 16 metadata bytes are written.
            unsafe { ptr::write_bytes(data.add(b * BLOCK_SIZE), META_EMPTY, BLOCK_CAP as usize) };
        }
        Dense {
            data,
            slots,
            shift: 64 - slots.trailing_zeros(),
            size: 0,
            head: NO_SLOT,
            tail: NO_SLOT,
        }
    }

    #[inline]
    fn meta_ptr(&self, i: u64) -> *mut u8 {
        self.data
            .wrapping_add((i / BLOCK_CAP) as usize * BLOCK_SIZE + (i % BLOCK_CAP) as usize)
    }

    #[inline]
    fn item(&self, i: u64) -> *mut Item {
        self.data
            .wrapping_add(
                (i / BLOCK_CAP) as usize * BLOCK_SIZE
                    + BLOCK_CAP as usize
                    + (i % BLOCK_CAP) as usize * ITEM_SIZE,
            )
            .cast()
    }

    /// # Safety
    /// `i < slots` and the blocks are valid.
    #[inline]
    unsafe fn meta(&self, i: u64) -> u8 {
        // SAFETY: per the caller.
        unsafe { *self.meta_ptr(i) }
    }

    /// # Safety
    /// `i < slots` and the blocks are valid.
    #[inline]
    unsafe fn set_meta(&self, i: u64, meta: u8) {
        // SAFETY: per the caller.
        unsafe { *self.meta_ptr(i) = meta };
    }

    /// The key of a live slot.
    ///
    /// # Safety
    /// `i < slots`, the blocks are valid and slot `i` is live; the reference is used only while
    /// the slot stays unchanged.
    #[inline]
    unsafe fn key<'a>(&self, i: u64) -> &'a TVMFFIAny {
        // SAFETY: per the caller.
        unsafe { &(*self.item(i)).kv.key }
    }

    #[inline]
    fn home(&self, hash: u64) -> u64 {
        let h = hash.wrapping_mul(FIB_MULTIPLIER);
        let h = if self.shift >= 64 { 0 } else { h >> self.shift };
        h & (self.slots - 1)
    }

    #[inline]
    fn step(&self, i: u64, jump: u8) -> u64 {
        i.wrapping_add(PROBE[jump as usize]) & (self.slots - 1)
    }

    fn is_full(&self) -> bool {
        u128::from(self.size + 1) * 100 > u128::from(self.slots) * 99
    }

    /// The slot holding `key`, if any.
    ///
    /// # Safety
    /// The blocks are valid and consistent.
    unsafe fn find(&self, key: &TVMFFIAny, hash: u64) -> Option<u64> {
        if self.slots == 0 || self.data.is_null() {
            return None;
        }
        let mut i = self.home(hash);
        // SAFETY: every index visited is masked below `slots`; live slots hold valid keys.
        unsafe {
            let mut meta = self.meta(i);
            if !is_live(meta) || meta & META_TAIL_BIT != 0 {
                return None;
            }
            loop {
                if any_equal(key, self.key(i)) {
                    return Some(i);
                }
                let jump = meta & META_JUMP_MASK;
                if jump == 0 {
                    return None;
                }
                i = self.step(i, jump);
                meta = self.meta(i);
            }
        }
    }

    /// The first empty (not protected) slot reachable from `from` by one jump, with its jump
    /// index.
    ///
    /// # Safety
    /// The blocks are valid.
    unsafe fn next_empty(&self, from: u64) -> Option<(u8, u64)> {
        (1..PROBE.len() as u8).find_map(|jump| {
            let candidate = self.step(from, jump);
            // SAFETY: `candidate` is masked below `slots`.
            (unsafe { self.meta(candidate) } == META_EMPTY).then_some((jump, candidate))
        })
    }

    /// The chain member just before the non-head slot `i`.
    ///
    /// # Safety
    /// The blocks are valid and consistent; slot `i` is a live non-head member.
    unsafe fn find_prev(&self, i: u64) -> u64 {
        // SAFETY: per the caller, `i`'s chain starts at the home slot of its key and reaches it.
        unsafe {
            let mut prev = self.home(any_hash(self.key(i)));
            loop {
                let jump = self.meta(prev) & META_JUMP_MASK;
                debug_assert!(jump != 0, "broken map chain");
                let next = self.step(prev, jump);
                if next == i {
                    return prev;
                }
                prev = next;
            }
        }
    }

    /// Appends slot `i` to the iteration list.
    ///
    /// # Safety
    /// The blocks are valid; `i` is live and not in the list.
    unsafe fn list_push_back(&mut self, i: u64) {
        // SAFETY: per the caller; list members are live slots below `slots`.
        unsafe {
            (*self.item(i)).prev = self.tail;
            (*self.item(i)).next = NO_SLOT;
            if self.tail == NO_SLOT {
                self.head = i;
            } else {
                (*self.item(self.tail)).next = i;
            }
            self.tail = i;
        }
    }

    /// Unlinks slot `i` from the iteration list.
    ///
    /// # Safety
    /// The blocks are valid; `i` is in the list.
    unsafe fn list_remove(&mut self, i: u64) {
        // SAFETY: per the caller; list members are live slots below `slots`.
        unsafe {
            let (prev, next) = ((*self.item(i)).prev, (*self.item(i)).next);
            if prev == NO_SLOT {
                self.head = next;
            } else {
                (*self.item(prev)).next = next;
            }
            if next == NO_SLOT {
                self.tail = prev;
            } else {
                (*self.item(next)).prev = prev;
            }
        }
    }

    /// Puts slot `to` at the list position of slot `from` (whose pair just moved to `to`).
    ///
    /// # Safety
    /// The blocks are valid; `from` is in the list and `to` is not.
    unsafe fn list_replace(&mut self, from: u64, to: u64) {
        // SAFETY: per the caller; list members are live slots below `slots`.
        unsafe {
            let (prev, next) = ((*self.item(from)).prev, (*self.item(from)).next);
            (*self.item(to)).prev = prev;
            (*self.item(to)).next = next;
            if prev == NO_SLOT {
                self.head = to;
            } else {
                (*self.item(prev)).next = to;
            }
            if next == NO_SLOT {
                self.tail = to;
            } else {
                (*self.item(next)).prev = to;
            }
        }
    }

    /// Fills the empty slot `i` with a bitwise copy of `key` (value None) and appends it.
    ///
    /// # Safety
    /// The blocks are valid; `i` is empty (or protected).
    unsafe fn new_entry(&mut self, i: u64, meta: u8, key: &TVMFFIAny) {
        // SAFETY: per the caller.
        unsafe {
            self.set_meta(i, meta);
            addr_of_mut!((*self.item(i)).kv).write(Kv {
                key: *key,
                value: TVMFFIAny::NONE,
            });
            self.list_push_back(i);
        }
        self.size += 1;
    }

    /// Finds `key` or makes a new entry for it. `Some((slot, true))`: a new entry whose key is a
    /// bitwise copy of `key` (the caller hands over ownership) and whose value is None;
    /// `Some((slot, false))`: the existing entry; `None`: the table must grow first (it may be
    /// partly rearranged, but its iteration list still holds every entry).
    ///
    /// # Safety
    /// The blocks are valid and consistent.
    unsafe fn try_insert(&mut self, key: &TVMFFIAny, hash: u64) -> Option<(u64, bool)> {
        if self.slots == 0 || self.data.is_null() {
            return None;
        }
        let home = self.home(hash);
        // SAFETY: indices are masked below `slots`; live slots hold valid keys.
        unsafe {
            let meta = self.meta(home);
            if meta == META_EMPTY {
                self.new_entry(home, 0, key);
                return Some((home, true));
            }
            if meta == META_PROTECTED {
                return None;
            }
            if meta & META_TAIL_BIT != 0 {
                // The home slot belongs to another chain: evict that chain's tail end.
                if self.is_full() {
                    return None;
                }
                return self.spare_head(home, key).map(|i| (i, true));
            }
            // Walk our own chain; stop at its last member.
            let mut i = home;
            let mut meta = meta;
            loop {
                if any_equal(key, self.key(i)) {
                    return Some((i, false));
                }
                let jump = meta & META_JUMP_MASK;
                if jump == 0 {
                    break;
                }
                i = self.step(i, jump);
                meta = self.meta(i);
            }
            if self.is_full() {
                return None;
            }
            let (jump, empty) = self.next_empty(i)?;
            self.new_entry(empty, META_TAIL_BIT, key);
            self.set_meta(i, with_jump(self.meta(i), jump));
            Some((empty, true))
        }
    }

    /// Makes `target` (a non-head member of another chain) the head of a new chain for `key`:
    /// the members from `target` to the end of that chain move to empty slots reachable from
    /// the member before `target`, keeping their places in the iteration list.
    ///
    /// # Safety
    /// The blocks are valid and consistent; `target` is a live non-head member.
    unsafe fn spare_head(&mut self, target: u64, key: &TVMFFIAny) -> Option<u64> {
        // SAFETY: indices are masked below `slots`; moved pairs are copied bitwise and their
        // old slots marked empty, so each pair stays owned exactly once.
        unsafe {
            let mut writer = self.find_prev(target);
            let mut reader = target;
            let mut first = true;
            loop {
                let (jump, empty) = self.next_empty(writer)?;
                let reader_meta = self.meta(reader);
                ptr::copy_nonoverlapping(
                    addr_of_mut!((*self.item(reader)).kv),
                    addr_of_mut!((*self.item(empty)).kv),
                    1,
                );
                self.set_meta(empty, META_TAIL_BIT);
                self.list_replace(reader, empty);
                // The target must stay free for the new head while the rest moves.
                self.set_meta(reader, if first { META_PROTECTED } else { META_EMPTY });
                first = false;
                self.set_meta(writer, with_jump(self.meta(writer), jump));
                writer = empty;
                let reader_jump = reader_meta & META_JUMP_MASK;
                if reader_jump == 0 {
                    break;
                }
                reader = self.step(reader, reader_jump);
            }
            self.new_entry(target, 0, key);
        }
        Some(target)
    }

    /// Unlinks slot `i` and returns its pair (ownership passes to the caller).
    ///
    /// # Safety
    /// The blocks are valid and consistent; `i` is live.
    unsafe fn erase(&mut self, i: u64) -> Kv {
        // SAFETY: indices are masked below `slots`; each pair keeps exactly one owner.
        unsafe {
            let meta = self.meta(i);
            self.size -= 1;
            if meta & META_JUMP_MASK == 0 {
                // Last of its chain: cut the link to it.
                if meta & META_TAIL_BIT != 0 {
                    let prev = self.find_prev(i);
                    self.set_meta(prev, with_jump(self.meta(prev), 0));
                }
                self.list_remove(i);
                let kv = ptr::read(addr_of_mut!((*self.item(i)).kv));
                self.set_meta(i, META_EMPTY);
                kv
            } else {
                // Move the chain's last member into `i` and drop the last slot.
                let mut prev = i;
                let mut last = self.step(i, meta & META_JUMP_MASK);
                loop {
                    let jump = self.meta(last) & META_JUMP_MASK;
                    if jump == 0 {
                        break;
                    }
                    prev = last;
                    last = self.step(last, jump);
                }
                self.list_remove(i);
                let kv = ptr::read(addr_of_mut!((*self.item(i)).kv));
                ptr::copy_nonoverlapping(
                    addr_of_mut!((*self.item(last)).kv),
                    addr_of_mut!((*self.item(i)).kv),
                    1,
                );
                self.list_replace(last, i);
                self.set_meta(last, META_EMPTY);
                self.set_meta(prev, with_jump(self.meta(prev), 0));
                kv
            }
        }
    }

    /// Moves every pair out in iteration order (the table is left to be freed without drops).
    ///
    /// # Safety
    /// The blocks are valid and the iteration list is consistent.
    unsafe fn take_in_order(&self) -> Vec<Kv> {
        let mut out = Vec::with_capacity(self.size as usize);
        let mut i = self.head;
        while i != NO_SLOT {
            // SAFETY: list members are live slots below `slots`.
            unsafe {
                out.push(ptr::read(addr_of_mut!((*self.item(i)).kv)));
                i = (*self.item(i)).next;
            }
        }
        out
    }

    /// A new table of at least `slots` slots holding `entries` (distinct keys, in order);
    /// doubles until every entry fits.
    fn build(entries: Vec<Kv>, mut slots: u64) -> Dense {
        let hashes: Vec<u64> = entries.iter().map(|kv| any_hash(&kv.key)).collect();
        loop {
            let mut table = Dense::new_empty(slots);
            let mut complete = true;
            for (kv, &hash) in entries.iter().zip(&hashes) {
                // SAFETY: the new table is valid and consistent.
                match unsafe { table.try_insert(&kv.key, hash) } {
                    Some((i, true)) => {
                        // SAFETY: slot `i` is the new entry; its None value is overwritten.
                        unsafe { (*table.item(i)).kv.value = kv.value };
                    }
                    Some((_, false)) => debug_assert!(false, "duplicate key while rehashing"),
                    None => {
                        complete = false;
                        break;
                    }
                }
            }
            if complete {
                // The pairs now live in the table; `entries` holds plain bits and frees only its
                // buffer.
                return table;
            }
            // SAFETY: the attempt holds only bitwise copies still owned by `entries`.
            unsafe { libc::free(table.data.cast()) };
            slots *= 2;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Operations on a live object (either layout)
// ---------------------------------------------------------------------------------------------

/// Whether the object uses the small layout.
///
/// # Safety
/// `p` points at a live map object.
#[inline]
unsafe fn is_small(p: *mut MapBaseObj) -> bool {
    // SAFETY: per the caller.
    unsafe { (*cell(p)).slots & SMALL_FLAG != 0 }
}

/// Number of entries.
///
/// # Safety
/// `p` points at a live map object.
#[inline]
unsafe fn raw_len(p: *mut MapBaseObj) -> usize {
    // SAFETY: per the caller.
    unsafe { (*cell(p)).size as usize }
}

/// The pair holding `key`, if any (valid until the object changes).
///
/// # Safety
/// `p` points at a live map object; `key` is a valid value.
unsafe fn find_kv(p: *mut MapBaseObj, key: &TVMFFIAny) -> Option<*mut Kv> {
    // SAFETY: per the caller; indices stay within the layout's initialized entries.
    unsafe {
        let c = cell(p);
        if is_small(p) {
            let kvs = (*c).data.cast::<Kv>();
            (0..(*c).size as usize)
                .map(|i| kvs.add(i))
                .find(|&kv| any_equal(key, &(*kv).key))
        } else {
            let table = Dense::load(p);
            table
                .find(key, any_hash(key))
                .map(|i| addr_of_mut!((*table.item(i)).kv))
        }
    }
}

/// What an insertion did.
enum Inserted {
    /// A new entry.
    New,
    /// The key was present: the old value and the unused new key, to drop once the table is
    /// consistent.
    Replaced {
        /// The previous value.
        old: Any,
        /// The key that was not stored.
        _key: Any,
    },
    /// A small object without room to grow in place: the key and value, untouched.
    NoRoom(Any, Any),
}

/// Switches a small object to the dense layout in place.
///
/// # Safety
/// `p` points at a live small map object of at least 80 bytes that may be mutated.
unsafe fn small_to_dense(p: *mut MapBaseObj) {
    // SAFETY: per the caller; the pairs are moved out before the dense fields overwrite them.
    unsafe {
        let c = cell(p);
        let kvs = (*c).data.cast::<Kv>();
        let entries: Vec<Kv> = (0..(*c).size as usize)
            .map(|i| ptr::read(kvs.add(i)))
            .collect();
        let table = Dense::build(entries, table_size_for((*c).size));
        if let Some(deleter) = (*c).data_deleter.take() {
            deleter((*c).data);
        }
        table.store(p);
        (*c).data_deleter = Some(free_blocks);
    }
}

/// Inserts or overwrites in place, growing the table (and switching layout) as needed.
///
/// # Safety
/// `p` points at a live map object that may be mutated (a dict, or a uniquely held map).
unsafe fn insert_in_place(p: *mut MapBaseObj, key: Any, value: Any) -> Inserted {
    // SAFETY: per the caller; each branch keeps every pair owned exactly once.
    unsafe {
        let c = cell(p);
        if is_small(p) {
            if let Some(kv) = find_kv(p, key.as_raw()) {
                let old = ptr::replace(addr_of_mut!((*kv).value), value.into_raw());
                return Inserted::Replaced {
                    old: Any::from_raw(old),
                    _key: key,
                };
            }
            let size = (*c).size;
            let room = small_room(p);
            if size < room.min(SMALL_MAX) {
                let announced = (*c).slots & !SMALL_FLAG;
                if size >= announced {
                    let grown = (announced * 2).max(SMALL_INIT).min(room.min(SMALL_MAX));
                    (*c).slots = SMALL_FLAG | grown.max(size + 1);
                }
                (*c).data.cast::<Kv>().add(size as usize).write(Kv {
                    key: key.into_raw(),
                    value: value.into_raw(),
                });
                (*c).size = size + 1;
                return Inserted::New;
            }
            if BASE_SIZE + room as usize * std::mem::size_of::<Kv>() < DENSE_OBJECT_SIZE {
                return Inserted::NoRoom(key, value);
            }
            small_to_dense(p);
        }
        let hash = any_hash(key.as_raw());
        let mut table = Dense::load(p);
        loop {
            match table.try_insert(key.as_raw(), hash) {
                Some((i, true)) => {
                    (*table.item(i)).kv.value = value.into_raw();
                    // The table holds the key's bits now.
                    std::mem::forget(key);
                    table.store(p);
                    return Inserted::New;
                }
                Some((i, false)) => {
                    let old =
                        ptr::replace(addr_of_mut!((*table.item(i)).kv.value), value.into_raw());
                    return Inserted::Replaced {
                        old: Any::from_raw(old),
                        _key: key,
                    };
                }
                None => {
                    let entries = table.take_in_order();
                    let grown = Dense::build(entries, (table.slots * 2).max(DENSE_MIN_SLOTS));
                    if let Some(deleter) = (*c).data_deleter {
                        deleter(table.data.cast());
                    }
                    table = grown;
                    table.store(p);
                    (*c).data_deleter = Some(free_blocks);
                }
            }
        }
    }
}

/// Removes `key`, returning its pair (to drop once the table is consistent).
///
/// # Safety
/// `p` points at a live map object that may be mutated; `key` is a valid value.
unsafe fn remove_in_place(p: *mut MapBaseObj, key: &TVMFFIAny) -> Option<Kv> {
    // SAFETY: per the caller; each branch keeps every pair owned exactly once.
    unsafe {
        let c = cell(p);
        if is_small(p) {
            let kvs = (*c).data.cast::<Kv>();
            let size = (*c).size as usize;
            let i = (0..size).find(|&i| any_equal(key, &(*kvs.add(i)).key))?;
            let kv = ptr::read(kvs.add(i));
            ptr::copy(kvs.add(i + 1), kvs.add(i), size - i - 1);
            (*c).size -= 1;
            Some(kv)
        } else {
            let mut table = Dense::load(p);
            let i = table.find(key, any_hash(key))?;
            let kv = table.erase(i);
            table.store(p);
            Some(kv)
        }
    }
}

/// Empties the table (keeping its layout and slots), returning the pairs to drop.
///
/// # Safety
/// `p` points at a live map object that may be mutated.
unsafe fn clear_in_place(p: *mut MapBaseObj) -> Vec<Kv> {
    // SAFETY: per the caller; the pairs move out and their slots become empty.
    unsafe {
        let c = cell(p);
        if is_small(p) {
            let kvs = (*c).data.cast::<Kv>();
            let out = (0..(*c).size as usize)
                .map(|i| ptr::read(kvs.add(i)))
                .collect();
            (*c).size = 0;
            out
        } else {
            let mut table = Dense::load(p);
            let mut out = Vec::with_capacity(table.size as usize);
            if !table.data.is_null() {
                for i in 0..table.slots {
                    if is_live(table.meta(i)) {
                        out.push(ptr::read(addr_of_mut!((*table.item(i)).kv)));
                    }
                    table.set_meta(i, META_EMPTY);
                }
            }
            table.size = 0;
            table.head = NO_SLOT;
            table.tail = NO_SLOT;
            table.store(p);
            out
        }
    }
}

/// A new object (made here) of type `type_index` holding the same entries, in the same order.
///
/// # Safety
/// `p` points at a live map object.
unsafe fn copy_object(p: *mut MapBaseObj, type_index: i32) -> NonNull<MapBaseObj> {
    let new = alloc_empty(type_index);
    let q = new.as_ptr();
    // SAFETY: `p` is live and `q` is fresh; every copied value gains its own reference.
    unsafe {
        let src = cell(p);
        let dst = cell(q);
        let size = (*src).size;
        if is_small(p) && size <= SMALL_MAX {
            let from = (*src).data.cast::<Kv>();
            let to = (*dst).data.cast::<Kv>();
            for i in 0..size as usize {
                let kv = &*from.add(i);
                to.add(i).write(Kv {
                    key: clone_raw(&kv.key),
                    value: clone_raw(&kv.value),
                });
            }
            let announced = ((*src).slots & !SMALL_FLAG).clamp(SMALL_INIT, SMALL_MAX);
            (*dst).slots = SMALL_FLAG | announced.max(size);
            (*dst).size = size;
        } else if !is_small(p) && !(*src).data.is_null() {
            let table = Dense::load(p);
            let blocks = table.slots.div_ceil(BLOCK_CAP) as usize;
            let mut copy = Dense::new_empty(table.slots.max(2));
            ptr::copy_nonoverlapping(table.data, copy.data, blocks * BLOCK_SIZE);
            for i in 0..table.slots {
                if is_live(copy.meta(i)) {
                    let kv = &(*copy.item(i)).kv;
                    clone_raw(&kv.key);
                    clone_raw(&kv.value);
                }
            }
            copy.shift = table.shift;
            copy.slots = table.slots;
            copy.size = table.size;
            copy.head = table.head;
            copy.tail = table.tail;
            copy.store(q);
            (*dst).data_deleter = Some(free_blocks);
        } else {
            // An unusual foreign table: rebuild entry by entry.
            let mut cursor = Cursor::start(p);
            while let Some((k, v)) = cursor.current(p) {
                let _ = insert_in_place(q, k, v);
                cursor.advance(p);
            }
        }
    }
    new
}

/// Whether two tables hold the same keys with equal values (`any_equal`), in any order.
///
/// # Safety
/// Both point at live map objects.
unsafe fn tables_equal(p: *mut MapBaseObj, q: *mut MapBaseObj) -> bool {
    // SAFETY: per the caller; the pairs found are read while both tables stay unchanged.
    unsafe {
        if p == q {
            return true;
        }
        if raw_len(p) != raw_len(q) {
            return false;
        }
        let mut cursor = Cursor::start(p);
        while let Some(kv) = cursor.current_kv(p) {
            match find_kv(q, &(*kv).key) {
                Some(other) if any_equal(&(*kv).value, &(*other).value) => {}
                _ => return false,
            }
            cursor.advance(p);
        }
        true
    }
}

// ---------------------------------------------------------------------------------------------
// Iteration
// ---------------------------------------------------------------------------------------------

/// A position in a table's insertion order. Every step re-validates against the table, so a
/// table changed behind the cursor (a dict mutated during iteration) ends or skips entries but
/// is never read out of bounds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cursor {
    small: bool,
    pos: u64,
}

impl Cursor {
    /// A cursor at the first entry of the table at `p`.
    ///
    /// # Safety
    /// `p` points at a live map object.
    pub(crate) unsafe fn start(p: *mut MapBaseObj) -> Cursor {
        // SAFETY: per the caller.
        unsafe {
            if is_small(p) {
                Cursor {
                    small: true,
                    pos: 0,
                }
            } else {
                Cursor {
                    small: false,
                    pos: Dense::load(p).head,
                }
            }
        }
    }

    /// The pair at the cursor, if it is still valid.
    ///
    /// # Safety
    /// `p` points at the live map object the cursor was started on.
    unsafe fn current_kv(&self, p: *mut MapBaseObj) -> Option<*mut Kv> {
        // SAFETY: per the caller; indices are checked against the current layout.
        unsafe {
            if is_small(p) != self.small {
                return None;
            }
            let c = cell(p);
            if self.small {
                (self.pos < (*c).size).then(|| (*c).data.cast::<Kv>().add(self.pos as usize))
            } else {
                let table = Dense::load(p);
                let valid = self.pos != NO_SLOT
                    && self.pos < table.slots
                    && !table.data.is_null()
                    && is_live(table.meta(self.pos));
                valid.then(|| addr_of_mut!((*table.item(self.pos)).kv))
            }
        }
    }

    /// Copies of the key and value at the cursor, if any.
    ///
    /// # Safety
    /// As for [`Cursor::current_kv`].
    pub(crate) unsafe fn current(&self, p: *mut MapBaseObj) -> Option<(Any, Any)> {
        // SAFETY: per the caller; the pair is valid and its values gain a reference each.
        unsafe {
            let kv = self.current_kv(p)?;
            Some((
                Any::from_raw(clone_raw(&(*kv).key)),
                Any::from_raw(clone_raw(&(*kv).value)),
            ))
        }
    }

    /// Moves to the next entry; whether there is one.
    ///
    /// # Safety
    /// As for [`Cursor::current_kv`].
    pub(crate) unsafe fn advance(&mut self, p: *mut MapBaseObj) -> bool {
        // SAFETY: per the caller.
        unsafe {
            if self.current_kv(p).is_none() {
                self.pos = NO_SLOT;
                return false;
            }
            if self.small {
                self.pos += 1;
            } else {
                self.pos = (*Dense::load(p).item(self.pos)).next;
            }
            self.current_kv(p).is_some()
        }
    }
}

/// Iterator over `(key, value)` copies in insertion order.
pub struct Iter<'a> {
    obj: *mut MapBaseObj,
    cursor: Cursor,
    _borrow: PhantomData<&'a MapBaseObj>,
}

impl<'a> Iter<'a> {
    fn new(obj: *mut MapBaseObj) -> Iter<'a> {
        // SAFETY: the caller's container keeps the object alive for `'a`.
        let cursor = unsafe { Cursor::start(obj) };
        Iter {
            obj,
            cursor,
            _borrow: PhantomData,
        }
    }
}

impl Iterator for Iter<'_> {
    type Item = (Any, Any);

    fn next(&mut self) -> Option<(Any, Any)> {
        // SAFETY: the borrowed container keeps the object alive.
        unsafe {
            let entry = self.cursor.current(self.obj)?;
            self.cursor.advance(self.obj);
            Some(entry)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------------------------

/// A lookup key: borrowed or converted.
pub enum KeyArg<'a> {
    /// A borrowed value.
    View(AnyView<'a>),
    /// A value converted for the lookup.
    Owned(Any),
}

impl KeyArg<'_> {
    fn raw(&self) -> &TVMFFIAny {
        match self {
            KeyArg::View(v) => v.as_raw(),
            KeyArg::Owned(v) => v.as_raw(),
        }
    }
}

/// Values usable as lookup keys: anything convertible into `Any` (including `Any` itself),
/// `AnyView` and `str`.
pub trait MapKey {
    /// The key as a value.
    fn to_key(&self) -> KeyArg<'_>;
}

impl<T: Clone + Into<Any>> MapKey for T {
    fn to_key(&self) -> KeyArg<'_> {
        KeyArg::Owned(self.clone().into())
    }
}

impl MapKey for AnyView<'_> {
    fn to_key(&self) -> KeyArg<'_> {
        KeyArg::View(*self)
    }
}

impl MapKey for str {
    fn to_key(&self) -> KeyArg<'_> {
        KeyArg::Owned(Any::from(self))
    }
}

// ---------------------------------------------------------------------------------------------
// Object types
// ---------------------------------------------------------------------------------------------

/// Marker view of `ffi.Map` (index 72).
#[repr(transparent)]
pub struct MapObj(MapBaseObj);

// SAFETY: a map is mutated only through a uniquely held reference (copy-on-write), so shared
// references only read; its values are `Send + Sync`.
unsafe impl Send for MapObj {}
// SAFETY: as above.
unsafe impl Sync for MapObj {}

// SAFETY: transparent over a repr(C) layout starting with the header; index 72 is `ffi.Map`.
unsafe impl ObjectCore for MapObj {
    const TYPE_KEY: &'static str = "ffi.Map";
    fn type_index() -> i32 {
        kTVMFFIMap
    }
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFIMap
    }
}

/// Marker view of `ffi.Dict` (index 76). Shared-mutable, so neither `Send` nor `Sync`.
#[repr(transparent)]
pub struct DictObj(MapBaseObj);

// SAFETY: transparent over a repr(C) layout starting with the header; index 76 is `ffi.Dict`.
unsafe impl ObjectCore for DictObj {
    const TYPE_KEY: &'static str = "ffi.Dict";
    fn type_index() -> i32 {
        kTVMFFIDict
    }
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFIDict
    }
}

/// The map object behind a view of a map or dict.
fn map_ptr_of(view: &AnyView<'_>) -> Option<*mut MapBaseObj> {
    let obj = view.as_object_ptr()?;
    matches!(view.type_index(), kTVMFFIMap | kTVMFFIDict).then_some(obj.cast())
}

/// The methods `Map` and `Dict` share: construction, size, lookups and iteration.
macro_rules! shared_map_methods {
    ($name:ident, $obj:ident, $index:ident, $what:literal) => {
        impl $name {
            /// Takes over the only reference of a fresh object of this type made here.
            fn from_new(obj: NonNull<MapBaseObj>) -> $name {
                // SAFETY: a fresh object of this type (made by `alloc_empty`/`copy_object`); its
                // only reference moves into the wrapper.
                let obj = unsafe { ObjectRef::<$obj>::from_raw(obj.as_ptr().cast()) };
                $name { obj }
            }

            #[doc = concat!("An empty ", $what, ".")]
            pub fn new() -> $name {
                $name::from_new(alloc_empty($index))
            }

            fn raw(&self) -> *mut MapBaseObj {
                self.obj.as_raw().cast()
            }

            /// Number of entries.
            pub fn len(&self) -> usize {
                // SAFETY: the reference keeps the object alive.
                unsafe { raw_len(self.raw()) }
            }

            #[doc = concat!("Whether the ", $what, " is empty.")]
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// The value stored for `key`.
            pub fn get<K: MapKey + ?Sized>(&self, key: &K) -> Option<Any> {
                let key = key.to_key();
                // SAFETY: the reference keeps the object alive; the value gains its own reference.
                unsafe {
                    find_kv(self.raw(), key.raw()).map(|kv| Any::from_raw(clone_raw(&(*kv).value)))
                }
            }

            /// Whether `key` is present.
            pub fn contains_key<K: MapKey + ?Sized>(&self, key: &K) -> bool {
                let key = key.to_key();
                // SAFETY: the reference keeps the object alive.
                unsafe { find_kv(self.raw(), key.raw()).is_some() }
            }

            /// Iterates over `(key, value)` in insertion order.
            pub fn iter(&self) -> Iter<'_> {
                Iter::new(self.raw())
            }

            /// Iterates over the keys in insertion order.
            pub fn keys(&self) -> impl Iterator<Item = Any> + '_ {
                self.iter().map(|(k, _)| k)
            }

            /// Iterates over the values in insertion order.
            pub fn values(&self) -> impl Iterator<Item = Any> + '_ {
                self.iter().map(|(_, v)| v)
            }
        }
    };
}

// ---------------------------------------------------------------------------------------------
// Map
// ---------------------------------------------------------------------------------------------

/// An immutable hash map from values to values, in insertion order. Cloning shares the object;
/// mutation copies it first unless this is the only reference (copy-on-write).
#[derive(Clone)]
pub struct Map {
    obj: ObjectRef<MapObj>,
}

impl Map {
    /// The object, copied first unless this is its only reference.
    fn make_mut(&mut self) -> *mut MapBaseObj {
        if self.obj.use_count() == 1 {
            // Pairs with the release decrement of the last other reference.
            fence(Ordering::Acquire);
        } else {
            // SAFETY: the reference keeps the object alive while it is copied.
            *self = Map::from_new(unsafe { copy_object(self.raw(), kTVMFFIMap) });
        }
        self.raw()
    }

    /// Sets `key` to `value`; returns the previous value. An existing key keeps its position.
    pub fn insert(&mut self, key: impl Into<Any>, value: impl Into<Any>) -> Option<Any> {
        let p = self.make_mut();
        // SAFETY: `p` is held only by `self`.
        match unsafe { insert_in_place(p, key.into(), value.into()) } {
            Inserted::New => None,
            Inserted::Replaced { old, .. } => Some(old),
            Inserted::NoRoom(key, value) => {
                // A foreign small object too small to grow: continue on a copy made here.
                // SAFETY: `self` keeps the object alive while it is copied.
                *self = Map::from_new(unsafe { copy_object(p, kTVMFFIMap) });
                // SAFETY: the copy is held only by `self` and has room.
                match unsafe { insert_in_place(self.raw(), key, value) } {
                    Inserted::Replaced { old, .. } => Some(old),
                    _ => None,
                }
            }
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove<K: MapKey + ?Sized>(&mut self, key: &K) -> Option<Any> {
        let key = key.to_key();
        // SAFETY: the reference keeps the object alive.
        unsafe { find_kv(self.raw(), key.raw()) }?;
        let p = self.make_mut();
        // SAFETY: `p` is held only by `self`; the removed pair's ownership moves here.
        unsafe {
            remove_in_place(p, key.raw()).map(|kv| {
                drop(Any::from_raw(kv.key));
                Any::from_raw(kv.value)
            })
        }
    }

    /// The underlying object reference.
    pub fn as_object(&self) -> &ObjectRef<MapObj> {
        &self.obj
    }
}

shared_map_methods!(Map, MapObj, kTVMFFIMap, "map");

impl Default for Map {
    fn default() -> Map {
        Map::new()
    }
}

impl<K: Into<Any>, V: Into<Any>> FromIterator<(K, V)> for Map {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Map {
        let mut map = Map::new();
        for (k, v) in iter {
            map.insert(k, v);
        }
        map
    }
}

impl<K: Into<Any>, V: Into<Any>> Extend<(K, V)> for Map {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl<'a> IntoIterator for &'a Map {
    type Item = (Any, Any);
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl PartialEq for Map {
    /// Same size and every key maps to an equal value (`any_equal`); order is ignored.
    fn eq(&self, other: &Map) -> bool {
        // SAFETY: both references keep their objects alive.
        unsafe { tables_equal(self.raw(), other.raw()) }
    }
}

impl fmt::Debug for Map {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl From<Map> for Any {
    fn from(m: Map) -> Any {
        Any::from_object(m.obj)
    }
}

impl TryFromAnyView for Map {
    const TYPE_NAME: &'static str = "ffi.Map";
    /// Accepts a map, or a dict (copied).
    fn try_from_view(view: &AnyView<'_>) -> Option<Map> {
        if let Some(obj) = ObjectRef::<MapObj>::try_from_view(view) {
            return Some(Map { obj });
        }
        let p = map_ptr_of(view)?;
        // SAFETY: the view keeps the dict alive.
        Some(Map::from_new(unsafe { copy_object(p, kTVMFFIMap) }))
    }
}

// ---------------------------------------------------------------------------------------------
// Dict
// ---------------------------------------------------------------------------------------------

/// A shared-mutable hash map from values to values, in insertion order: every reference sees
/// every change. Not `Send`/`Sync`. Mutating a dict while iterating over it is memory-safe but
/// may end the iteration early or skip entries.
#[derive(Clone)]
pub struct Dict {
    obj: ObjectRef<DictObj>,
}

impl Dict {
    /// Sets `key` to `value` (seen by every reference); returns the previous value. An existing
    /// key keeps its position.
    pub fn insert(&self, key: impl Into<Any>, value: impl Into<Any>) -> Option<Any> {
        // SAFETY: dicts are shared-mutable and not `Sync`; the object is alive.
        match unsafe { insert_in_place(self.raw(), key.into(), value.into()) } {
            Inserted::New => None,
            Inserted::Replaced { old, .. } => Some(old),
            Inserted::NoRoom(..) => panic!("ffi.Dict object without room for its dense layout"),
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove<K: MapKey + ?Sized>(&self, key: &K) -> Option<Any> {
        let key = key.to_key();
        // SAFETY: dicts are shared-mutable; the removed pair's ownership moves here.
        unsafe {
            remove_in_place(self.raw(), key.raw()).map(|kv| {
                drop(Any::from_raw(kv.key));
                Any::from_raw(kv.value)
            })
        }
    }

    /// Removes every entry.
    pub fn clear(&self) {
        // SAFETY: dicts are shared-mutable; the pairs moved out are dropped after the table
        // is consistent again.
        unsafe {
            for kv in clear_in_place(self.raw()) {
                drop_kv(kv);
            }
        }
    }

    /// The underlying object reference.
    pub fn as_object(&self) -> &ObjectRef<DictObj> {
        &self.obj
    }
}

shared_map_methods!(Dict, DictObj, kTVMFFIDict, "dict");

impl Default for Dict {
    fn default() -> Dict {
        Dict::new()
    }
}

impl<K: Into<Any>, V: Into<Any>> FromIterator<(K, V)> for Dict {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Dict {
        let dict = Dict::new();
        for (k, v) in iter {
            dict.insert(k, v);
        }
        dict
    }
}

impl<'a> IntoIterator for &'a Dict {
    type Item = (Any, Any);
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl PartialEq for Dict {
    /// Same size and every key maps to an equal value (`any_equal`); order is ignored.
    fn eq(&self, other: &Dict) -> bool {
        // SAFETY: both references keep their objects alive.
        unsafe { tables_equal(self.raw(), other.raw()) }
    }
}

impl fmt::Debug for Dict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl From<Dict> for Any {
    fn from(d: Dict) -> Any {
        Any::from_object(d.obj)
    }
}

impl TryFromAnyView for Dict {
    const TYPE_NAME: &'static str = "ffi.Dict";
    /// Accepts a dict, or a map (copied).
    fn try_from_view(view: &AnyView<'_>) -> Option<Dict> {
        if let Some(obj) = ObjectRef::<DictObj>::try_from_view(view) {
            return Some(Dict { obj });
        }
        let p = map_ptr_of(view)?;
        // SAFETY: the view keeps the map alive.
        Some(Dict::from_new(unsafe { copy_object(p, kTVMFFIDict) }))
    }
}

/// A cursor over the map or dict held by `container`, for iteration functors; `None` if the
/// value is neither.
pub(crate) fn cursor_of(container: &Any) -> Option<(*mut MapBaseObj, Cursor)> {
    let p = map_ptr_of(&container.as_view())?;
    // SAFETY: `container` keeps the object alive.
    Some((p, unsafe { Cursor::start(p) }))
}
