//! `Dict` (`ffi.Dict`, index 76): a shared-mutable map, and its object marker [`DictObj`].

use std::fmt;
use std::ptr::{self, NonNull};

use crate::abi::kTVMFFIDict;
use crate::any::{Any, AnyView, TryFromAnyView};
use crate::containers::sync::ObjectLock;
use crate::object::{ObjectCore, ObjectRef};

use super::iter::Iter;
use super::keys::MapKey;
use super::layout::MapBaseObj;
use super::object::{alloc_empty, clone_raw, drop_kv, map_ptr_of};
use super::read::MapRead;
use super::read::sealed::Sealed;
use super::table::{
    Inserted, clear_in_place, copy_object, find_kv, insert_in_place, remove_in_place,
    reserve_fresh, tables_equal, try_reserve_fresh,
};

/// Marker view of `ffi.Dict` (index 76). Shared-mutable, and safe to share between threads:
/// every access through this crate holds the dict's lock ([`crate::containers::sync`]).
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

impl DictObj {
    /// The value stored for `key`, read from the object in place under its lock (borrowed: no
    /// reference count of the dict changes).
    pub fn get(&self, key: &AnyView<'_>) -> Option<Any> {
        let p = ptr::from_ref(&self.0).cast_mut();
        // SAFETY: `self` is a live dict, read under its lock; the value gains its own reference.
        unsafe {
            let _lock = ObjectLock::acquire(p.cast());
            find_kv(p, key.as_raw()).map(|kv| Any::from_raw(clone_raw(&(*kv).value)))
        }
    }
}

/// A shared-mutable hash map from values to values, in insertion order: every reference sees
/// every change. Safe to share between threads (each operation holds the dict's lock). Mutating a
/// dict while iterating over it is memory-safe but may end the iteration early or skip entries.
#[derive(Clone)]
pub struct Dict {
    obj: ObjectRef<DictObj>,
}

impl Dict {
    /// An empty dict.
    pub fn new() -> Dict {
        Dict::from_new(alloc_empty(kTVMFFIDict))
    }

    /// An empty dict with room for `n` entries: inserting `n` distinct keys never rehashes.
    pub fn with_capacity(n: usize) -> Dict {
        let obj = alloc_empty(kTVMFFIDict);
        // SAFETY: a fresh, empty object made here, held only here.
        unsafe { reserve_fresh(obj.as_ptr(), n) };
        Dict::from_new(obj)
    }

    /// As [`Dict::with_capacity`]; a `MemoryError` when `n` entries do not fit in memory.
    pub fn try_with_capacity(n: usize) -> crate::Result<Dict> {
        let fresh = Dict::from_new(alloc_empty(kTVMFFIDict));
        // SAFETY: a fresh, empty object made here, held only here.
        unsafe { try_reserve_fresh(fresh.raw(), n) }?;
        Ok(fresh)
    }

    /// Takes over the only reference of a fresh dict object made here.
    fn from_new(obj: NonNull<MapBaseObj>) -> Dict {
        // SAFETY: a fresh `ffi.Dict` object (made by `alloc_empty`/`copy_object`); its only
        // reference moves into the wrapper.
        let obj = unsafe { ObjectRef::<DictObj>::from_raw(obj.as_ptr().cast()) };
        Dict { obj }
    }

    /// Sets `key` to `value` (seen by every reference); returns the previous value. An existing
    /// key keeps its position.
    pub fn insert(&self, key: impl Into<Any>, value: impl Into<Any>) -> Option<Any> {
        let (key, value) = (key.into(), value.into());
        let _lock = self.lock_for_mutation();
        // SAFETY: the object is alive and locked; the replaced value is dropped by the caller,
        // after the lock is released.
        match unsafe { insert_in_place(self.raw(), key, value) } {
            Inserted::New => None,
            Inserted::Replaced { old, .. } => Some(old),
            Inserted::NoRoom(..) => panic!("ffi.Dict object without room for its dense layout"),
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove<K: MapKey + ?Sized>(&self, key: &K) -> Option<Any> {
        let key = key.to_key();
        let removed = {
            let _lock = self.lock_for_mutation();
            // SAFETY: the object is alive and locked; the removed pair's ownership moves here.
            unsafe { remove_in_place(self.raw(), key.raw()) }
        };
        // SAFETY: the pair left the table; each value is released once, without the lock.
        removed.map(|kv| unsafe {
            drop(Any::from_raw(kv.key));
            Any::from_raw(kv.value)
        })
    }

    /// Removes every entry.
    pub fn clear(&self) {
        let pairs = {
            let _lock = self.lock_for_mutation();
            // SAFETY: the object is alive and locked; the pairs move out of the table.
            unsafe { clear_in_place(self.raw()) }
        };
        for kv in pairs {
            // SAFETY: each pair left the table and is released once, without the lock.
            unsafe { drop_kv(kv) };
        }
    }

    /// Holds the dict's lock for one mutation.
    fn lock_for_mutation(&self) -> ObjectLock {
        ObjectLock::acquire(self.raw().cast()).for_mutation("ffi.Dict")
    }

    /// The underlying object reference.
    pub fn as_object(&self) -> &ObjectRef<DictObj> {
        &self.obj
    }
}

// SAFETY: every access to a dict's table through this crate holds the object's lock; keys and
// values are `Any` (Send + Sync).
unsafe impl Send for DictObj {}
// SAFETY: as above.
unsafe impl Sync for DictObj {}

impl Sealed for Dict {
    #[inline]
    fn raw(&self) -> *mut MapBaseObj {
        self.obj.as_raw().cast()
    }
}

impl MapRead for Dict {}

impl Default for Dict {
    fn default() -> Dict {
        Dict::new()
    }
}

impl<K: Into<Any>, V: Into<Any>> FromIterator<(K, V)> for Dict {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Dict {
        let iter = iter.into_iter();
        // The hint is only trusted up to a modest size.
        let dict = Dict::with_capacity(iter.size_hint().0.min(1 << 16));
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
