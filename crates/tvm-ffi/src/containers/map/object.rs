//! Allocation, ownership and release of map objects: objects made here (recognised by their
//! deleter, always with room for the inline pairs), the release of their entries and blocks,
//! the map behind a view, and the lock of a dict.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::mem::ManuallyDrop;
use std::ptr::{self, NonNull, addr_of_mut};
use std::sync::atomic::AtomicU64;

use crate::abi::{TVMFFIAny, TVMFFIObject, kTVMFFIDict, kTVMFFIMap, kTVMFFIObjectBothOne};
use crate::any::{Any, AnyView};
use crate::containers::sync::ObjectLock;
use crate::object::Object;

use super::dense::{Dense, is_live};
use super::layout::{
    BASE_SIZE, INLINE_KVS, Kv, MapBaseObj, MapCell, NO_SLOT, SMALL_FLAG, SMALL_INIT, cell,
};

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
pub(super) unsafe fn drop_kv(kv: Kv) {
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
#[inline]
pub(super) unsafe fn clone_raw(v: &TVMFFIAny) -> TVMFFIAny {
    // SAFETY: the borrowed value is not dropped (ManuallyDrop); the clone gains its reference.
    let borrowed = ManuallyDrop::new(unsafe { Any::from_raw(*v) });
    Any::clone(&borrowed).into_raw()
}

/// Deleter of objects made here (by [`alloc_empty`]): lets them be recognised (and so known to have room for
/// [`INLINE_KVS`] inline pairs).
unsafe extern "C" fn map_object_deleter(obj: *mut c_void, flags: c_int) {
    // SAFETY: the object is a `MapBaseObj` in a `malloc` block made here; nested releases are
    // queued like those of every object made by this crate.
    unsafe { crate::object::release_nested(obj, flags, crate::object::destroy::<MapBaseObj>) }
}

/// The deleter installed in (and compared against for) objects made here, reified once so that
/// every use sees the same address.
static OWN_DELETER: unsafe extern "C" fn(*mut c_void, c_int) = map_object_deleter;

/// `data_deleter_` of the dense blocks made here (`malloc`ed).
pub(super) unsafe extern "C" fn free_blocks(data: *mut c_void) {
    // SAFETY: dense blocks come from `libc::malloc`; `free(NULL)` is a no-op.
    unsafe { libc::free(data) };
}

/// Whether the object was made here (and so has room for [`INLINE_KVS`] inline pairs).
///
/// # Safety
/// `p` points at a live map object.
pub(super) unsafe fn is_own_object(p: *mut MapBaseObj) -> bool {
    // SAFETY: every object starts with its header.
    let deleter = unsafe { (*p.cast::<TVMFFIObject>()).deleter };
    deleter.is_some_and(|d| ptr::fn_addr_eq(d, OWN_DELETER))
}

/// How many inline pairs the small object at `p` has room for.
///
/// # Safety
/// `p` points at a live map object in the small layout.
pub(super) unsafe fn small_room(p: *mut MapBaseObj) -> u64 {
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
/// [`map_object_deleter`], its inline pairs zero-filled. `malloc` and a fill of the pairs rather
/// than `calloc`: glibc's `calloc` bypasses the per-thread cache and searches the bins on every
/// call (100-190 instructions against about 40); filling only the pairs (the struct is written
/// below) also keeps the compiler from turning the pair back into a `calloc`.
pub(super) fn alloc_empty(type_index: i32) -> NonNull<MapBaseObj> {
    let size = BASE_SIZE + INLINE_KVS * std::mem::size_of::<Kv>();
    let block = crate::spare_block::allocate(size).cast::<MapBaseObj>();
    let obj = NonNull::new(block).expect("allocate never returns NULL");
    // SAFETY: the block has `size` writable bytes, the pairs from `BASE_SIZE` on.
    unsafe { std::ptr::write_bytes(block.cast::<u8>().add(BASE_SIZE), 0, size - BASE_SIZE) };
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

/// The map object behind a view of a map or dict.
pub(super) fn map_ptr_of(view: &AnyView<'_>) -> Option<*mut MapBaseObj> {
    let obj = view.as_object_ptr()?;
    matches!(view.type_index(), kTVMFFIMap | kTVMFFIDict).then_some(obj.cast())
}

/// The lock of a dict (`ffi.Dict` is shared-mutable, see [`crate::containers::sync`]); maps
/// are never mutated once shared and need none.
///
/// # Safety
/// `p` points at a live map object.
pub(crate) unsafe fn lock_if_dict(p: *mut MapBaseObj) -> Option<ObjectLock> {
    // SAFETY: per the caller.
    unsafe { is_dict(p) }.then(|| ObjectLock::acquire(p.cast()))
}

/// Whether the object is an `ffi.Dict`.
///
/// # Safety
/// `p` points at a live map object.
pub(super) unsafe fn is_dict(p: *mut MapBaseObj) -> bool {
    // SAFETY: per the caller; the header comes first.
    unsafe { (*p.cast::<TVMFFIObject>()).type_index == kTVMFFIDict }
}
