//! Reference-counted objects with the 24-byte header of the C ABI.
//!
//! Reference counting is done inline on the header, exactly as C++ code compiled against the
//! header does it: strong count in the low 32 bits, weak count in the high 32 bits, and a deleter
//! called with flag bits saying whether to destroy the value, free the memory, or both.

use std::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{Ordering, fence};

use crate::abi::{
    self, TVMFFIObject, kTVMFFIObjectBothOne, kTVMFFIObjectDeleterFlagBitMaskStrong,
    kTVMFFIObjectDeleterFlagBitMaskWeak, kTVMFFIObjectWeakOne,
};
use crate::boundary::ffi_boundary;
use crate::error::{Error, ErrorKind};
use crate::types;

/// The root of every object type (`ffi.Object`): just the header.
#[repr(C)]
pub struct Object {
    header: TVMFFIObject,
}

impl Object {
    /// A header to embed in a new object value; allocation fills in the real fields.
    pub const fn header() -> Object {
        Object {
            header: TVMFFIObject {
                combined_ref_count: std::sync::atomic::AtomicU64::new(0),
                type_index: 0,
                __padding: 0,
                deleter: None,
            },
        }
    }

    /// The runtime type index stored in the header.
    pub fn type_index(&self) -> i32 {
        self.header.type_index
    }

    /// The current strong reference count.
    pub fn strong_count(&self) -> u32 {
        (self.header.combined_ref_count.load(Ordering::Relaxed) & 0xFFFF_FFFF) as u32
    }

    /// The current weak reference count (including the one held collectively by strong refs).
    pub fn weak_count(&self) -> u32 {
        (self.header.combined_ref_count.load(Ordering::Relaxed) >> 32) as u32
    }

    /// The type key of this object's runtime type.
    pub fn type_key(&self) -> String {
        types::type_key_of(self.type_index())
    }
}

/// An object type laid out for the C ABI.
///
/// # Safety
/// Implementors are `#[repr(C)]` and start with an [`Object`] (directly or through their parent
/// type), so that a pointer to the value is a pointer to its header; `type_index` returns the
/// index that the header of every live value of this type (or a subtype) carries.
pub unsafe trait ObjectCore: Sized + 'static {
    /// The registered type key, such as `"ffi.String"`.
    const TYPE_KEY: &'static str;

    /// The runtime type index of this type.
    fn type_index() -> i32;

    /// Whether an object whose header says `type_index` may be viewed as `Self`.
    fn is_instance(type_index: i32) -> bool {
        types::is_instance_of(type_index, Self::type_index())
    }
}

// SAFETY: `Object` is `#[repr(C)]` and is the header itself.
unsafe impl ObjectCore for Object {
    const TYPE_KEY: &'static str = "ffi.Object";
    fn type_index() -> i32 {
        abi::kTVMFFIObject
    }
    fn is_instance(_type_index: i32) -> bool {
        true
    }
}

/// Adds one strong reference.
///
/// # Safety
/// `obj` points at a live object header and the caller holds a strong reference to it.
#[inline]
pub unsafe fn inc_ref(obj: *mut TVMFFIObject) {
    // SAFETY: the caller guarantees `obj` is live.
    unsafe { (*obj).combined_ref_count.fetch_add(1, Ordering::Relaxed) };
}

/// Drops one strong reference, running the deleter as the protocol of the header prescribes.
///
/// # Safety
/// `obj` points at a live object header and the caller gives up one strong reference to it.
#[inline]
pub unsafe fn dec_ref(obj: *mut TVMFFIObject) {
    // SAFETY: the caller owns a strong reference, so the header is live until the deleter runs.
    let old = unsafe { (*obj).combined_ref_count.fetch_sub(1, Ordering::Release) };
    if old & 0xFFFF_FFFF == 1 {
        // SAFETY: that was the last strong reference, given up by the caller.
        unsafe { release_last_strong(obj, old) };
    }
}

thread_local! {
    /// Objects whose release [`dec_ref_deferred`] postponed while a release ran on this thread
    /// (`None`: no release is running).
    static DEFERRED: std::cell::RefCell<Option<Vec<usize>>> = const { std::cell::RefCell::new(None) };
}

/// Ends a release loop of [`dec_ref_deferred`], also when a deleter panics.
struct DeferredRelease;

impl Drop for DeferredRelease {
    fn drop(&mut self) {
        let _ = DEFERRED.try_with(|d| d.borrow_mut().take());
    }
}

/// [`dec_ref`] for a deleter releasing its fields: inside another such release on this thread,
/// the reference is queued and dropped by the outermost one, so freeing a long chain of objects
/// is a loop, not a recursion that overflows the stack.
///
/// # Safety
/// As for [`dec_ref`].
pub unsafe fn dec_ref_deferred(obj: *mut TVMFFIObject) {
    let queued = DEFERRED.try_with(|d| match d.borrow_mut().as_mut() {
        Some(queue) => {
            queue.push(obj as usize);
            true
        }
        None => false,
    });
    match queued {
        Ok(true) => return,
        // Thread-local storage is gone (the thread is exiting): release at once.
        // SAFETY: forwarded from the caller.
        Err(_) => return unsafe { dec_ref(obj) },
        Ok(false) => DEFERRED.with(|d| *d.borrow_mut() = Some(Vec::new())),
    }
    let _end = DeferredRelease;
    let mut next = Some(obj as usize);
    while let Some(addr) = next {
        // SAFETY: the caller's reference, or one a nested deleter gave up into the queue.
        unsafe { dec_ref(addr as *mut TVMFFIObject) };
        next = DEFERRED.with(|d| d.borrow_mut().as_mut().and_then(Vec::pop));
    }
}

/// The rest of [`dec_ref`] once the last strong reference is gone (`old` is the combined count
/// before the decrement): out of line, so that the common decrement stays a few instructions.
///
/// # Safety
/// The strong count of `obj` just dropped from 1 to 0.
#[inline(never)]
unsafe fn release_last_strong(obj: *mut TVMFFIObject, old: u64) {
    // SAFETY: the header stays live until the deleter frees it (weak flag).
    unsafe {
        let header = &*obj;
        fence(Ordering::Acquire);
        if old == kTVMFFIObjectBothOne {
            if let Some(deleter) = header.deleter {
                deleter(obj.cast(), abi::kTVMFFIObjectDeleterFlagBitMaskBoth);
            }
            return;
        }
        let deleter = header.deleter;
        if let Some(deleter) = deleter {
            deleter(obj.cast(), kTVMFFIObjectDeleterFlagBitMaskStrong);
        }
        let old_weak = header
            .combined_ref_count
            .fetch_sub(kTVMFFIObjectWeakOne, Ordering::Release);
        if old_weak == kTVMFFIObjectWeakOne {
            fence(Ordering::Acquire);
            if let Some(deleter) = deleter {
                deleter(obj.cast(), kTVMFFIObjectDeleterFlagBitMaskWeak);
            }
        }
    }
}

/// Destroys (strong flag) and frees (weak flag) an object allocated by [`alloc_object`].
///
/// # Safety
/// `obj` was allocated for `S`; the flags follow the header protocol.
pub(crate) unsafe fn destroy<S>(obj: *mut c_void, flags: c_int) {
    /// Frees the block when dropped: also when the value's destructor panics, so a failing
    /// `Drop` leaks at most what it owned, never the object itself.
    struct FreeBlock(*mut c_void);
    impl Drop for FreeBlock {
        fn drop(&mut self) {
            // SAFETY: the block came from `libc::malloc` in `alloc_object`, and no reference
            // remains (the weak flag was set).
            unsafe { libc::free(self.0) };
        }
    }
    let _free = (flags & kTVMFFIObjectDeleterFlagBitMaskWeak != 0).then(|| FreeBlock(obj));
    if flags & kTVMFFIObjectDeleterFlagBitMaskStrong != 0 {
        // SAFETY: the strong count reached zero, so nobody reads the value any more.
        unsafe { std::ptr::drop_in_place(obj.cast::<S>()) };
    }
}

/// How deep destructors may nest (a container releasing a container releasing ...) before
/// further releases are queued, so that dropping a deeply nested structure cannot overflow the
/// stack.
const MAX_NESTED_DROPS: u32 = 256;

/// A release queued by a deeply nested destructor.
type PendingDrop = (*mut c_void, c_int, unsafe fn(*mut c_void, c_int));

thread_local! {
    static DROP_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// Whether `PENDING_DROPS` may hold entries (a plain flag, cheap to read on every release).
    static HAS_PENDING_DROPS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// First in, first out: an object's destruction (strong flag) is queued before its memory
    /// release (weak flag) and must run first.
    static PENDING_DROPS: std::cell::RefCell<std::collections::VecDeque<PendingDrop>> =
        const { std::cell::RefCell::new(std::collections::VecDeque::new()) };
}

/// The deleter of objects allocated by [`alloc_object`]: drops the value and frees the block.
pub(crate) unsafe extern "C" fn rust_object_deleter<S>(obj: *mut c_void, flags: c_int) {
    // SAFETY: forwarded from the header protocol.
    unsafe { release_nested(obj, flags, destroy::<S>) }
}

/// Runs `destroy(obj, flags)` for a deleter; nested releases beyond [`MAX_NESTED_DROPS`] are
/// queued and run by the outermost one, so deep structures cannot overflow the stack. A panic
/// in a destructor stops at the panic boundary of that one release (raised as an
/// `InternalError`), and the bookkeeping stays intact. Inline, so that the deleter's own
/// `destroy` is a direct call; queueing and draining are out of line.
///
/// # Safety
/// `destroy` may be run with `obj` and `flags` (the deleter's arguments), once.
#[inline]
pub(crate) unsafe fn release_nested(
    obj: *mut c_void,
    flags: c_int,
    destroy: unsafe fn(*mut c_void, c_int),
) {
    ffi_boundary("an object deleter", || {
        let Ok(depth) = DROP_DEPTH.try_with(std::cell::Cell::get) else {
            // Thread teardown: no bookkeeping left, release right away.
            // SAFETY: forwarded from the header protocol.
            return unsafe { run_release(obj, flags, destroy) };
        };
        if depth >= MAX_NESTED_DROPS {
            return queue_release((obj, flags, destroy));
        }
        DROP_DEPTH.with(|d| d.set(depth + 1));
        // SAFETY: forwarded from the header protocol.
        unsafe { run_release(obj, flags, destroy) };
        if depth == 0 && HAS_PENDING_DROPS.with(std::cell::Cell::get) {
            run_pending_releases();
        }
        DROP_DEPTH.with(|d| d.set(depth));
    })
}

/// One release behind its own boundary.
///
/// # Safety
/// As for [`release_nested`].
#[inline]
unsafe fn run_release(obj: *mut c_void, flags: c_int, destroy: unsafe fn(*mut c_void, c_int)) {
    // SAFETY: forwarded from the header protocol.
    ffi_boundary("an object destructor", || unsafe { destroy(obj, flags) });
}

/// Queues a release nested too deep, for the outermost release to run.
#[cold]
#[inline(never)]
fn queue_release(release: PendingDrop) {
    PENDING_DROPS.with(|pending| pending.borrow_mut().push_back(release));
    HAS_PENDING_DROPS.with(|flag| flag.set(true));
}

/// Runs the queued releases, in order, from the outermost release (they may queue more).
#[cold]
#[inline(never)]
fn run_pending_releases() {
    while let Some((obj, flags, destroy)) = PENDING_DROPS.with(|p| p.borrow_mut().pop_front()) {
        // SAFETY: each queued release was handed over exactly once by the header protocol.
        unsafe { run_release(obj, flags, destroy) };
    }
    HAS_PENDING_DROPS.with(|flag| flag.set(false));
}

/// Allocates an object holding `value` followed by `extra` zeroed bytes, with a fresh header
/// (`type_index`, counts strong 1 / weak 1, a deleter that drops `S` then frees the block).
///
/// # Safety
/// `S` is `#[repr(C)]`, starts with an [`Object`], and its `Drop` releases whatever the caller
/// stores in the extra bytes.
pub unsafe fn alloc_object<S>(value: S, extra: usize, type_index: i32) -> NonNull<S> {
    // SAFETY: forwarded; the generic deleter matches `S`.
    unsafe { alloc_object_with_deleter(value, extra, type_index, rust_object_deleter::<S>) }
}

/// As [`alloc_object`], with a given deleter, which must honour the flag bits of the header
/// protocol and release the block with `libc::free`.
///
/// # Safety
/// As for [`alloc_object`], and `deleter` behaves as described.
pub unsafe fn alloc_object_with_deleter<S>(
    value: S,
    extra: usize,
    type_index: i32,
    deleter: unsafe extern "C" fn(*mut c_void, c_int),
) -> NonNull<S> {
    // SAFETY: forwarded.
    let ptr = unsafe { alloc_object_uninit_with_deleter(value, extra, type_index, deleter) };
    // SAFETY: the block has `extra` bytes after the value.
    unsafe { std::ptr::write_bytes(ptr.as_ptr().add(1).cast::<u8>(), 0, extra) };
    ptr
}

/// Writes a fresh header (`type_index`, counts strong 1 / weak 1, `deleter`) at the start of a
/// block, for objects that manage their own blocks (heap strings).
///
/// # Safety
/// `header` is valid for writes; `deleter` honours the flag bits of the header protocol and
/// releases the block the way it was allocated.
#[inline]
pub(crate) unsafe fn init_header(
    header: *mut TVMFFIObject,
    type_index: i32,
    deleter: unsafe extern "C" fn(*mut c_void, c_int),
) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        (*header).combined_ref_count = std::sync::atomic::AtomicU64::new(kTVMFFIObjectBothOne);
        (*header).type_index = type_index;
        (*header).__padding = 0;
        (*header).deleter = Some(deleter);
    }
}

/// The allocation behind [`alloc_object_with_deleter`], for callers that fill the `extra`
/// bytes right away (array elements, tensor dims).
///
/// # Safety
/// As for [`alloc_object_with_deleter`]; the extra bytes are left uninitialized.
pub(crate) unsafe fn alloc_object_uninit_with_deleter<S>(
    value: S,
    extra: usize,
    type_index: i32,
    deleter: unsafe extern "C" fn(*mut c_void, c_int),
) -> NonNull<S> {
    // SAFETY: forwarded.
    unsafe { try_alloc_object_uninit_with_deleter(value, extra, type_index, deleter) }
        .unwrap_or_else(|_| crate::spare_block::abort_out_of_memory(extra))
}

/// As [`alloc_object_uninit_with_deleter`], for objects whose `extra` bytes a caller sizes: a
/// `MemoryError` when the block does not fit in memory.
///
/// # Safety
/// As for [`alloc_object_uninit_with_deleter`].
pub(crate) unsafe fn try_alloc_object_uninit_with_deleter<S>(
    value: S,
    extra: usize,
    type_index: i32,
    deleter: unsafe extern "C" fn(*mut c_void, c_int),
) -> Result<NonNull<S>, Error> {
    assert!(
        std::mem::align_of::<S>() <= 16,
        "object alignment above 16 is not supported"
    );
    let size = std::mem::size_of::<S>().checked_add(extra);
    // SAFETY: malloc with a non-zero size; the result is checked for NULL below.
    let block = size.map(|size| unsafe { libc::malloc(size.max(1)) }.cast::<S>());
    let Some(ptr) = block.and_then(NonNull::new) else {
        return Err(Error::new(
            ErrorKind::MemoryError,
            format!("cannot allocate an object with {extra} bytes of content"),
        ));
    };
    // SAFETY: the block is large enough and suitably aligned (malloc alignment is 16); the
    // value fills the struct.
    unsafe {
        ptr.as_ptr().write(value);
        init_header(ptr.as_ptr().cast(), type_index, deleter);
    }
    Ok(ptr)
}

/// A strong reference to an object of type `T` (or a subtype).
#[repr(transparent)]
pub struct ObjectRef<T: ObjectCore> {
    ptr: NonNull<T>,
}

// SAFETY: objects are shared through atomic reference counts; object types used across threads
// keep their mutable state behind the protocols of their own types.
unsafe impl<T: ObjectCore + Send + Sync> Send for ObjectRef<T> {}
// SAFETY: as above.
unsafe impl<T: ObjectCore + Send + Sync> Sync for ObjectRef<T> {}

impl<T: ObjectCore> ObjectRef<T> {
    /// Allocates a new object holding `value`, with the type index of `T`.
    pub fn new(value: T) -> Self {
        // SAFETY: `T: ObjectCore` is repr(C) with a header first; no extra bytes are used.
        let ptr = unsafe { alloc_object(value, 0, T::type_index()) };
        ObjectRef { ptr }
    }

    /// Takes over one strong reference held in `ptr`.
    ///
    /// # Safety
    /// `ptr` points at a live object whose type is `T` or a subtype of it, and the caller
    /// transfers one strong reference.
    pub unsafe fn from_raw(ptr: *mut TVMFFIObject) -> Self {
        ObjectRef {
            ptr: NonNull::new(ptr.cast::<T>()).expect("null object pointer"),
        }
    }

    /// Creates a new strong reference from a borrowed pointer.
    ///
    /// # Safety
    /// As for [`ObjectRef::from_raw`], except that the caller keeps its own reference.
    pub unsafe fn from_borrowed(ptr: *mut TVMFFIObject) -> Self {
        // SAFETY: the caller holds a reference to a live object.
        unsafe {
            inc_ref(ptr);
            Self::from_raw(ptr)
        }
    }

    /// Gives up ownership, returning the header pointer that holds one strong reference.
    pub fn into_raw(self) -> *mut TVMFFIObject {
        let ptr = self.as_raw();
        std::mem::forget(self);
        ptr
    }

    /// The header pointer, borrowed.
    pub fn as_raw(&self) -> *mut TVMFFIObject {
        self.ptr.as_ptr().cast()
    }

    /// The object header.
    pub fn header(&self) -> &Object {
        // SAFETY: every object starts with its header and the reference keeps it alive.
        unsafe { &*self.ptr.as_ptr().cast::<Object>() }
    }

    /// The runtime type index of the referenced object.
    pub fn type_index(&self) -> i32 {
        self.header().type_index()
    }

    /// The strong reference count (the "use count").
    pub fn use_count(&self) -> u32 {
        self.header().strong_count()
    }

    /// Whether `self` and `other` are the same object.
    pub fn ptr_eq<U: ObjectCore>(&self, other: &ObjectRef<U>) -> bool {
        self.as_raw() == other.as_raw()
    }

    /// A weak reference to the same object.
    pub fn downgrade(&self) -> WeakRef<T> {
        self.header()
            .header
            .combined_ref_count
            .fetch_add(kTVMFFIObjectWeakOne, Ordering::Relaxed);
        WeakRef {
            ptr: self.ptr,
            _marker: PhantomData,
        }
    }

    /// Views this reference as a reference to the root object type.
    pub fn upcast(self) -> ObjectRef<Object> {
        // SAFETY: every object type starts with the root header; the reference is transferred.
        unsafe { ObjectRef::from_raw(self.into_raw()) }
    }

    /// Checks the runtime type and converts to a reference to `U`, or gives `self` back.
    pub fn downcast<U: ObjectCore>(self) -> Result<ObjectRef<U>, Self> {
        if U::is_instance(self.type_index()) {
            // SAFETY: the runtime type was checked; the reference is transferred.
            Ok(unsafe { ObjectRef::from_raw(self.into_raw()) })
        } else {
            Err(self)
        }
    }
}

impl<T: ObjectCore> Clone for ObjectRef<T> {
    fn clone(&self) -> Self {
        // SAFETY: `self` holds a strong reference.
        unsafe { inc_ref(self.as_raw()) };
        ObjectRef { ptr: self.ptr }
    }
}

impl<T: ObjectCore> Drop for ObjectRef<T> {
    fn drop(&mut self) {
        // SAFETY: `self` owns one strong reference, given up here.
        unsafe { dec_ref(self.as_raw()) }
    }
}

impl<T: ObjectCore> std::ops::Deref for ObjectRef<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the strong reference keeps the value alive.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: ObjectCore> std::fmt::Debug for ObjectRef<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({:p})", self.header().type_key(), self.as_raw())
    }
}

/// A weak reference: keeps the memory, not the value, alive.
pub struct WeakRef<T: ObjectCore> {
    ptr: NonNull<T>,
    _marker: PhantomData<T>,
}

// SAFETY: see `ObjectRef`.
unsafe impl<T: ObjectCore + Send + Sync> Send for WeakRef<T> {}
// SAFETY: see `ObjectRef`.
unsafe impl<T: ObjectCore + Send + Sync> Sync for WeakRef<T> {}

impl<T: ObjectCore> WeakRef<T> {
    fn header(&self) -> &TVMFFIObject {
        // SAFETY: a weak reference keeps the header memory alive.
        unsafe { &*self.ptr.as_ptr().cast::<TVMFFIObject>() }
    }

    /// A strong reference if the object is still alive.
    pub fn upgrade(&self) -> Option<ObjectRef<T>> {
        let count = &self.header().combined_ref_count;
        let mut current = count.load(Ordering::Relaxed);
        loop {
            if current & 0xFFFF_FFFF == 0 {
                return None;
            }
            match count.compare_exchange_weak(
                current,
                current + 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(ObjectRef { ptr: self.ptr }),
                Err(actual) => current = actual,
            }
        }
    }
}

impl<T: ObjectCore> Clone for WeakRef<T> {
    fn clone(&self) -> Self {
        self.header()
            .combined_ref_count
            .fetch_add(kTVMFFIObjectWeakOne, Ordering::Relaxed);
        WeakRef {
            ptr: self.ptr,
            _marker: PhantomData,
        }
    }
}

impl<T: ObjectCore> Drop for WeakRef<T> {
    fn drop(&mut self) {
        let header = self.header();
        let old = header
            .combined_ref_count
            .fetch_sub(kTVMFFIObjectWeakOne, Ordering::Release);
        if old == kTVMFFIObjectWeakOne {
            fence(Ordering::Acquire);
            if let Some(deleter) = header.deleter {
                // SAFETY: the last weak reference is gone; the value was already destroyed.
                unsafe {
                    deleter(
                        self.ptr.as_ptr().cast(),
                        kTVMFFIObjectDeleterFlagBitMaskWeak,
                    )
                };
            }
        }
    }
}
