//! [`MapRead`]: the read-only methods `Map` and `Dict` share (size, lookups and iteration),
//! written once over the object each container holds.

use crate::any::Any;

use super::iter::Iter;
use super::keys::MapKey;
use super::layout::MapBaseObj;
use super::layout::raw_len;
use super::object::clone_raw;
use super::object::lock_if_dict;
use super::table::find_kv;

/// The accessor [`MapRead`] is written over; private to the crate, so that only `Map` and
/// `Dict` implement [`MapRead`].
pub(super) mod sealed {
    use super::MapBaseObj;

    /// A container holding a map object.
    pub trait Sealed {
        /// The map object, kept alive by `self` for as long as `self` is borrowed.
        fn raw(&self) -> *mut MapBaseObj;
    }
}

/// Read-only access shared by [`Map`](super::Map) and [`Dict`](super::Dict): size, lookups and
/// iteration in insertion order. Sealed (implemented by those two only); bring it into scope
/// with `use tvm_ffi::MapRead;`.
pub trait MapRead: sealed::Sealed {
    /// Number of entries.
    #[inline]
    fn len(&self) -> usize {
        // SAFETY: `self` keeps the object alive.
        unsafe {
            let _lock = lock_if_dict(self.raw());
            raw_len(self.raw())
        }
    }

    /// Whether there are no entries.
    #[inline]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value stored for `key`.
    #[inline]
    fn get<K: MapKey + ?Sized>(&self, key: &K) -> Option<Any> {
        let key = key.to_key();
        // SAFETY: `self` keeps the object alive; the value gains its own reference under the
        // dict's lock.
        unsafe {
            let _lock = lock_if_dict(self.raw());
            find_kv(self.raw(), key.raw()).map(|kv| Any::from_raw(clone_raw(&(*kv).value)))
        }
    }

    /// Whether `key` is present.
    #[inline]
    fn contains_key<K: MapKey + ?Sized>(&self, key: &K) -> bool {
        let key = key.to_key();
        // SAFETY: `self` keeps the object alive.
        unsafe {
            let _lock = lock_if_dict(self.raw());
            find_kv(self.raw(), key.raw()).is_some()
        }
    }

    /// Iterates over `(key, value)` in insertion order.
    #[inline]
    fn iter(&self) -> Iter<'_> {
        Iter::new(self.raw())
    }

    /// Iterates over the keys in insertion order.
    #[inline]
    fn keys(&self) -> impl Iterator<Item = Any> + '_ {
        self.iter().map(|(k, _)| k)
    }

    /// Iterates over the values in insertion order.
    #[inline]
    fn values(&self) -> impl Iterator<Item = Any> + '_ {
        self.iter().map(|(_, v)| v)
    }
}
