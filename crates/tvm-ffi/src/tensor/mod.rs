//! `Tensor`: a `DLTensor` behind the object header (`ffi.Tensor`, index 70), exchanged with other
//! frameworks through DLPack without copies.
//!
//! Tensors made here always carry non-NULL strides when `ndim > 0`, as C++ consumers require.

use std::ffi::{c_int, c_void};

use crate::abi::{
    self, DLDataType, DLManagedTensor, DLManagedTensorVersioned, DLTensor, TVMFFIObjectHandle,
    kTVMFFITensor,
};
use crate::abi::{kTVMFFIObjectDeleterFlagBitMaskStrong, kTVMFFIObjectDeleterFlagBitMaskWeak};
use crate::any::{Any, AnyView, TryFromAnyView};
use crate::device::Device;
use crate::dtype::DataType;
use crate::error::{Error, ErrorKind, Result};
use crate::object::{Object, ObjectCore, ObjectRef, dec_ref, init_header, release_nested};
use crate::spare_block::{self, BlockKind};

mod dlpack;

/// The layout every producer shares: header, then the `DLTensor` at offset 24.
#[repr(C)]
pub struct TensorObj {
    base: Object,
    tensor: DLTensor,
}

// SAFETY: the descriptor is immutable after construction; the data it points at is shared
// memory whose synchronization is the users' business, as in DLPack.
unsafe impl Send for TensorObj {}
// SAFETY: as above.
unsafe impl Sync for TensorObj {}

// SAFETY: repr(C) with the header first.
unsafe impl ObjectCore for TensorObj {
    const TYPE_KEY: &'static str = "ffi.Tensor";
    fn type_index() -> i32 {
        kTVMFFITensor
    }
}

impl TensorObj {
    /// The DLPack descriptor.
    pub fn dltensor(&self) -> &DLTensor {
        &self.tensor
    }
}

/// What keeps a tensor's memory alive, as given when a tensor is made. The object keeps one
/// word of it ([`OwnerWord`]); which kind it is, is told by the deleter in its header.
enum TensorOwner {
    /// A legacy DLPack producer, released through its deleter.
    Managed(*mut DLManagedTensor),
    /// A versioned DLPack producer, released through its deleter.
    Versioned(*mut DLManagedTensorVersioned),
    /// Another object (the source of a view), held only to keep it alive.
    Source(Any),
    /// A buffer allocated here with `posix_memalign`.
    Buffer(*mut c_void),
    /// Memory of a foreign owner, released by calling this with the address of the owner's
    /// record, copied into the tensor's allocation after the dims.
    Foreign(unsafe extern "C" fn(*mut c_void)),
}

/// The kinds of [`TensorOwner`], the parameter of [`tensor_deleter`].
const MANAGED: u8 = 0;
const VERSIONED: u8 = 1;
const SOURCE: u8 = 2;
const BUFFER: u8 = 3;
const FOREIGN: u8 = 4;

/// The owner word of a tensor made here: the producer's record, the source object (NULL for a
/// source that is not an object), the buffer, or the foreign release function.
#[repr(C)]
union OwnerWord {
    ptr: *mut c_void,
    release: unsafe extern "C" fn(*mut c_void),
}

/// Tensors made by this runtime: the shared view and the owner word. Dims kept here (strides,
/// and the shape unless it is the producer's) and a foreign owner's record follow the struct in
/// the same allocation.
#[repr(C)]
struct TensorStorage {
    view: TensorObj,
    owner: OwnerWord,
}

/// Bit of a tensor deleter's `FLAGS`: the producer marked the data read-only (the tensor is in
/// the side table).
const READ_ONLY_FLAG: u8 = 1;
/// The bits of a tensor deleter's `FLAGS` above [`READ_ONLY_FLAG`]: the block's size class, an
/// index into [`POOLED_BLOCK_SIZES`] (0: a block of any size, freed).
const SIZE_CLASS_SHIFT: u8 = 1;

/// Bytes of the tensor blocks of each size class (class 0: not pooled). They are the usable
/// sizes of glibc's 96-, 112- and 128-byte chunks, so rounding a request up to its class costs
/// no memory: the object and one dim (a producer's tensor with strides, or of one dim without),
/// three (a producer's of three dims without strides, or a copied shape and strides of one
/// dim and an 8-byte record), or five. A thread keeps one spare block (of whichever class it
/// released last), so tensors made and released soon (one per kernel argument) skip `malloc`
/// and `free`.
const POOLED_BLOCK_SIZES: [usize; 4] = [
    0,
    size_of::<TensorStorage>() + size_of::<i64>(),
    size_of::<TensorStorage>() + 3 * size_of::<i64>(),
    size_of::<TensorStorage>() + 5 * size_of::<i64>(),
];

/// The size class of a block of `size` bytes (0 when it is larger than every class).
#[inline]
fn size_class(size: usize) -> u8 {
    if size <= POOLED_BLOCK_SIZES[1] {
        1
    } else if size <= POOLED_BLOCK_SIZES[2] {
        2
    } else if size <= POOLED_BLOCK_SIZES[3] {
        3
    } else {
        0
    }
}

/// The deleter of a tensor made here whose owner is of kind `KIND`, with the bits of `FLAGS`:
/// nested releases are bounded as for every object.
unsafe extern "C" fn tensor_deleter<const KIND: u8, const FLAGS: u8>(
    obj: *mut c_void,
    flags: c_int,
) {
    // SAFETY: forwarded from the header protocol.
    unsafe { release_nested(obj, flags, destroy_tensor::<KIND, FLAGS>) }
}

/// Releases the owner (strong flag) and frees the block (weak flag).
///
/// # Safety
/// `obj` is a tensor made here with an owner of kind `KIND` and the bits of `FLAGS`; the flags
/// follow the header protocol.
unsafe fn destroy_tensor<const KIND: u8, const FLAGS: u8>(obj: *mut c_void, flags: c_int) {
    if flags & kTVMFFIObjectDeleterFlagBitMaskStrong != 0 {
        if FLAGS & READ_ONLY_FLAG != 0 {
            // SAFETY: the mark is keyed by address only.
            unsafe { crate::abi::TVMFFIExtTensorMarkReadOnly(obj.cast_const(), 0) };
        }
        let storage = obj.cast::<TensorStorage>();
        // SAFETY: the deleter's kind says which owner word the tensor holds; each owner is
        // released exactly once (the strong flag comes once), as its producer prescribes.
        unsafe {
            let owner = &(*storage).owner;
            match KIND {
                MANAGED => {
                    let managed = owner.ptr.cast::<DLManagedTensor>();
                    if let Some(deleter) = (*managed).deleter {
                        deleter(managed);
                    }
                }
                VERSIONED => {
                    let managed = owner.ptr.cast::<DLManagedTensorVersioned>();
                    if let Some(deleter) = (*managed).deleter {
                        deleter(managed);
                    }
                }
                SOURCE => {
                    if !owner.ptr.is_null() {
                        dec_ref(owner.ptr.cast());
                    }
                }
                BUFFER => libc::free(owner.ptr),
                _ => {
                    // The record follows the shape and the strides.
                    let ndim = (*storage).view.tensor.ndim as usize;
                    let record = storage.add(1).cast::<i64>().add(2 * ndim);
                    (owner.release)(record.cast());
                }
            }
        }
    }
    if flags & kTVMFFIObjectDeleterFlagBitMaskWeak != 0 {
        let class = usize::from(FLAGS >> SIZE_CLASS_SHIFT);
        if class != 0 {
            // SAFETY: the block came from `spare_block::take` with its class's size and no
            // reference remains.
            unsafe { spare_block::give_back(BlockKind::Tensor, obj, POOLED_BLOCK_SIZES[class]) };
        } else {
            // SAFETY: the block came from `libc::malloc` and no reference remains.
            unsafe { libc::free(obj) };
        }
    }
}

/// A tensor deleter, as the header holds it.
type TensorDeleter = unsafe extern "C" fn(*mut c_void, c_int);

/// The deleters of every owner kind (the outer index) and every `FLAGS` value (the inner one:
/// [`READ_ONLY_FLAG`] and the size class).
static TENSOR_DELETERS: [[TensorDeleter; 8]; 5] = {
    macro_rules! with_flags {
        ($kind:expr) => {
            [
                tensor_deleter::<{ $kind }, 0>,
                tensor_deleter::<{ $kind }, 1>,
                tensor_deleter::<{ $kind }, 2>,
                tensor_deleter::<{ $kind }, 3>,
                tensor_deleter::<{ $kind }, 4>,
                tensor_deleter::<{ $kind }, 5>,
                tensor_deleter::<{ $kind }, 6>,
                tensor_deleter::<{ $kind }, 7>,
            ]
        };
    }
    [
        with_flags!(MANAGED),
        with_flags!(VERSIONED),
        with_flags!(SOURCE),
        with_flags!(BUFFER),
        with_flags!(FOREIGN),
    ]
};

impl TensorOwner {
    /// The kind and the word the object keeps (a source's object reference moves into it).
    fn into_word(self) -> (u8, OwnerWord) {
        match self {
            TensorOwner::Managed(m) => (MANAGED, OwnerWord { ptr: m.cast() }),
            TensorOwner::Versioned(m) => (VERSIONED, OwnerWord { ptr: m.cast() }),
            TensorOwner::Source(source) => {
                let raw = source.into_raw();
                let ptr = if raw.type_index >= abi::kTVMFFIStaticObjectBegin {
                    // SAFETY: an object value's payload is its object, whose reference moves
                    // into the word.
                    unsafe { raw.payload.v_obj.cast() }
                } else {
                    // SAFETY: the value was owned; a plain value keeps nothing alive.
                    drop(unsafe { Any::from_raw(raw) });
                    std::ptr::null_mut()
                };
                (SOURCE, OwnerWord { ptr })
            }
            TensorOwner::Buffer(ptr) => (BUFFER, OwnerWord { ptr }),
            TensorOwner::Foreign(release) => (FOREIGN, OwnerWord { release }),
        }
    }
}

/// Whether the tensor object at `obj` was made from a producer that marked it read-only (by any
/// library of the process: the marks are process state).
#[inline]
fn is_read_only(obj: *const crate::abi::TVMFFIObject) -> bool {
    // SAFETY: the query is keyed by address only. A failure (-1) counts as read-only.
    unsafe { crate::abi::TVMFFIExtTensorIsReadOnly(obj.cast()) != 0 }
}

/// Compact row-major strides of `shape` (wrapping, never panicking, for a shape whose element
/// count overflows `i64`, which no real tensor has).
pub fn compact_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    fill_compact_strides(shape, &mut strides);
    strides
}

/// Writes the compact row-major strides of `shape` into `strides` (of the same length).
fn fill_compact_strides(shape: &[i64], strides: &mut [i64]) {
    let mut stride = 1i64;
    for (dim, out) in shape.iter().zip(strides.iter_mut()).rev() {
        *out = stride;
        stride = stride.wrapping_mul((*dim).max(1));
    }
}

/// Whether `shape`/`strides` describe a compact row-major layout (size-1 dims ignored).
pub fn is_contiguous(shape: &[i64], strides: Option<&[i64]>) -> bool {
    let Some(strides) = strides else { return true };
    if shape.contains(&0) {
        return true;
    }
    // `None` once the compact stride no longer fits in `i64`: no stride can match it then.
    let mut expected = Some(1i64);
    for (dim, stride) in shape.iter().zip(strides).rev() {
        if *dim != 1 && Some(*stride) != expected {
            return false;
        }
        expected = expected.and_then(|e| e.checked_mul(*dim));
    }
    true
}

/// Devices whose data pointers are plain addresses (alignment is checked on the address).
fn is_direct_address(device_type: i32) -> bool {
    matches!(
        device_type,
        abi::kDLCPU
            | abi::kDLCUDA
            | abi::kDLCUDAHost
            | abi::kDLCUDAManaged
            | abi::kDLROCM
            | abi::kDLROCMHost
    )
}

/// The shape and strides of a descriptor from a producer (borrowed from it).
///
/// # Safety
/// `t` is a valid descriptor whose shape (and strides, if non-NULL) hold `ndim` values.
unsafe fn read_dims(t: &DLTensor) -> Result<(&[i64], Option<&[i64]>)> {
    let ndim = usize::try_from(t.ndim)
        .map_err(|_| Error::new(ErrorKind::ValueError, format!("negative ndim {}", t.ndim)))?;
    if ndim == 0 {
        return Ok((&[], None));
    }
    if t.shape.is_null() {
        crate::bail!(
            ErrorKind::ValueError,
            "tensor with ndim {ndim} has a NULL shape"
        );
    }
    // SAFETY: guaranteed by the caller.
    let shape = unsafe { std::slice::from_raw_parts(t.shape, ndim) };
    // SAFETY: as above.
    let strides =
        (!t.strides.is_null()).then(|| unsafe { std::slice::from_raw_parts(t.strides, ndim) });
    Ok((shape, strides))
}

/// Checks the import requirements of a DLPack import (non-negative dims whose element count fits
/// in `i64`, a non-empty dtype, alignment, contiguity). Always inline: its few checks cost less
/// than a call's saved registers.
#[inline(always)]
fn check_import(
    t: &DLTensor,
    shape: &[i64],
    strides: Option<&[i64]>,
    require_alignment: i32,
    require_contiguous: bool,
) -> Result<()> {
    // One pass: the element count (wrapped, with a flag once it overflows) and whether a
    // dimension is 0.
    let mut count = 1i64;
    let mut overflow = false;
    let mut empty = false;
    for &dim in shape {
        if dim < 0 {
            return Err(negative_dim_error(shape, dim));
        }
        empty |= dim == 0;
        let (next, wrapped) = count.overflowing_mul(dim);
        count = next;
        overflow |= wrapped;
    }
    if !empty && overflow {
        return Err(import_error(ImportError::TooLarge, t, shape, strides, 0));
    }
    if t.dtype.bits == 0 || t.dtype.lanes == 0 {
        return Err(import_error(ImportError::EmptyDtype, t, shape, strides, 0));
    }
    if require_alignment != 0 {
        if require_alignment < 0 || !(require_alignment as u32).is_power_of_two() {
            return Err(bad_alignment_error(require_alignment));
        }
        let align = require_alignment as u64;
        if !data_address(t).is_multiple_of(align) {
            return Err(import_error(
                ImportError::Unaligned,
                t,
                shape,
                strides,
                align,
            ));
        }
    }
    if require_contiguous && !is_contiguous(shape, strides) {
        return Err(import_error(
            ImportError::NotContiguous,
            t,
            shape,
            strides,
            0,
        ));
    }
    Ok(())
}

/// The address whose alignment an import checks: the data address plus the offset on devices
/// with plain addresses, the offset alone elsewhere.
fn data_address(t: &DLTensor) -> u64 {
    if is_direct_address(t.device.device_type) {
        (t.data as u64).wrapping_add(t.byte_offset)
    } else {
        t.byte_offset
    }
}

/// The import checks that can fail after the dims were read.
enum ImportError {
    TooLarge,
    EmptyDtype,
    Unaligned,
    NotContiguous,
}

/// The message of a failed import check (out of line, so that the checks themselves keep
/// nothing aside for it).
#[cold]
#[inline(never)]
fn import_error(
    what: ImportError,
    t: &DLTensor,
    shape: &[i64],
    strides: Option<&[i64]>,
    align: u64,
) -> Error {
    let message = match what {
        ImportError::TooLarge => {
            format!("tensor shape {shape:?} has more elements than fit in int64")
        }
        ImportError::EmptyDtype => format!(
            "tensor dtype {} has {} bits and {} lanes; both must be at least 1",
            DataType(t.dtype),
            t.dtype.bits,
            t.dtype.lanes
        ),
        ImportError::Unaligned => format!(
            "tensor data at {:#x} is not aligned to {align} bytes",
            data_address(t)
        ),
        ImportError::NotContiguous => {
            let strides = strides.unwrap_or_default();
            format!("tensor with shape {shape:?} and strides {strides:?} is not contiguous")
        }
    };
    Error::new(ErrorKind::ValueError, message)
}

/// The error of a write into a read-only tensor (out of line: the check stays small).
#[cold]
#[inline(never)]
fn read_only_error(tensor: &Tensor) -> Error {
    Error::new(
        ErrorKind::ValueError,
        format!(
            "assignment destination is read-only: {tensor:?} at {:p} shares the memory of a \
             read-only producer (a read-only numpy array or memmap, a DLPack export flagged \
             read-only); copy it to a new tensor to write",
            tensor.data_ptr()
        ),
    )
}

/// The error of a `require_alignment` that is neither 0 (no requirement) nor a power of two.
#[cold]
#[inline(never)]
fn bad_alignment_error(require_alignment: i32) -> Error {
    Error::new(
        ErrorKind::ValueError,
        format!(
            "require_alignment must be 0 (none) or a positive power of two, got {require_alignment}"
        ),
    )
}

/// The error of a negative dimension at import (out of line: the check loop stays small).
#[cold]
#[inline(never)]
fn negative_dim_error(shape: &[i64], dim: i64) -> Error {
    Error::new(
        ErrorKind::ValueError,
        format!("tensor shape {shape:?} has a negative dimension {dim}"),
    )
}

/// Builds a tensor object over `prototype`'s data, owned by `owner`; shape and strides are
/// copied (compact strides are filled in when `strides` is `None`).
fn make_tensor(
    prototype: &DLTensor,
    shape: &[i64],
    strides: Option<&[i64]>,
    owner: TensorOwner,
    read_only: bool,
) -> Tensor {
    build_tensor(prototype, shape, strides, &[], owner, read_only)
}

/// As [`make_tensor`], also copying an owner `record` into the object's allocation (after the
/// dims, 8-byte aligned), where a foreign owner's release finds it.
fn build_tensor(
    prototype: &DLTensor,
    shape: &[i64],
    strides: Option<&[i64]>,
    record: &[u8],
    owner: TensorOwner,
    read_only: bool,
) -> Tensor {
    let ndim = shape.len();
    let extra = 2 * ndim * size_of::<i64>() + record.len();
    let ptr = new_storage(prototype, owner, read_only, extra);
    // SAFETY: the object is new; the dims and the record live right after the struct (8-byte
    // aligned, since the struct's size and the dims' are multiples of 8).
    unsafe {
        let dims = ptr.add(1).cast::<i64>();
        std::ptr::copy_nonoverlapping(shape.as_ptr(), dims, ndim);
        match strides {
            Some(strides) => std::ptr::copy_nonoverlapping(strides.as_ptr(), dims.add(ndim), ndim),
            None => {
                fill_compact_strides(shape, std::slice::from_raw_parts_mut(dims.add(ndim), ndim))
            }
        }
        let record_ptr = dims.add(2 * ndim).cast::<u8>();
        std::ptr::copy_nonoverlapping(record.as_ptr(), record_ptr, record.len());
        let tensor = &mut (*ptr).view.tensor;
        tensor.ndim = ndim as i32;
        (tensor.shape, tensor.strides) = if ndim == 0 {
            (std::ptr::null_mut(), std::ptr::null_mut())
        } else {
            (dims, dims.add(ndim))
        };
    }
    finish_storage(ptr, read_only)
}

/// A tensor of a DLPack producer's descriptor `t` (checked, with `shape` and `strides` read
/// from it): like the producer's own consumers, it keeps pointing at the producer's shape and
/// strides, which live as long as the record it owns; compact strides are computed into the
/// object when the producer has none.
fn import_tensor(
    t: &DLTensor,
    shape: &[i64],
    strides: Option<&[i64]>,
    owner: TensorOwner,
    read_only: bool,
) -> Tensor {
    let ndim = shape.len();
    let extra = if strides.is_none() {
        std::mem::size_of_val(shape)
    } else {
        0
    };
    let ptr = new_storage(t, owner, read_only, extra);
    // SAFETY: the object is new; the computed strides live right after the struct.
    unsafe {
        let tensor = &mut (*ptr).view.tensor;
        if ndim == 0 {
            (tensor.shape, tensor.strides) = (std::ptr::null_mut(), std::ptr::null_mut());
        } else if strides.is_none() {
            let own = ptr.add(1).cast::<i64>();
            fill_compact_strides(shape, std::slice::from_raw_parts_mut(own, ndim));
            tensor.strides = own;
        }
    }
    finish_storage(ptr, read_only)
}

/// A new tensor object: a copy of `prototype` (shape and strides to be set by the caller), the
/// owner's word and its deleter, and `extra` uninitialized bytes after the struct. A block
/// that fits a size class is the thread's spare of that class or a new one of the class's
/// size.
#[inline]
fn new_storage(
    prototype: &DLTensor,
    owner: TensorOwner,
    read_only: bool,
    extra: usize,
) -> *mut TensorStorage {
    let (kind, owner) = owner.into_word();
    let size = size_of::<TensorStorage>()
        .checked_add(extra)
        .expect("tensor object size overflows");
    let class = size_class(size);
    let block = if class != 0 {
        spare_block::take(BlockKind::Tensor, POOLED_BLOCK_SIZES[usize::from(class)])
    } else {
        spare_block::allocate(size)
    };
    let flags = class << SIZE_CLASS_SHIFT | u8::from(read_only);
    let ptr = block.cast::<TensorStorage>();
    // SAFETY: the block holds a `TensorStorage` (malloc alignment suits it): the header goes
    // first, as in every object, with the deleter that matches the owner's kind and the
    // block's origin; the fields after it are written in place, and the caller writes the
    // extra bytes before anything reads them.
    unsafe {
        init_header(
            ptr.cast(),
            kTVMFFITensor,
            TENSOR_DELETERS[usize::from(kind)][usize::from(flags)],
        );
        (&raw mut (*ptr).view.tensor).write(*prototype);
        (&raw mut (*ptr).owner).write(owner);
    }
    ptr
}

/// Registers a read-only tensor and wraps the new object.
#[inline]
fn finish_storage(ptr: *mut TensorStorage, read_only: bool) -> Tensor {
    if read_only {
        register_read_only(ptr);
    }
    // SAFETY: the new object's reference moves into the tensor.
    let obj = unsafe { ObjectRef::from_raw(ptr.cast()) };
    Tensor { obj }
}

/// Adds a new tensor to the read-only side table (out of line: read-only producers are rare).
#[cold]
#[inline(never)]
fn register_read_only(ptr: *mut TensorStorage) {
    // SAFETY: the mark is keyed by address only.
    let rc = unsafe { crate::abi::TVMFFIExtTensorMarkReadOnly(ptr.cast_const().cast(), 1) };
    // Fails only by a panic inside the runtime, which it has reported in the error slot.
    assert_eq!(rc, 0, "the runtime failed to mark a tensor read-only");
}

/// Element types with a DLPack data type.
///
/// # Safety
/// `DTYPE` describes `Self` exactly (size, representation).
pub unsafe trait Element: Copy + 'static {
    /// The data type of one element.
    const DTYPE: DLDataType;
}

macro_rules! elements {
    ($($t:ty => $code:expr, $bits:expr;)*) => {$(
        // SAFETY: the code and bit width describe the Rust type.
        unsafe impl Element for $t {
            const DTYPE: DLDataType = DLDataType { code: $code, bits: $bits, lanes: 1 };
        }
    )*};
}

elements! {
    i8 => abi::kDLInt, 8; i16 => abi::kDLInt, 16; i32 => abi::kDLInt, 32; i64 => abi::kDLInt, 64;
    u8 => abi::kDLUInt, 8; u16 => abi::kDLUInt, 16; u32 => abi::kDLUInt, 32; u64 => abi::kDLUInt, 64;
    f32 => abi::kDLFloat, 32; f64 => abi::kDLFloat, 64; bool => abi::kDLBool, 8;
}

/// A reference to a tensor.
#[derive(Clone)]
pub struct Tensor {
    obj: ObjectRef<TensorObj>,
}

impl Tensor {
    /// The descriptor of a compact tensor of `shape`, `dtype` and `device` without data, as
    /// allocators take it (`TVMFFIEnvTensorAlloc`); a `ValueError` for a negative dimension. It
    /// points at `shape`, which must outlive its use.
    pub fn prototype(shape: &[i64], dtype: DataType, device: Device) -> Result<DLTensor> {
        if let Some(bad) = shape.iter().find(|d| **d < 0) {
            crate::bail!(
                ErrorKind::ValueError,
                "negative dimension {bad} in shape {shape:?}"
            );
        }
        Ok(DLTensor {
            data: std::ptr::null_mut(),
            device: device.0,
            ndim: shape.len() as i32,
            dtype: dtype.0,
            shape: shape.as_ptr().cast_mut(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        })
    }

    /// A zero-filled CPU tensor, 64-byte aligned. Other devices allocate through the
    /// environment's tensor allocator (`TVMFFIEnvTensorAlloc`).
    pub fn empty(shape: &[i64], dtype: DataType, device: Device) -> Result<Tensor> {
        let prototype = Tensor::prototype(shape, dtype, device)?;
        if device.device_type() != abi::kDLCPU {
            let mut prototype = prototype;
            let mut out = std::ptr::null_mut();
            // SAFETY: the prototype is valid for the call; the result is an owned tensor.
            let rc = unsafe { abi::TVMFFIEnvTensorAlloc(&mut prototype, &mut out) };
            if rc != 0 {
                return Err(Error::take_raised_or(ErrorKind::RuntimeError, device));
            }
            // SAFETY: a successful allocation returns one owned tensor reference.
            let obj = unsafe { ObjectRef::from_raw(out.cast()) };
            return Ok(Tensor { obj });
        }
        let numel = shape
            .iter()
            .try_fold(1usize, |acc, d| acc.checked_mul(*d as usize));
        let bytes = numel
            .and_then(|n| n.checked_mul(dtype.itemsize()))
            .ok_or_else(|| {
                Error::new(ErrorKind::ValueError, format!("shape {shape:?} too large"))
            })?;
        let mut data = std::ptr::null_mut();
        // SAFETY: posix_memalign with a power-of-two alignment; checked below.
        if unsafe { libc::posix_memalign(&mut data, 64, bytes.max(1)) } != 0 {
            crate::bail!(
                ErrorKind::MemoryError,
                "cannot allocate {bytes} bytes for a tensor"
            );
        }
        // SAFETY: the buffer holds `bytes` writable bytes.
        unsafe { std::ptr::write_bytes(data.cast::<u8>(), 0, bytes) };
        let prototype = DLTensor { data, ..prototype };
        Ok(make_tensor(
            &prototype,
            shape,
            None,
            TensorOwner::Buffer(data),
            false,
        ))
    }

    /// A CPU tensor holding a copy of `data` with the given shape.
    pub fn from_slice<T: Element>(data: &[T], shape: &[i64]) -> Result<Tensor> {
        let numel: i64 = shape.iter().product();
        if numel != data.len() as i64 {
            crate::bail!(
                ErrorKind::ValueError,
                "shape {shape:?} holds {numel} elements, but {} were given",
                data.len()
            );
        }
        let tensor = Tensor::empty(shape, DataType(T::DTYPE), Device::cpu(0))?;
        // SAFETY: the new buffer has room for `data.len()` elements of `T`.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), tensor.data_ptr().cast::<T>(), data.len())
        };
        Ok(tensor)
    }

    /// Wraps memory owned by a foreign object (a Python buffer, say) described by `prototype`.
    /// The owner is described by `record` (plain bytes, such as a `Py_buffer`), which is copied
    /// into the tensor's own allocation: `release(copy)` runs exactly once when the tensor dies,
    /// or with `record` itself right away if this fails.
    ///
    /// # Safety
    /// `prototype` is a valid descriptor of memory that stays valid until `release` runs;
    /// `record` stays meaningful when moved to another address.
    pub unsafe fn from_foreign(
        prototype: &DLTensor,
        read_only: bool,
        record: &mut [u8],
        release: unsafe extern "C" fn(*mut c_void),
    ) -> Result<Tensor> {
        // SAFETY: guaranteed by the caller.
        match unsafe { read_dims(prototype) } {
            Ok((shape, strides)) => Ok(build_tensor(
                prototype,
                shape,
                strides,
                record,
                TensorOwner::Foreign(release),
                read_only,
            )),
            Err(err) => {
                // SAFETY: the owner is released exactly once.
                unsafe { release(record.as_mut_ptr().cast()) };
                Err(err)
            }
        }
    }

    /// The DLPack descriptor.
    pub fn dltensor(&self) -> &DLTensor {
        self.obj.dltensor()
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.dltensor().ndim.max(0) as usize
    }

    /// The dimensions.
    pub fn shape(&self) -> &[i64] {
        let t = self.dltensor();
        if self.ndim() == 0 || t.shape.is_null() {
            return &[];
        }
        // SAFETY: the descriptor's shape holds `ndim` values for the tensor's life.
        unsafe { std::slice::from_raw_parts(t.shape, self.ndim()) }
    }

    /// The strides in elements (compact strides are filled in when the producer had none).
    pub fn strides(&self) -> std::borrow::Cow<'_, [i64]> {
        let t = self.dltensor();
        if self.ndim() == 0 {
            return std::borrow::Cow::Borrowed(&[]);
        }
        if t.strides.is_null() {
            return std::borrow::Cow::Owned(compact_strides(self.shape()));
        }
        // SAFETY: as for the shape.
        std::borrow::Cow::Borrowed(unsafe { std::slice::from_raw_parts(t.strides, self.ndim()) })
    }

    /// The element data type.
    pub fn dtype(&self) -> DataType {
        DataType(self.dltensor().dtype)
    }

    /// The device holding the data.
    pub fn device(&self) -> Device {
        Device(self.dltensor().device)
    }

    /// Number of elements (0 when a dimension is 0, even if the others' product overflows).
    pub fn numel(&self) -> i64 {
        let shape = self.shape();
        if shape.contains(&0) {
            return 0;
        }
        // Imports refuse element counts past `i64`; views and foreign memory are the caller's
        // word, so wrap rather than panic there.
        shape.iter().fold(1i64, |n, d| n.wrapping_mul(*d))
    }

    /// Whether the layout is compact row-major.
    pub fn is_contiguous(&self) -> bool {
        is_contiguous(self.shape(), Some(&self.strides()))
    }

    /// Checks what a DLPack import checks, `require_alignment` (bytes, 0 for none) and
    /// `require_contiguous` included, for a tensor that arrived some other way: a `ValueError`
    /// when it falls short.
    pub fn check_import_requirements(
        &self,
        require_alignment: i32,
        require_contiguous: bool,
    ) -> Result<()> {
        check_import(
            self.dltensor(),
            self.shape(),
            Some(&self.strides()),
            require_alignment,
            require_contiguous,
        )
    }

    /// Address of the first element (`data + byte_offset`).
    pub fn data_ptr(&self) -> *mut c_void {
        let t = self.dltensor();
        t.data
            .cast::<u8>()
            .wrapping_add(t.byte_offset as usize)
            .cast()
    }

    /// Whether the producer marked the data read-only (only known for tensors made here).
    #[inline]
    pub fn is_read_only(&self) -> bool {
        is_read_only(self.obj.as_raw())
    }

    /// Refuses to let the tensor be written (a copy into it, a kernel's output) when its
    /// producer marked it read-only: the `ValueError` numpy gives for the same write
    /// (`assignment destination is read-only`), naming the tensor.
    #[inline]
    pub fn check_writable(&self) -> Result<()> {
        if self.is_read_only() {
            return Err(read_only_error(self));
        }
        Ok(())
    }

    /// The elements of a contiguous CPU tensor of element type `T`, or a `TypeError`/`ValueError`.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        if self.dtype().0 != T::DTYPE {
            crate::bail!(
                ErrorKind::TypeError,
                "tensor has dtype {}, not {}",
                self.dtype(),
                DataType(T::DTYPE)
            );
        }
        if self.device().device_type() != abi::kDLCPU {
            crate::bail!(
                ErrorKind::ValueError,
                "tensor is on {}, not the CPU",
                self.device()
            );
        }
        if !self.is_contiguous() {
            crate::bail!(ErrorKind::ValueError, "tensor is not contiguous");
        }
        let len = self.numel() as usize;
        if len == 0 {
            return Ok(&[]);
        }
        // SAFETY: a contiguous CPU tensor of `T` holds `numel` elements at `data_ptr`.
        Ok(unsafe { std::slice::from_raw_parts(self.data_ptr().cast::<T>(), len) })
    }

    /// A view sharing this tensor's data with a new descriptor (shape/strides copied).
    ///
    /// # Safety
    /// `prototype`'s data lies within this tensor's memory.
    pub unsafe fn view(&self, prototype: &DLTensor) -> Result<Tensor> {
        // SAFETY: forwarded; this tensor keeps its memory alive.
        unsafe { Tensor::view_of(self.clone().into(), prototype) }
    }

    /// The same memory seen as elements of `dtype`, which must have this tensor's element size
    /// (bfloat16 as uint16, say); shape, strides and byte offset are kept.
    pub fn with_dtype(&self, dtype: DataType) -> Result<Tensor> {
        let own = self.dtype();
        let bits = |t: DataType| u32::from(t.bits()) * u32::from(t.lanes());
        if bits(own) != bits(dtype) || bits(dtype) % 8 != 0 {
            crate::bail!(
                ErrorKind::ValueError,
                "cannot view a {own} tensor as {dtype}: element sizes differ ({} and {} bits)",
                bits(own),
                bits(dtype)
            );
        }
        let mut strides = self.strides().into_owned();
        let mut prototype = *self.dltensor();
        prototype.dtype = dtype.0;
        prototype.strides = strides.as_mut_ptr();
        // SAFETY: the same data, shape, strides and offset with elements of the same size lie in
        // this tensor's memory; the view reads its shape and strides before this returns.
        unsafe { self.view(&prototype) }
    }

    /// Moves this reference out as a raw object handle (for C callers, who release it).
    pub fn into_raw_handle(self) -> TVMFFIObjectHandle {
        self.obj.into_raw().cast()
    }

    /// The underlying object reference.
    pub fn as_object(&self) -> &ObjectRef<TensorObj> {
        &self.obj
    }

    /// Wraps a tensor object reference.
    pub fn from_object(obj: ObjectRef<TensorObj>) -> Tensor {
        Tensor { obj }
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor(shape={:?}, dtype={}, device={})",
            self.shape(),
            self.dtype(),
            self.device()
        )
    }
}

impl From<Tensor> for Any {
    fn from(t: Tensor) -> Any {
        Any::from_object(t.obj)
    }
}

impl TryFromAnyView for Tensor {
    const TYPE_NAME: &'static str = "ffi.Tensor";
    fn try_from_view(view: &AnyView<'_>) -> Option<Tensor> {
        ObjectRef::<TensorObj>::try_from_view(view).map(|obj| Tensor { obj })
    }
}
