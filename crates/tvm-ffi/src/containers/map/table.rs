//! Operations on a live map object of either layout: lookup, insertion (growing the table and
//! switching from the small to the dense layout as needed), removal, clearing, copying and
//! comparison.

use std::ptr::{self, NonNull, addr_of_mut};

use crate::abi::TVMFFIAny;
use crate::any::Any;
use crate::containers::hash::{any_equal, any_hash};

use super::dense::{Dense, is_live, table_size_for};
use super::iter::Cursor;
use super::layout::{
    BASE_SIZE, BLOCK_CAP, BLOCK_SIZE, DENSE_MIN_SLOTS, DENSE_OBJECT_SIZE, Kv, META_EMPTY,
    MapBaseObj, NO_SLOT, SMALL_FLAG, SMALL_INIT, SMALL_MAX, cell, is_small, raw_len,
};
use super::object::{alloc_empty, clone_raw, free_blocks, is_dict, lock_if_dict, small_room};
use crate::containers::sync::ObjectLock;

/// The pair holding `key`, if any (valid until the object changes). The small layout's scan is
/// inline; the dense probe is one call.
///
/// # Safety
/// `p` points at a live map object; `key` is a valid value.
#[inline]
pub(super) unsafe fn find_kv(p: *mut MapBaseObj, key: &TVMFFIAny) -> Option<*mut Kv> {
    // SAFETY: per the caller; indices stay within the layout's initialized entries.
    unsafe {
        let c = cell(p);
        if is_small(p) {
            let kvs = (*c).data.cast::<Kv>();
            (0..(*c).size as usize)
                .map(|i| kvs.add(i))
                .find(|&kv| any_equal(key, &(*kv).key))
        } else {
            find_kv_dense(p, key)
        }
    }
}

/// [`find_kv`] of a dense table.
///
/// # Safety
/// As for [`find_kv`]; the table is dense.
#[inline(never)]
unsafe fn find_kv_dense(p: *mut MapBaseObj, key: &TVMFFIAny) -> Option<*mut Kv> {
    // SAFETY: per the caller.
    unsafe {
        let table = Dense::load(p);
        table
            .find(key, any_hash(key))
            .map(|i| addr_of_mut!((*table.item(i)).kv))
    }
}

/// What an insertion did.
pub(super) enum Inserted {
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

/// Gives a fresh, empty object made here room for `n` entries: above [`SMALL_MAX`] it switches
/// to the dense layout with the slot count apache-tvm-ffi gives a table built from `n` entries,
/// so that inserting `n` distinct keys never rehashes. Smaller counts keep the small layout.
///
/// # Safety
/// `p` points at an empty object made by [`alloc_empty`] that may be mutated.
pub(super) unsafe fn reserve_fresh(p: *mut MapBaseObj, n: usize) {
    // SAFETY: forwarded.
    if unsafe { try_reserve_fresh(p, n) }.is_err() {
        crate::spare_block::abort_out_of_memory(n.saturating_mul(16));
    }
}

/// As [`reserve_fresh`]; a `MemoryError` naming `n` when the table does not fit in memory.
///
/// # Safety
/// As for [`reserve_fresh`].
pub(super) unsafe fn try_reserve_fresh(p: *mut MapBaseObj, n: usize) -> crate::Result<()> {
    if n as u64 <= SMALL_MAX {
        return Ok(());
    }
    // Past 2^56 entries the table's size in bytes overflows; no memory holds it anyway.
    let table = (n < 1 << 56).then(|| Dense::try_new_empty(table_size_for(n as u64)));
    let table = table.flatten().ok_or_else(|| {
        crate::Error::new(
            crate::ErrorKind::MemoryError,
            format!("cannot allocate a map of {n} entries"),
        )
    })?;
    // SAFETY: per the caller the object is empty, small, has no data deleter (its pairs are
    // inline) and has room for the dense fields.
    unsafe {
        debug_assert!(is_small(p) && raw_len(p) == 0 && (*cell(p)).data_deleter.is_none());
        table.store(p);
        (*cell(p)).data_deleter = Some(free_blocks);
    }
    Ok(())
}

/// Inserts or overwrites in place, growing the table (and switching layout) as needed.
///
/// # Safety
/// `p` points at a live map object that may be mutated (a dict, or a uniquely held map).
pub(super) unsafe fn insert_in_place(p: *mut MapBaseObj, key: Any, value: Any) -> Inserted {
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
pub(super) unsafe fn remove_in_place(p: *mut MapBaseObj, key: &TVMFFIAny) -> Option<Kv> {
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
pub(super) unsafe fn clear_in_place(p: *mut MapBaseObj) -> Vec<Kv> {
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
pub(super) unsafe fn copy_object(p: *mut MapBaseObj, type_index: i32) -> NonNull<MapBaseObj> {
    // SAFETY: per the caller.
    let _lock = unsafe { lock_if_dict(p) };
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
pub(super) unsafe fn tables_equal(p: *mut MapBaseObj, q: *mut MapBaseObj) -> bool {
    // SAFETY: per the caller; the pairs found are read while both tables stay unchanged.
    unsafe {
        if p == q {
            return true;
        }
        let _locks =
            (is_dict(p) || is_dict(q)).then(|| ObjectLock::acquire_pair(p.cast(), q.cast()));
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
