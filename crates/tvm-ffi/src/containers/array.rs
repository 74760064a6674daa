//! `Array` (immutable, elements inline after the cell) and `List` (shared-mutable, elements in a
//! separate `malloc` buffer that C++ code may grow in place).

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};

use crate::abi::{
    self, TVMFFIAny, TVMFFISeqCell, kTVMFFIArray, kTVMFFIList,
    kTVMFFIObjectDeleterFlagBitMaskStrong, kTVMFFIObjectDeleterFlagBitMaskWeak,
};
use crate::any::{Any, AnyView, TryFromAnyView};
use crate::error::{Error, ErrorKind, Result};
use crate::object::{
    Object, ObjectCore, ObjectRef, alloc_object, destroy, release_nested,
    try_alloc_object_uninit_with_deleter,
};

use super::sync::ObjectLock;

/// The common layout of arrays and lists: header plus sequence cell (56 bytes).
#[repr(C)]
pub struct SeqObj {
    base: Object,
    cell: UnsafeCell<TVMFFISeqCell>,
}

impl SeqObj {
    fn cell(&self) -> &TVMFFISeqCell {
        // SAFETY: the cell is only rewritten through `&mut`-like list operations, which the
        // list's single-threaded contract serializes.
        unsafe { &*self.cell.get() }
    }

    #[allow(clippy::mut_from_ref)]
    fn cell_mut(&self) -> &mut TVMFFISeqCell {
        // SAFETY: lists are shared-mutable by contract and not `Sync`; no reference into the
        // cell outlives a single operation.
        unsafe { &mut *self.cell.get() }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.cell().size as usize
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element at `index`: one bounds check (an array of `size > 0` elements has `data`).
    #[inline]
    fn element(&self, index: usize) -> Option<&Any> {
        let cell = self.cell();
        if index >= cell.size as usize {
            return None;
        }
        // SAFETY: `index < size`, and `data` holds `size` initialized owning values.
        Some(unsafe { &*cell.data.cast::<Any>().add(index) })
    }

    fn elements(&self) -> &[Any] {
        let cell = self.cell();
        if cell.size == 0 || cell.data.is_null() {
            return &[];
        }
        // SAFETY: `data` holds `size` initialized owning values (Any is a transparent TVMFFIAny).
        unsafe { std::slice::from_raw_parts(cell.data.cast::<Any>(), cell.size as usize) }
    }
}

impl Drop for SeqObj {
    fn drop(&mut self) {
        let cell = self.cell.get_mut();
        if !cell.data.is_null() {
            let data = cell.data.cast::<Any>();
            for i in 0..cell.size.max(0) as usize {
                // SAFETY: the first `size` slots hold owning values, dropped exactly once.
                unsafe { std::ptr::drop_in_place(data.add(i)) };
            }
        }
        if let Some(deleter) = cell.data_deleter {
            // SAFETY: whoever installed the deleter made it free this buffer.
            unsafe { deleter(cell.data) };
        }
    }
}

/// The deleter of arrays made here ([`Array::build`]): an array holding no objects (and no
/// external buffer) has nothing to release but its block, so it skips the bookkeeping of nested
/// releases; any other goes through [`release_nested`] like every object made by this crate.
///
/// # Safety
/// Called by the header protocol with an array object allocated by [`Array::build`].
unsafe extern "C" fn array_deleter(obj: *mut c_void, flags: c_int) {
    if flags & kTVMFFIObjectDeleterFlagBitMaskStrong != 0 {
        // SAFETY: the object is a live `SeqObj` until the block is freed.
        let seq = unsafe { &*obj.cast::<SeqObj>() };
        let owns_nothing =
            seq.cell().data_deleter.is_none() && seq.elements().iter().all(|v| !v.is_object());
        if !owns_nothing {
            // SAFETY: forwarded from the header protocol; the block holds a `SeqObj`.
            return unsafe { release_nested(obj, flags, destroy::<SeqObj>) };
        }
        // Dropping plain values is a no-op: the strong part of the release is done.
    }
    if flags & kTVMFFIObjectDeleterFlagBitMaskWeak != 0 {
        // SAFETY: the block came from `libc::malloc` in `Array::build`, and no reference
        // remains; its values own nothing (checked above, or dropped by an earlier strong
        // release).
        unsafe { libc::free(obj) };
    }
}

// SAFETY: elements are `Any` (Send + Sync); arrays are immutable once built.
unsafe impl Send for ArrayObj {}
// SAFETY: as above.
unsafe impl Sync for ArrayObj {}

/// Marker view of `ffi.Array` (index 71).
#[repr(transparent)]
pub struct ArrayObj(SeqObj);

// SAFETY: transparent over a repr(C) layout starting with the header.
unsafe impl ObjectCore for ArrayObj {
    const TYPE_KEY: &'static str = "ffi.Array";
    fn type_index() -> i32 {
        kTVMFFIArray
    }
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFIArray
    }
}

impl ArrayObj {
    /// The elements (borrowed: no reference counts change).
    pub fn as_slice(&self) -> &[Any] {
        self.0.elements()
    }

    /// The element at `index` (borrowed), `None` past the end.
    pub fn get(&self, index: usize) -> Option<&Any> {
        self.0.element(index)
    }

    /// Replaces item `index` in place and returns the old one (for structural mutation of an
    /// array that nothing else holds).
    ///
    /// # Safety
    /// The caller holds the only reference to the array (or every other reference is its own
    /// and unused meanwhile, as for an array under construction), and no borrow of its items
    /// (such as a slice from [`ArrayObj::as_slice`]) is alive.
    pub(crate) unsafe fn replace_unique(&self, index: usize, value: Any) -> Any {
        let cell = self.0.cell_mut();
        assert!(
            index < cell.size.max(0) as usize,
            "array index {index} out of range"
        );
        // SAFETY: `index` is within the `size` initialized items; by the caller's contract no
        // one else reads them meanwhile.
        unsafe { std::ptr::replace(cell.data.cast::<Any>().add(index), value) }
    }
}

/// Marker view of `ffi.List` (index 75).
#[repr(transparent)]
pub struct ListObj(SeqObj);

// SAFETY: transparent over a repr(C) layout starting with the header.
unsafe impl ObjectCore for ListObj {
    const TYPE_KEY: &'static str = "ffi.List";
    fn type_index() -> i32 {
        kTVMFFIList
    }
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFIList
    }
}

/// An immutable sequence of values, elements stored inline after the cell.
#[derive(Clone)]
pub struct Array {
    obj: ObjectRef<ArrayObj>,
}

impl Array {
    /// An array of the given values. Aborts when memory runs out, as a `Vec` does; see
    /// [`Array::try_from_vec`] for values a caller counts.
    pub fn from_vec(values: Vec<Any>) -> Array {
        let len = values.len();
        Array::try_from_vec(values)
            .unwrap_or_else(|_| crate::spare_block::abort_out_of_memory(len.saturating_mul(16)))
    }

    /// An array of the given values; a `MemoryError` when it does not fit in memory.
    pub fn try_from_vec(values: Vec<Any>) -> Result<Array> {
        let len = values.len();
        Array::build(len, |data| {
            for (i, value) in values.into_iter().enumerate() {
                // SAFETY: `i < len`: the slot is in the block and not yet initialized.
                unsafe { data.add(i).write(value.into_raw()) };
            }
            (len, None)
        })
    }

    /// An array of owned copies of the viewed values (one allocation), or the error of the first
    /// view that cannot be owned (see [`AnyView::try_to_owned`]).
    pub fn try_from_views(views: &[AnyView<'_>]) -> Result<Array> {
        Array::build(views.len(), |data| {
            // Bitwise copies first; then the values that need more than a copy are fixed up in
            // place, and a failure leaves the slots from there on unowned.
            // SAFETY: the block has room for `views.len()` values; `AnyView` is a transparent
            // `TVMFFIAny`; the two do not overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(views.as_ptr().cast::<TVMFFIAny>(), data, views.len())
            };
            for (i, view) in views.iter().enumerate() {
                let type_index = view.type_index();
                if type_index < abi::kTVMFFIRawStr {
                    // None, ints, floats, pointers, dtypes, devices: the copy is owned as is.
                    continue;
                }
                if type_index >= abi::kTVMFFIStaticObjectBegin {
                    // SAFETY: the view borrows a live object; the copy gets its own reference.
                    unsafe { crate::object::inc_ref(view.as_raw().payload.v_obj) };
                    continue;
                }
                match view.try_to_owned() {
                    // SAFETY: `i < len`: the slot holds an unowned bitwise copy, replaced here.
                    Ok(value) => unsafe { data.add(i).write(value.into_raw()) },
                    Err(err) => return (i, Some(err)),
                }
            }
            (views.len(), None)
        })
    }

    /// Allocates an array of `len` elements inline and lets `fill` write them into the block:
    /// `fill` returns how many leading slots now hold owning values, with the error that
    /// stopped it early, if any (the array is then released with exactly those values).
    fn build(
        len: usize,
        fill: impl FnOnce(*mut TVMFFIAny) -> (usize, Option<Error>),
    ) -> Result<Array> {
        let bytes = len.checked_mul(size_of::<TVMFFIAny>()).ok_or_else(|| {
            Error::new(
                ErrorKind::MemoryError,
                format!("an array of {len} values does not fit in memory"),
            )
        })?;
        let value = SeqObj {
            base: Object::header(),
            cell: UnsafeCell::new(TVMFFISeqCell {
                data: std::ptr::null_mut(),
                size: 0,
                capacity: len as i64,
                data_deleter: None,
            }),
        };
        // SAFETY: repr(C) with the header first; Drop releases the first `size` inline elements,
        // and only those are ever read.
        let ptr = unsafe {
            try_alloc_object_uninit_with_deleter(value, bytes, kTVMFFIArray, array_deleter)
        }
        .map_err(|_| {
            Error::new(
                ErrorKind::MemoryError,
                format!("cannot allocate an array of {len} values"),
            )
        })?;
        // SAFETY: the new block has room for `len` values right after the 56-byte object.
        let data = unsafe { ptr.as_ptr().add(1).cast::<TVMFFIAny>() };
        // SAFETY: the new object's reference moves into the array.
        let obj = unsafe { ObjectRef::from_raw(ptr.as_ptr().cast()) };
        let array = Array { obj };
        let cell = array.obj.0.cell_mut();
        cell.data = data.cast::<c_void>();
        // A panic in `fill` leaves the size at 0: the values written so far leak, none is
        // released twice.
        let (filled, error) = fill(data);
        debug_assert!(filled <= len);
        cell.size = filled as i64;
        match error {
            None => Ok(array),
            Some(err) => Err(err),
        }
    }

    /// An empty array.
    pub fn new() -> Array {
        Array::from_vec(Vec::new())
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.obj.0.len()
    }

    /// Whether the array is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements.
    pub fn as_slice(&self) -> &[Any] {
        self.obj.0.elements()
    }

    /// The element at `index`.
    pub fn get(&self, index: usize) -> Option<&Any> {
        self.obj.0.element(index)
    }

    /// The element at `index` (negative counts from the end), or an `IndexError` naming it.
    #[inline]
    pub fn at(&self, index: i64) -> Result<&Any> {
        let i = normalize_index(index, self.len())?;
        Ok(&self.as_slice()[i])
    }

    /// Iterates over the elements.
    pub fn iter(&self) -> std::slice::Iter<'_, Any> {
        self.as_slice().iter()
    }

    /// The underlying object reference.
    pub fn as_object(&self) -> &ObjectRef<ArrayObj> {
        &self.obj
    }
}

impl Default for Array {
    fn default() -> Array {
        Array::new()
    }
}

/// Resolves a possibly negative index against `len`, or an `IndexError` naming both.
#[inline]
pub(crate) fn normalize_index(index: i64, len: usize) -> Result<usize> {
    let resolved = if index < 0 { index + len as i64 } else { index };
    if resolved < 0 || resolved as usize >= len {
        return Err(index_error(index, len));
    }
    Ok(resolved as usize)
}

#[cold]
#[inline(never)]
fn index_error(index: i64, len: usize) -> Error {
    Error::new(
        ErrorKind::IndexError,
        format!("index {index} out of range for length {len}"),
    )
}

impl<T: Into<Any>> FromIterator<T> for Array {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Array {
        Array::from_vec(iter.into_iter().map(Into::into).collect())
    }
}

impl PartialEq for Array {
    fn eq(&self, other: &Array) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl std::fmt::Debug for Array {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

unsafe extern "C" fn free_buffer(data: *mut c_void) {
    crate::boundary::ffi_boundary("the buffer deleter of a List", || {
        // SAFETY: list buffers come from `libc::malloc` (or C++ `operator new`, which is
        // malloc-based); `free(NULL)` is a no-op.
        unsafe { libc::free(data) };
    })
}

/// A shared-mutable sequence: every reference sees every change. Safe to share between
/// threads: each operation holds the list's lock ([`sync`](super::sync)), so a native function
/// running without the interpreter lock and a Python thread mutating the same list see each
/// other's operations whole. C and C++ code that reads the cell directly must not race with
/// writers.
#[derive(Clone)]
pub struct List {
    obj: ObjectRef<ListObj>,
}

// SAFETY: every access to a list's cell through this API holds the object's lock; elements are
// `Any` (Send + Sync).
unsafe impl Send for ListObj {}
// SAFETY: as above.
unsafe impl Sync for ListObj {}

impl List {
    /// An empty list.
    pub fn new() -> List {
        List::with_capacity(0)
    }

    /// An empty list with room for `capacity` elements.
    pub fn with_capacity(capacity: usize) -> List {
        let value = SeqObj {
            base: Object::header(),
            cell: UnsafeCell::new(TVMFFISeqCell {
                data: std::ptr::null_mut(),
                size: 0,
                capacity: 0,
                data_deleter: Some(free_buffer),
            }),
        };
        // SAFETY: repr(C) with the header first; Drop releases elements and buffer.
        let ptr = unsafe { alloc_object(value, 0, kTVMFFIList) };
        // SAFETY: the new object's reference moves into the list.
        let obj = unsafe { ObjectRef::from_raw(ptr.as_ptr().cast()) };
        let list = List { obj };
        list.reserve(capacity);
        list
    }

    fn seq(&self) -> &SeqObj {
        &self.obj.0
    }

    /// Holds the list's lock for one read.
    fn lock(&self) -> ObjectLock {
        ObjectLock::acquire(self.obj.as_raw().cast())
    }

    /// Holds the list's lock for one mutation.
    fn lock_for_mutation(&self) -> ObjectLock {
        self.lock().for_mutation("ffi.List")
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        let _lock = self.lock();
        self.seq().len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Makes room for at least `capacity` elements (keeps the buffer's deleter).
    pub fn reserve(&self, capacity: usize) {
        let _lock = self.lock_for_mutation();
        self.reserve_locked(capacity);
    }

    /// Makes room for `capacity` elements in all; a `MemoryError` when they do not fit in
    /// memory.
    pub fn try_reserve(&self, capacity: usize) -> Result<()> {
        let _lock = self.lock_for_mutation();
        self.try_reserve_locked(capacity)
    }

    fn reserve_locked(&self, capacity: usize) {
        if self.try_reserve_locked(capacity).is_err() {
            crate::spare_block::abort_out_of_memory(capacity.saturating_mul(16));
        }
    }

    fn try_reserve_locked(&self, capacity: usize) -> Result<()> {
        let cell = self.seq().cell_mut();
        if i64::try_from(capacity).is_ok_and(|capacity| capacity <= cell.capacity) {
            return Ok(());
        }
        let data = capacity
            .checked_mul(size_of::<TVMFFIAny>())
            .filter(|&bytes| bytes <= isize::MAX as usize)
            // SAFETY: malloc of a size checked not to overflow; the result is checked below.
            .map(|bytes| unsafe { libc::malloc(bytes) }.cast::<TVMFFIAny>())
            .filter(|data| !data.is_null())
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::MemoryError,
                    format!("cannot allocate a list of {capacity} values"),
                )
            })?;
        // SAFETY: a fresh buffer; the old elements are moved bitwise, then the old buffer freed.
        unsafe {
            if cell.size > 0 {
                std::ptr::copy_nonoverlapping(
                    cell.data.cast::<TVMFFIAny>(),
                    data,
                    cell.size as usize,
                );
            }
            if let Some(deleter) = cell.data_deleter {
                deleter(cell.data);
            }
            cell.data = data.cast();
            cell.capacity = capacity as i64;
            if cell.data_deleter.is_none() {
                cell.data_deleter = Some(free_buffer);
            }
        }
        Ok(())
    }

    /// Appends a value.
    pub fn push(&self, value: impl Into<Any>) {
        let value = value.into();
        let _lock = self.lock_for_mutation();
        self.push_locked(value);
    }

    fn push_locked(&self, value: Any) {
        let len = self.seq().len();
        if len as i64 == self.seq().cell().capacity {
            self.reserve_locked((len * 2).max(4));
        }
        let cell = self.seq().cell_mut();
        // SAFETY: capacity exceeds size; the slot is uninitialized and now owns the value.
        unsafe {
            cell.data
                .cast::<TVMFFIAny>()
                .add(len)
                .write(value.into_raw())
        };
        cell.size += 1;
    }

    /// Inserts a value at `index` (0..=len), or an `IndexError`.
    pub fn insert(&self, index: i64, value: impl Into<Any>) -> Result<()> {
        let value = value.into();
        let _lock = self.lock_for_mutation();
        let len = self.seq().len();
        let at = if index == len as i64 {
            len
        } else {
            normalize_index(index, len)?
        };
        self.push_locked(value);
        let data = self.seq().cell().data.cast::<TVMFFIAny>();
        // SAFETY: `len + 1` initialized slots; rotate the new last element into place.
        unsafe { std::slice::from_raw_parts_mut(data, len + 1)[at..].rotate_right(1) };
        Ok(())
    }

    /// The element at `index` (negative counts from the end).
    pub fn get(&self, index: i64) -> Result<Any> {
        let _lock = self.lock();
        let i = normalize_index(index, self.seq().len())?;
        Ok(self.seq().elements()[i].clone())
    }

    /// Replaces the element at `index`.
    pub fn set(&self, index: i64, value: impl Into<Any>) -> Result<()> {
        let value = value.into();
        let old = {
            let _lock = self.lock_for_mutation();
            let i = normalize_index(index, self.seq().len())?;
            let data = self.seq().cell().data.cast::<Any>();
            // SAFETY: slot `i` is initialized; the old value leaves the list.
            unsafe { std::ptr::replace(data.add(i), value) }
        };
        // Dropped without the lock: a destructor may run arbitrary code.
        drop(old);
        Ok(())
    }

    /// Removes and returns the element at `index`.
    pub fn remove(&self, index: i64) -> Result<Any> {
        let _lock = self.lock_for_mutation();
        let len = self.seq().len();
        let i = normalize_index(index, len)?;
        let data = self.seq().cell().data.cast::<TVMFFIAny>();
        // SAFETY: slot `i` is initialized; the tail shifts down by one and size shrinks.
        let raw = unsafe {
            let slots = std::slice::from_raw_parts_mut(data, len);
            slots[i..].rotate_left(1);
            slots[len - 1]
        };
        self.seq().cell_mut().size -= 1;
        // SAFETY: the removed value's ownership moves to the caller (who drops it unlocked).
        Ok(unsafe { Any::from_raw(raw) })
    }

    /// Removes and returns the last element.
    pub fn pop(&self) -> Result<Any> {
        self.remove(-1)
    }

    /// Removes every element.
    pub fn clear(&self) {
        let values: Vec<Any> = {
            let _lock = self.lock_for_mutation();
            let cell = self.seq().cell_mut();
            let len = cell.size.max(0) as usize;
            cell.size = 0;
            let data = cell.data.cast::<Any>();
            // SAFETY: the first `len` slots were initialized and now leave the list (size 0).
            (0..len).map(|i| unsafe { data.add(i).read() }).collect()
        };
        // Dropped without the lock: a destructor may run arbitrary code.
        drop(values);
    }

    /// Replaces the elements in `start..stop` with `values` (Python's `l[start:stop] = values`
    /// for a normalized slice): an `IndexError` unless `start <= stop <= len`.
    pub fn splice(&self, start: i64, stop: i64, values: Vec<Any>) -> Result<()> {
        let removed: Vec<Any> = {
            let _lock = self.lock_for_mutation();
            let len = self.seq().len();
            let range = usize::try_from(start)
                .ok()
                .zip(usize::try_from(stop).ok())
                .filter(|&(a, b)| a <= b && b <= len)
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::IndexError,
                        format!("slice {start}..{stop} is out of range for a list of {len}"),
                    )
                })?;
            let data = self.seq().cell().data.cast::<Any>();
            // SAFETY: the first `len` slots are initialized; they leave the list (size 0) and
            // come back below.
            let mut all: Vec<Any> = (0..len).map(|i| unsafe { data.add(i).read() }).collect();
            self.seq().cell_mut().size = 0;
            let removed = all.splice(range.0..range.1, values).collect();
            self.reserve_locked(all.len());
            let data = self.seq().cell().data.cast::<Any>();
            let new_len = all.len();
            for (i, value) in all.into_iter().enumerate() {
                // SAFETY: capacity covers `new_len` slots, each written once.
                unsafe { data.add(i).write(value) };
            }
            self.seq().cell_mut().size = new_len as i64;
            removed
        };
        // Dropped without the lock: a destructor may run arbitrary code.
        drop(removed);
        Ok(())
    }

    /// Reverses the elements in place.
    pub fn reverse(&self) {
        let _lock = self.lock_for_mutation();
        let len = self.seq().len();
        let data = self.seq().cell().data.cast::<TVMFFIAny>();
        if len > 1 {
            // SAFETY: `len` initialized slots, permuted in place.
            unsafe { std::slice::from_raw_parts_mut(data, len).reverse() };
        }
    }

    /// A snapshot of the elements.
    pub fn to_vec(&self) -> Vec<Any> {
        let _lock = self.lock();
        self.seq().elements().to_vec()
    }

    /// The underlying object reference.
    pub fn as_object(&self) -> &ObjectRef<ListObj> {
        &self.obj
    }
}

impl Default for List {
    fn default() -> List {
        List::new()
    }
}

impl<T: Into<Any>> FromIterator<T> for List {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> List {
        let list = List::new();
        for v in iter {
            list.push(v);
        }
        list
    }
}

impl std::fmt::Debug for List {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.to_vec()).finish()
    }
}

/// Copies the elements of an array or list view.
fn seq_elements(view: &AnyView<'_>) -> Option<Vec<Any>> {
    let obj = view.as_object_ptr()?;
    matches!(view.type_index(), kTVMFFIArray | kTVMFFIList).then(|| {
        // A list may be mutated by another thread meanwhile: copy under its lock.
        let _lock = (view.type_index() == kTVMFFIList).then(|| ObjectLock::acquire(obj.cast()));
        // SAFETY: arrays and lists share the sequence layout; the view keeps the object alive.
        unsafe { (*obj.cast::<SeqObj>()).elements().to_vec() }
    })
}

impl From<Array> for Any {
    fn from(a: Array) -> Any {
        Any::from_object(a.obj)
    }
}

impl From<List> for Any {
    fn from(l: List) -> Any {
        Any::from_object(l.obj)
    }
}

impl TryFromAnyView for Array {
    const TYPE_NAME: &'static str = "ffi.Array";
    /// Accepts an array, or a list (copied).
    fn try_from_view(view: &AnyView<'_>) -> Option<Array> {
        if let Some(obj) = ObjectRef::<ArrayObj>::try_from_view(view) {
            return Some(Array { obj });
        }
        seq_elements(view).map(Array::from_vec)
    }
}

impl TryFromAnyView for List {
    const TYPE_NAME: &'static str = "ffi.List";
    /// Accepts a list, or an array (copied).
    fn try_from_view(view: &AnyView<'_>) -> Option<List> {
        if let Some(obj) = ObjectRef::<ListObj>::try_from_view(view) {
            return Some(List { obj });
        }
        seq_elements(view).map(|values| values.into_iter().collect())
    }
}
