//! The `dlpack_import` target: managed tensors with arbitrary descriptors (over a real host
//! buffer) imported through the safe API and the C ABI, with the ownership rule checked by
//! counting deleter calls.

use std::cell::Cell;
use std::ffi::c_void;

use tvm_ffi::abi::{
    self, DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor,
    TVMFFIObjectHandle,
};
use tvm_ffi::object::ObjectRef;
use tvm_ffi::tensor::TensorObj;
use tvm_ffi::{Any, DataType, Device, Error, Tensor};

use crate::input::Input;

thread_local! {
    /// Deleter calls of the producers made on this thread.
    static DELETED: Cell<u64> = const { Cell::new(0) };
}

fn deleted() -> u64 {
    DELETED.with(Cell::get)
}

/// Words of host memory behind every producer (8-byte aligned, so offsets pick the alignment).
const BUFFER_WORDS: usize = 64;

/// A producer's allocation: the managed tensor first (its address is the producer's), then
/// what its descriptor points at.
#[repr(C)]
struct Producer<M> {
    managed: M,
    shape: Vec<i64>,
    strides: Vec<i64>,
    buffer: Vec<u64>,
}

/// Frees a versioned producer and counts the call.
unsafe extern "C" fn delete_versioned(managed: *mut DLManagedTensorVersioned) {
    // SAFETY: made by `Box::into_raw` of a `Producer` whose first field is `managed`; the
    // ownership rule promises one call.
    let producer = unsafe { Box::from_raw(managed.cast::<Producer<DLManagedTensorVersioned>>()) };
    assert_eq!(producer.managed.manager_ctx, managed.cast::<c_void>());
    drop(producer);
    DELETED.with(|d| d.set(d.get() + 1));
}

/// Frees a legacy producer and counts the call.
unsafe extern "C" fn delete_legacy(managed: *mut DLManagedTensor) {
    // SAFETY: as for `delete_versioned`.
    let producer = unsafe { Box::from_raw(managed.cast::<Producer<DLManagedTensor>>()) };
    assert_eq!(producer.managed.manager_ctx, managed.cast::<c_void>());
    drop(producer);
    DELETED.with(|d| d.set(d.get() + 1));
}

/// The magic word a foreign owner record carries.
const RECORD_MAGIC: u64 = 0x7e57_f0e1_9a0c_0de5;

/// Releases a foreign owner record (checks that it is a copy of ours) and counts the call.
unsafe extern "C" fn release_record(record: *mut c_void) {
    // SAFETY: the record is 16 readable bytes (possibly unaligned: it may be the caller's).
    let magic = unsafe { record.cast::<u64>().read_unaligned() };
    assert_eq!(magic, RECORD_MAGIC, "release got a record that is not ours");
    DELETED.with(|d| d.set(d.get() + 1));
}

/// Everything a producer's descriptor and the import call are made of.
#[derive(Debug, Clone)]
struct Case {
    versioned: bool,
    through_c: bool,
    ndim: i32,
    shape: Vec<i64>,
    null_shape: bool,
    strides: Option<Vec<i64>>,
    dtype: DLDataType,
    byte_offset: u64,
    version: DLPackVersion,
    flags: u64,
    device: DLDevice,
    data_offset: Option<usize>,
    require_alignment: i32,
    require_contiguous: bool,
}

fn dim(input: &mut Input<'_>) -> i64 {
    input.i64_mostly(0, 5)
}

impl Case {
    fn read(input: &mut Input<'_>) -> Case {
        let versioned = input.bool();
        let through_c = input.u8().is_multiple_of(4);
        let ndim = match input.u8() % 16 {
            15 => -1 - i32::from(input.u8()),
            n => i32::from(n % 7),
        };
        let count = usize::try_from(ndim).unwrap_or(0);
        let shape: Vec<i64> = (0..count).map(|_| dim(input)).collect();
        let null_shape = input.u8().is_multiple_of(32);
        let strides = (!input.u8().is_multiple_of(3)).then(|| {
            (0..count)
                .map(|_| input.i64_mostly(-3, 12))
                .collect::<Vec<_>>()
        });
        let dtype = input.dtype(
            4,
            18,
            &[8, 16, 32, 64, 1, 4, 0, 128],
            &[1, 1, 1, 2, 4, 0, 65535, 32768],
        );
        let byte_offset = match input.u8() % 4 {
            0 => input.u64(),
            1 => crate::input::INTERESTING_I64[input.below(20)] as u64,
            _ => u64::from(input.u8() % 64),
        };
        let version = DLPackVersion {
            major: match input.u8() % 8 {
                0 => input.u32(),
                1 => 0,
                _ => abi::DLPACK_MAJOR_VERSION,
            },
            minor: input.u32() % 8,
        };
        let flags = match input.u8() % 4 {
            0 => input.u64(),
            _ => u64::from(input.u8() % 8),
        };
        let device = DLDevice {
            device_type: match input.u8() % 4 {
                0 => input.u32() as i32,
                _ => i32::from(input.u8() % 20),
            },
            device_id: input.i64_mostly(0, 3) as i32,
        };
        let data_offset = (!input.u8().is_multiple_of(16)).then(|| input.below(17));
        let require_alignment = match input.u8() % 4 {
            0 => 0,
            1 => input.u32() as i32,
            _ => [1, 2, 4, 8, 16, 64, 256, -1, -64, 3][input.below(10)],
        };
        let require_contiguous = input.bool();
        Case {
            versioned,
            through_c,
            ndim,
            shape,
            null_shape,
            strides,
            dtype,
            byte_offset,
            version,
            flags,
            device,
            data_offset,
            require_alignment,
            require_contiguous,
        }
    }

    /// The descriptor over `producer`'s dims and buffer.
    fn descriptor<M>(&self, producer: &mut Producer<M>) -> DLTensor {
        let data = match self.data_offset {
            None => std::ptr::null_mut(),
            Some(offset) => producer
                .buffer
                .as_mut_ptr()
                .cast::<u8>()
                .wrapping_add(offset)
                .cast(),
        };
        DLTensor {
            data,
            device: self.device,
            ndim: self.ndim,
            dtype: self.dtype,
            shape: if self.null_shape {
                std::ptr::null_mut()
            } else {
                producer.shape.as_mut_ptr()
            },
            strides: if self.strides.is_some() {
                producer.strides.as_mut_ptr()
            } else {
                std::ptr::null_mut()
            },
            byte_offset: self.byte_offset,
        }
    }

    fn producer<M>(&self, managed: M) -> Producer<M> {
        Producer {
            managed,
            shape: self.shape.clone(),
            strides: self.strides.clone().unwrap_or_default(),
            buffer: vec![0x5a5a_5a5a_5a5a_5a5a; BUFFER_WORDS],
        }
    }

    /// Whether the import must succeed (the documented checks, computed independently).
    fn acceptable(&self, data: *mut c_void) -> bool {
        if self.versioned
            && (self.version.major != abi::DLPACK_MAJOR_VERSION
                || self.flags & abi::DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED != 0)
        {
            return false;
        }
        if self.ndim < 0 || (self.ndim > 0 && self.null_shape) {
            return false;
        }
        if self.shape.iter().any(|d| *d < 0) || self.dtype.bits == 0 || self.dtype.lanes == 0 {
            return false;
        }
        let elements = self
            .shape
            .iter()
            .try_fold(1i128, |n, d| n.checked_mul(i128::from(*d)));
        if !self.shape.contains(&0) && elements.is_none_or(|n| n > i128::from(i64::MAX)) {
            return false;
        }
        // An alignment is 0 (none) or a positive power of two; anything else is refused.
        if self.require_alignment != 0
            && !(self.require_alignment > 0 && (self.require_alignment as u32).is_power_of_two())
        {
            return false;
        }
        if self.require_alignment > 0 {
            let direct = [1, 2, 3, 13, 10, 11].contains(&self.device.device_type);
            let address = if direct {
                (data as u64).wrapping_add(self.byte_offset)
            } else {
                self.byte_offset
            };
            if address % self.require_alignment as u64 != 0 {
                return false;
            }
        }
        !self.require_contiguous || contiguous(&self.shape, self.strides.as_deref())
    }
}

/// Compact row-major layout (size-1 dims ignored), in exact arithmetic.
pub(crate) fn contiguous(shape: &[i64], strides: Option<&[i64]>) -> bool {
    let Some(strides) = strides else { return true };
    if shape.contains(&0) {
        return true;
    }
    let mut expected: i128 = 1;
    for (dim, stride) in shape.iter().zip(strides).rev() {
        if *dim != 1 && i128::from(*stride) != expected {
            return false;
        }
        // Past i64 no stride can match, so saturating keeps the answer exact.
        expected = expected.saturating_mul(i128::from(*dim));
    }
    true
}

/// Compact row-major strides, when every one fits in `i64`.
pub(crate) fn compact(shape: &[i64]) -> Option<Vec<i64>> {
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].checked_mul(shape[i + 1].max(1))?;
    }
    Some(strides)
}

/// Imports through `TVMFFITensorFromDLPack[Versioned]`; a failure must raise an error.
fn import_through_c(case: &Case, managed: *mut c_void) -> Result<Tensor, Error> {
    let mut out: TVMFFIObjectHandle = std::ptr::null_mut();
    let contiguous = i32::from(case.require_contiguous);
    // SAFETY: a valid managed tensor of the kind the call expects; `out` is writable.
    let rc = unsafe {
        if case.versioned {
            abi::TVMFFITensorFromDLPackVersioned(
                managed.cast(),
                case.require_alignment,
                contiguous,
                &mut out,
            )
        } else {
            abi::TVMFFITensorFromDLPack(
                managed.cast(),
                case.require_alignment,
                contiguous,
                &mut out,
            )
        }
    };
    if rc != 0 {
        return Err(Error::take_raised().expect("a failed import raised no error"));
    }
    assert!(!out.is_null(), "a successful import returned NULL");
    // SAFETY: a successful import returns one owned tensor reference.
    let obj = unsafe { ObjectRef::<TensorObj>::from_raw(out.cast()) };
    Ok(Tensor::from_object(obj))
}

/// Checks what an accepted tensor reports against the producer's descriptor, and that its
/// exports and conversions work and hand their references back.
fn check_tensor(case: &Case, t: &Tensor, data: *mut c_void) {
    let dims = case.shape.len();
    assert_eq!(t.ndim(), dims);
    assert_eq!(t.shape(), &case.shape[..]);
    assert_eq!(t.dtype(), DataType(case.dtype));
    assert_eq!(t.device(), Device(case.device));
    assert_eq!(
        t.data_ptr(),
        data.cast::<u8>()
            .wrapping_add(case.byte_offset as usize)
            .cast()
    );
    let read_only = case.versioned && case.flags & abi::DLPACK_FLAG_BITMASK_READ_ONLY != 0;
    assert_eq!(t.is_read_only(), read_only);
    let raw = t.dltensor();
    if dims > 0 {
        assert!(
            !raw.strides.is_null(),
            "tensors made here always carry strides"
        );
    }
    let strides = t.strides().into_owned();
    match (&case.strides, compact(&case.shape)) {
        (Some(given), _) => assert_eq!(&strides, given),
        (None, Some(expected)) => assert_eq!(strides, expected),
        (None, None) => assert_eq!(strides.len(), dims),
    }
    assert_eq!(t.is_contiguous(), contiguous(t.shape(), Some(&strides)));
    let numel = if case.shape.contains(&0) {
        Some(0)
    } else {
        case.shape
            .iter()
            .try_fold(1i64, |acc, d| acc.checked_mul(*d))
    };
    assert_eq!(Some(t.numel()), numel, "numel of an imported tensor");
    let _ = format!("{t:?}");

    // Exports: each holds one reference, released by its deleter (directly or via an import).
    let before = t.as_object().use_count();
    let exported = t.to_dlpack_versioned();
    assert_eq!(t.as_object().use_count(), before + 1);
    // SAFETY: a fresh export; re-importing it with no requirements succeeds and owns it.
    let again = unsafe { Tensor::from_dlpack_versioned(exported, 0, false) }
        .expect("re-importing an export");
    assert_eq!(again.shape(), t.shape());
    assert_eq!(&*again.strides(), &strides[..]);
    assert_eq!(again.data_ptr(), t.data_ptr());
    assert_eq!(again.is_read_only(), read_only);
    drop(again);
    let legacy = t.to_dlpack();
    // SAFETY: a fresh export, released once by its own deleter.
    unsafe { ((*legacy).deleter.expect("exports have a deleter"))(legacy) };
    assert_eq!(
        t.as_object().use_count(),
        before,
        "exports gave their references back"
    );

    // Through Any and back.
    let any = Any::from(t.clone());
    assert_eq!(any.type_index(), abi::kTVMFFITensor);
    let back: Tensor = any.cast().expect("a tensor value casts back");
    assert_eq!(back.data_ptr(), t.data_ptr());
    drop((any, back));
    assert_eq!(t.as_object().use_count(), before);
}

/// Runs one import of `case`, checking the ownership rule.
fn import_once(case: &Case) {
    let start = deleted();
    // Build the producer on the heap; its first field is the managed tensor.
    let (managed, data): (*mut c_void, *mut c_void) = if case.versioned {
        let mut producer = Box::new(case.producer(DLManagedTensorVersioned {
            version: case.version,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_versioned),
            flags: case.flags,
            dl_tensor: empty_descriptor(),
        }));
        producer.managed.dl_tensor = case.descriptor(&mut producer);
        let data = producer.managed.dl_tensor.data;
        let raw = Box::into_raw(producer);
        // SAFETY: `raw` is live; the context names the producer itself.
        unsafe { (*raw).managed.manager_ctx = raw.cast() };
        (raw.cast(), data)
    } else {
        let mut producer = Box::new(case.producer(DLManagedTensor {
            dl_tensor: empty_descriptor(),
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_legacy),
        }));
        producer.managed.dl_tensor = case.descriptor(&mut producer);
        let data = producer.managed.dl_tensor.data;
        let raw = Box::into_raw(producer);
        // SAFETY: as above.
        unsafe { (*raw).managed.manager_ctx = raw.cast() };
        (raw.cast(), data)
    };
    let result = if case.through_c {
        import_through_c(case, managed)
    } else if case.versioned {
        // SAFETY: a valid versioned managed tensor.
        unsafe {
            Tensor::from_dlpack_versioned(
                managed.cast(),
                case.require_alignment,
                case.require_contiguous,
            )
        }
    } else {
        // SAFETY: a valid legacy managed tensor.
        unsafe {
            Tensor::from_dlpack(
                managed.cast(),
                case.require_alignment,
                case.require_contiguous,
            )
        }
    };
    assert_eq!(deleted(), start, "the import ran the producer's deleter");
    let expected = case.acceptable(data);
    match result {
        Ok(tensor) => {
            assert!(
                expected,
                "accepted a tensor that breaks a documented rule: {case:?}"
            );
            check_tensor(case, &tensor, data);
            assert_eq!(deleted(), start, "the deleter ran while the tensor lives");
            drop(tensor);
            assert_eq!(
                deleted(),
                start + 1,
                "dropping the tensor ran the deleter once"
            );
        }
        Err(err) => {
            assert!(!expected, "rejected a valid tensor ({err:?}): {case:?}");
            assert!(err.is_kind("ValueError"), "{err:?}");
            // The caller still owns the producer.
            // SAFETY: ownership stayed here; released once.
            unsafe {
                if case.versioned {
                    let m = managed.cast::<DLManagedTensorVersioned>();
                    ((*m).deleter.expect("set above"))(m);
                } else {
                    let m = managed.cast::<DLManagedTensor>();
                    ((*m).deleter.expect("set above"))(m);
                }
            }
            assert_eq!(deleted(), start + 1);
        }
    }
}

fn empty_descriptor() -> DLTensor {
    DLTensor {
        data: std::ptr::null_mut(),
        device: DLDevice {
            device_type: abi::kDLCPU,
            device_id: 0,
        },
        ndim: 0,
        dtype: DLDataType {
            code: 0,
            bits: 0,
            lanes: 0,
        },
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

/// Wraps the same descriptor as foreign memory: `release` runs once, right away on error or
/// when the tensor dies.
fn foreign_once(case: &Case) {
    let start = deleted();
    let mut producer = case.producer(());
    let prototype = case.descriptor(&mut producer);
    let mut record = [0u8; 16];
    record[..8].copy_from_slice(&RECORD_MAGIC.to_ne_bytes());
    let read_only = case.flags & 1 != 0;
    // SAFETY: the descriptor's memory (`producer`) outlives the tensor; the record is plain
    // bytes.
    let result =
        unsafe { Tensor::from_foreign(&prototype, read_only, &mut record, release_record) };
    let readable = case.ndim >= 0 && !(case.ndim > 0 && case.null_shape);
    match result {
        Ok(t) => {
            assert!(readable, "wrapped unreadable dims: {case:?}");
            assert_eq!(deleted(), start);
            assert_eq!(t.shape(), &case.shape[..]);
            assert_eq!(t.is_read_only(), read_only);
            drop(t);
            assert_eq!(deleted(), start + 1, "the record was released once");
        }
        Err(err) => {
            assert!(!readable, "refused readable dims ({err:?}): {case:?}");
            assert_eq!(deleted(), start + 1, "a refused record is released at once");
        }
    }
    drop(producer);
}

/// DLPack import: a managed tensor (versioned or legacy) with arbitrary dims, dtype, offsets,
/// version, flags and device over a real host buffer, imported with arbitrary requirements
/// through `Tensor::from_dlpack[_versioned]` or the C ABI. An import succeeds exactly when the
/// documented checks pass; on error the deleter has not run and the caller releases the
/// producer; on success the tensor reports the descriptor, its exports round-trip, and dropping
/// it runs the deleter exactly once.
pub fn dlpack_import(data: &[u8]) {
    let mut input = Input::new(data);
    let case = Case::read(&mut input);
    import_once(&case);
    if input.bool() {
        foreign_once(&case);
    }
}
