//! Iteration in insertion order: [`Cursor`], a position re-validated at every step (also used
//! by the iteration functors of the globals), and the [`Iter`] of `Map` and `Dict`.

use std::marker::PhantomData;
use std::ptr::addr_of_mut;

use crate::any::Any;

use super::dense::{Dense, is_live};
use super::layout::{Kv, MapBaseObj, NO_SLOT, cell, is_small};
use super::object::{clone_raw, lock_if_dict, map_ptr_of};

/// A position in a table's insertion order. Every step re-validates against the table, so a
/// table changed behind the cursor (a dict mutated during iteration) ends or skips entries but
/// is never read out of bounds. A dense cursor also remembers the slot storage it started on:
/// once the table is rehashed its slot index means another entry, so the iteration ends there
/// rather than yielding entries again.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cursor {
    small: bool,
    pos: u64,
    /// The dense table's slot storage (address) and slot count when the cursor started.
    storage: (usize, u64),
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
                    storage: (0, 0),
                }
            } else {
                let table = Dense::load(p);
                Cursor {
                    small: false,
                    pos: table.head,
                    storage: (table.data as usize, table.slots),
                }
            }
        }
    }

    /// The pair at the cursor, if it is still valid.
    ///
    /// # Safety
    /// `p` points at the live map object the cursor was started on.
    pub(super) unsafe fn current_kv(&self, p: *mut MapBaseObj) -> Option<*mut Kv> {
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
                    && self.storage == (table.data as usize, table.slots)
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
    /// Iterates over the object at `obj`, which the caller's container keeps alive for `'a`.
    pub(super) fn new(obj: *mut MapBaseObj) -> Iter<'a> {
        // SAFETY: the caller's container keeps the object alive for `'a`.
        let cursor = unsafe {
            let _lock = lock_if_dict(obj);
            Cursor::start(obj)
        };
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
        // SAFETY: the borrowed container keeps the object alive; a dict is read under its lock.
        unsafe {
            let _lock = lock_if_dict(self.obj);
            let entry = self.cursor.current(self.obj)?;
            self.cursor.advance(self.obj);
            Some(entry)
        }
    }
}

/// A cursor over the map or dict held by `container`, for iteration functors; `None` if the
/// value is neither.
pub(crate) fn cursor_of(container: &Any) -> Option<(*mut MapBaseObj, Cursor)> {
    let p = map_ptr_of(&container.as_view())?;
    // SAFETY: `container` keeps the object alive.
    Some((p, unsafe {
        let _lock = lock_if_dict(p);
        Cursor::start(p)
    }))
}
