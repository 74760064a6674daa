//! `Map` (`ffi.Map`, index 72): an immutable, copy-on-write map, and its object marker
//! [`MapObj`].

use std::fmt;
use std::ptr::{self, NonNull, addr_of_mut};
use std::sync::atomic::{Ordering, fence};

use crate::abi::kTVMFFIMap;
use crate::any::{Any, AnyView, TryFromAnyView};
use crate::object::{ObjectCore, ObjectRef};

use super::iter::{Cursor, Iter};
use super::keys::MapKey;
use super::layout::MapBaseObj;
use super::object::{alloc_empty, clone_raw, map_ptr_of};
use super::read::MapRead;
use super::read::sealed::Sealed;
use super::table::{
    Inserted, copy_object, find_kv, insert_in_place, remove_in_place, reserve_fresh, tables_equal,
    try_reserve_fresh,
};

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

impl MapObj {
    /// The value stored for `key`, read from the object in place (borrowed: no reference count
    /// of the map changes).
    #[inline]
    pub fn get(&self, key: &AnyView<'_>) -> Option<Any> {
        let p = ptr::from_ref(&self.0).cast_mut();
        // SAFETY: `self` is a live map, never mutated while shared; the value gains its own
        // reference.
        unsafe { find_kv(p, key.as_raw()).map(|kv| Any::from_raw(clone_raw(&(*kv).value))) }
    }

    /// Rewrites the values in place, in insertion order, for structural mutation of a map that
    /// nothing else holds: `f` sees each value borrowed from its slot and returns its
    /// replacement, or `None` to keep it. Keys and the table stay as they are. The first error
    /// ends the walk; values replaced before it stay replaced.
    ///
    /// # Safety
    /// The caller holds the only reference to the map, and nothing else (`f` included) reads or
    /// changes it while this runs.
    pub(crate) unsafe fn replace_values_unique<E>(
        &self,
        mut f: impl FnMut(AnyView<'_>) -> Result<Option<Any>, E>,
    ) -> Result<(), E> {
        let p = ptr::from_ref(&self.0).cast_mut();
        // SAFETY: per the caller the map is ours alone; replacing a value changes neither the
        // keys nor the table, so the cursor stays valid, and each borrowed view is dead before
        // its slot is overwritten (the replacement is an owned value).
        unsafe {
            let mut cursor = Cursor::start(p);
            while let Some(kv) = cursor.current_kv(p) {
                if let Some(value) = f(AnyView::from_raw((*kv).value))? {
                    let old = ptr::replace(addr_of_mut!((*kv).value), value.into_raw());
                    drop(Any::from_raw(old));
                }
                cursor.advance(p);
            }
        }
        Ok(())
    }
}

/// An immutable hash map from values to values, in insertion order. Cloning shares the object;
/// mutation copies it first unless this is the only reference (copy-on-write).
#[derive(Clone)]
pub struct Map {
    obj: ObjectRef<MapObj>,
}

impl Map {
    /// An empty map.
    pub fn new() -> Map {
        Map::from_new(alloc_empty(kTVMFFIMap))
    }

    /// An empty map with room for `n` entries: inserting `n` distinct keys never rehashes.
    pub fn with_capacity(n: usize) -> Map {
        let obj = alloc_empty(kTVMFFIMap);
        // SAFETY: a fresh, empty object made here, held only here.
        unsafe { reserve_fresh(obj.as_ptr(), n) };
        Map::from_new(obj)
    }

    /// As [`Map::with_capacity`]; a `MemoryError` when `n` entries do not fit in memory.
    pub fn try_with_capacity(n: usize) -> crate::Result<Map> {
        let fresh = Map::from_new(alloc_empty(kTVMFFIMap));
        // SAFETY: a fresh, empty object made here, held only here.
        unsafe { try_reserve_fresh(fresh.raw(), n) }?;
        Ok(fresh)
    }

    /// Takes over the only reference of a fresh map object made here.
    fn from_new(obj: NonNull<MapBaseObj>) -> Map {
        // SAFETY: a fresh `ffi.Map` object (made by `alloc_empty`/`copy_object`); its only
        // reference moves into the wrapper.
        let obj = unsafe { ObjectRef::<MapObj>::from_raw(obj.as_ptr().cast()) };
        Map { obj }
    }

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

    /// Sets `key` to `value` in this very object, however many references it has (for a map
    /// under construction that already has references, as in a deep copy of a cycle).
    ///
    /// # Safety
    /// Nothing reads the map while this runs, and every other reference to it is the caller's
    /// own, unused until the map is complete.
    pub(crate) unsafe fn insert_unshared(&self, key: Any, value: Any) {
        // SAFETY: per the caller, the object may be mutated; a map made here has room to grow
        // in place, so the insertion never needs a copy.
        let inserted = unsafe { insert_in_place(self.raw(), key, value) };
        assert!(
            !matches!(inserted, Inserted::NoRoom(..)),
            "a map made here grows in place"
        );
    }

    /// The underlying object reference.
    pub fn as_object(&self) -> &ObjectRef<MapObj> {
        &self.obj
    }
}

impl Sealed for Map {
    #[inline]
    fn raw(&self) -> *mut MapBaseObj {
        self.obj.as_raw().cast()
    }
}

impl MapRead for Map {}

impl Default for Map {
    fn default() -> Map {
        Map::new()
    }
}

impl<K: Into<Any>, V: Into<Any>> FromIterator<(K, V)> for Map {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Map {
        let iter = iter.into_iter();
        // The hint is only trusted up to a modest size.
        let mut map = Map::with_capacity(iter.size_hint().0.min(1 << 16));
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
