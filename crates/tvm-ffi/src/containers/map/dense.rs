//! The dense layout: `malloc`ed blocks of 16 metadata bytes and 16 items, chains found by
//! Fibonacci hashing and [`PROBE`] jumps, and a `prev`/`next` list keeping insertion order.

use std::ptr::{self, addr_of_mut};

use crate::abi::TVMFFIAny;

use super::layout::{
    BLOCK_CAP, BLOCK_SIZE, DENSE_MIN_SLOTS, FIB_MULTIPLIER, ITEM_SIZE, Item, Kv, META_EMPTY,
    META_JUMP_MASK, META_PROTECTED, META_TAIL_BIT, MapBaseObj, NO_SLOT, OFF_FIB_SHIFT, OFF_HEAD,
    OFF_TAIL, PROBE, cell,
};
use crate::containers::hash::{any_equal, any_hash};

/// Whether a slot with metadata `meta` holds a pair.
#[inline]
pub(super) fn is_live(meta: u8) -> bool {
    meta != META_EMPTY && meta != META_PROTECTED
}

/// `meta` with its jump index replaced by `jump` (the head/member bit kept).
#[inline]
fn with_jump(meta: u8, jump: u8) -> u8 {
    (meta & META_TAIL_BIT) | jump
}

/// A working copy of a dense table's fields; the blocks are shared with the object (or owned
/// by the copy while it is being built).
#[derive(Clone, Copy)]
pub(super) struct Dense {
    pub(super) data: *mut u8,
    pub(super) slots: u64,
    pub(super) shift: u32,
    pub(super) size: u64,
    pub(super) head: u64,
    pub(super) tail: u64,
}

/// Smallest power-of-two slot count for holding `cap` entries (at least twice as many slots
/// unless that means another doubling), as apache-tvm-ffi sizes tables built from a range.
pub(super) fn table_size_for(cap: u64) -> u64 {
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
    #[inline]
    pub(super) unsafe fn load(p: *mut MapBaseObj) -> Dense {
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
    pub(super) unsafe fn store(&self, p: *mut MapBaseObj) {
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
    pub(super) fn new_empty(slots: u64) -> Dense {
        Dense::try_new_empty(slots)
            .unwrap_or_else(|| crate::spare_block::abort_out_of_memory(BLOCK_SIZE))
    }

    /// As [`Dense::new_empty`]; `None` when the table does not fit in memory.
    pub(super) fn try_new_empty(slots: u64) -> Option<Dense> {
        debug_assert!(slots.is_power_of_two() && slots >= 2);
        let blocks = slots.div_ceil(BLOCK_CAP) as usize;
        let bytes = blocks.checked_mul(BLOCK_SIZE)?;
        // SAFETY: a non-zero size; the result is checked for NULL below.
        let data = unsafe { libc::malloc(bytes) }.cast::<u8>();
        if data.is_null() {
            return None;
        }
        for b in 0..blocks {
            // SAFETY: block `b` lies within the allocation; its 16 metadata bytes are written.
            unsafe { ptr::write_bytes(data.add(b * BLOCK_SIZE), META_EMPTY, BLOCK_CAP as usize) };
        }
        Some(Dense {
            data,
            slots,
            shift: 64 - slots.trailing_zeros(),
            size: 0,
            head: NO_SLOT,
            tail: NO_SLOT,
        })
    }

    #[inline]
    fn meta_ptr(&self, i: u64) -> *mut u8 {
        self.data
            .wrapping_add((i / BLOCK_CAP) as usize * BLOCK_SIZE + (i % BLOCK_CAP) as usize)
    }

    #[inline]
    pub(super) fn item(&self, i: u64) -> *mut Item {
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
    pub(super) unsafe fn meta(&self, i: u64) -> u8 {
        // SAFETY: per the caller.
        unsafe { *self.meta_ptr(i) }
    }

    /// # Safety
    /// `i < slots` and the blocks are valid.
    #[inline]
    pub(super) unsafe fn set_meta(&self, i: u64, meta: u8) {
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
        // A valid table has `shift == 64 - log2(slots)` below 64 (at least 2 slots); a shift of
        // 64 or more (a one-slot or malformed foreign table) still yields a masked index.
        hash.wrapping_mul(FIB_MULTIPLIER).wrapping_shr(self.shift) & (self.slots - 1)
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
    #[inline(always)]
    pub(super) unsafe fn find(&self, key: &TVMFFIAny, hash: u64) -> Option<u64> {
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
    pub(super) unsafe fn try_insert(&mut self, key: &TVMFFIAny, hash: u64) -> Option<(u64, bool)> {
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
    pub(super) unsafe fn erase(&mut self, i: u64) -> Kv {
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
    pub(super) unsafe fn take_in_order(&self) -> Vec<Kv> {
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
    pub(super) fn build(entries: Vec<Kv>, mut slots: u64) -> Dense {
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
