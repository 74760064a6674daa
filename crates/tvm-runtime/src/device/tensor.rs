//! Tensors on any device: allocation through the registry (also as the environment's DLPack
//! allocator, so `Tensor::empty` and `TVMFFIEnvTensorAlloc` reach every backend), and copies
//! between tensors, slices and devices.

use std::ffi::{CString, c_char, c_int, c_void};
use std::sync::Arc;

use tvm_ffi::abi::{
    self, DLManagedTensorVersioned, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION, DLPackVersion,
    DLTensor,
};
use tvm_ffi::boundary::ffi_boundary;
use tvm_ffi::tensor::{Element, compact_strides};
use tvm_ffi::{DataType, Device, Error, ErrorKind, Result, Tensor};

use super::host_copy::tensor_nbytes;
use super::registry::{copy_tensor, device_api};
use super::{DeviceApi, TENSOR_ALIGNMENT, alloc_data};

/// The record behind a tensor allocated here: the DLPack descriptor, its dims, and who frees the
/// memory.
struct DeviceAllocation {
    managed: DLManagedTensorVersioned,
    shape: Box<[i64]>,
    strides: Box<[i64]>,
    api: Arc<dyn DeviceApi>,
}

unsafe extern "C" fn release_allocation(managed: *mut DLManagedTensorVersioned) {
    // SAFETY: `manager_ctx` is the record made by `alloc_managed`, released once by the tensor.
    let record = unsafe { Box::from_raw((*managed).manager_ctx.cast::<DeviceAllocation>()) };
    let t = &record.managed.dl_tensor;
    ffi_boundary("device tensor deleter", || {
        // SAFETY: the memory came from this backend for this device; the tensor is gone. A
        // failure cannot be reported from a deleter; the backend has said what went wrong.
        let _ = unsafe { record.api.free(Device(t.device), t.data) };
    });
}

/// A compact tensor shaped like `prototype` (its device, dtype, ndim and shape), allocated by
/// the device's backend, as a DLPack record the caller owns.
///
/// # Safety
/// `prototype` is a valid descriptor (its `data` and `strides` are ignored).
unsafe fn alloc_managed(prototype: &DLTensor) -> Result<*mut DLManagedTensorVersioned> {
    let device = Device(prototype.device);
    // SAFETY: guaranteed by the caller.
    let nbytes = unsafe { tensor_nbytes(prototype)? };
    let shape: Box<[i64]> = match usize::try_from(prototype.ndim) {
        // SAFETY: a valid descriptor's shape holds `ndim` values.
        Ok(n) if n > 0 => unsafe { std::slice::from_raw_parts(prototype.shape, n) }.into(),
        Ok(_) => Box::new([]),
        Err(_) => tvm_ffi::bail!(ErrorKind::ValueError, "negative ndim {}", prototype.ndim),
    };
    let api = device_api(device)?;
    let data = alloc_data(device, nbytes, TENSOR_ALIGNMENT, DataType(prototype.dtype))?;
    let strides: Box<[i64]> = compact_strides(&shape).into();
    let mut record = Box::new(DeviceAllocation {
        managed: DLManagedTensorVersioned {
            version: DLPackVersion {
                major: DLPACK_MAJOR_VERSION,
                minor: DLPACK_MINOR_VERSION,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(release_allocation),
            flags: 0,
            dl_tensor: DLTensor {
                data,
                device: prototype.device,
                ndim: prototype.ndim,
                dtype: prototype.dtype,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        },
        shape,
        strides,
        api,
    });
    record.managed.dl_tensor.shape = record.shape.as_mut_ptr();
    record.managed.dl_tensor.strides = record.strides.as_mut_ptr();
    let record = Box::into_raw(record);
    // SAFETY: `record` is live; the context points back at it for the deleter.
    unsafe {
        (*record).managed.manager_ctx = record.cast();
        Ok(&raw mut (*record).managed)
    }
}

/// An uninitialized compact tensor on `device`, allocated by its backend (the CPU included).
pub fn empty_on(shape: &[i64], dtype: DataType, device: Device) -> Result<Tensor> {
    let prototype = Tensor::prototype(shape, dtype, device)?;
    // SAFETY: the prototype describes `shape`, which outlives the call.
    let managed = unsafe { alloc_managed(&prototype)? };
    // SAFETY: a fresh record whose deleter frees it; on error it is released here.
    match unsafe { Tensor::from_dlpack_versioned(managed, 0, false) } {
        Ok(tensor) => Ok(tensor),
        Err(err) => {
            // SAFETY: still ours after a failed import.
            unsafe { release_allocation(managed) };
            Err(err)
        }
    }
}

/// The environment's DLPack allocator (`TVMFFIEnvTensorAlloc`): allocates through the registry.
unsafe extern "C" fn registry_allocator(
    prototype: *mut DLTensor,
    out: *mut *mut DLManagedTensorVersioned,
    error_ctx: *mut c_void,
    set_error: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char)>,
) -> c_int {
    ffi_boundary("registry DLPack allocator", || {
        let result = (|| {
            if prototype.is_null() || out.is_null() {
                tvm_ffi::bail!(
                    ErrorKind::ValueError,
                    "the tensor allocator got a NULL argument"
                );
            }
            // SAFETY: non-NULL, valid per the allocator's contract.
            unsafe { *out = alloc_managed(&*prototype)? };
            Ok(())
        })();
        match result {
            Ok(()) => 0,
            Err(err) => {
                report_to(set_error, error_ctx, &err);
                -1
            }
        }
    })
}

/// Reports an allocation error through the allocator's `SetError` callback.
fn report_to(
    set_error: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char)>,
    error_ctx: *mut c_void,
    err: &Error,
) {
    if let Some(set_error) = set_error {
        let kind = CString::new(err.kind().as_bytes()).unwrap_or_default();
        let message = CString::new(err.message().replace('\0', " ")).unwrap_or_default();
        // SAFETY: both strings are NUL-terminated and outlive the call.
        unsafe { set_error(error_ctx, kind.as_ptr(), message.as_ptr()) };
    }
}

/// Makes the registry the process-wide DLPack allocator, unless one is set already.
pub(crate) fn install_dlpack_allocator() {
    // SAFETY: reads and sets the environment's allocator; the function lives for the process.
    unsafe {
        if abi::TVMFFIEnvGetDLPackManagedTensorAllocator().is_none() {
            abi::TVMFFIEnvSetDLPackManagedTensorAllocator(
                Some(registry_allocator),
                1,
                std::ptr::null_mut(),
            );
        }
    }
}

/// Copies that work on every device, through the registry: tensor to tensor, slice to tensor and
/// back, and tensor to another device. Each waits for its copy to finish.
pub trait TensorDeviceExt {
    /// Copies the elements of `source` (same shape and dtype, any device) into this tensor; a
    /// `ValueError` when this tensor is read-only ([`Tensor::check_writable`]).
    fn copy_from(&self, source: &Tensor) -> Result<()>;

    /// Copies `data` (as many elements as the tensor holds, of its dtype) into this tensor; a
    /// `ValueError` when it is read-only.
    fn copy_from_slice<T: Element>(&self, data: &[T]) -> Result<()>;

    /// The tensor's elements, in row-major order, read from whichever device holds them.
    fn to_vec<T: Element>(&self) -> Result<Vec<T>>;

    /// A compact copy of this tensor on `device`.
    fn copy_to(&self, device: Device) -> Result<Tensor>;
}

fn check_element<T: Element>(tensor: &Tensor) -> Result<()> {
    let wanted = DataType(T::DTYPE);
    if tensor.dtype() != wanted {
        tvm_ffi::bail!(
            ErrorKind::TypeError,
            "the tensor holds {}, not {wanted}",
            tensor.dtype()
        );
    }
    Ok(())
}

/// A compact CPU descriptor of `len` elements like `tensor`'s, over `data`.
fn host_view(tensor: &Tensor, data: *mut c_void) -> DLTensor {
    DLTensor {
        data,
        device: Device::cpu(0).0,
        strides: std::ptr::null_mut(),
        byte_offset: 0,
        ..*tensor.dltensor()
    }
}

fn check_len<T>(tensor: &Tensor, data: &[T]) -> Result<()> {
    if tensor.numel() != data.len() as i64 {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "a tensor of shape {:?} holds {} elements, the slice {}",
            tensor.shape(),
            tensor.numel(),
            data.len()
        );
    }
    Ok(())
}

impl TensorDeviceExt for Tensor {
    fn copy_from(&self, source: &Tensor) -> Result<()> {
        self.check_writable()?;
        // SAFETY: both tensors are alive for the synchronous copy.
        unsafe { copy_tensor(source.dltensor(), self.dltensor(), None, true) }
    }

    fn copy_from_slice<T: Element>(&self, data: &[T]) -> Result<()> {
        self.check_writable()?;
        check_element::<T>(self)?;
        check_len(self, data)?;
        let from = host_view(self, data.as_ptr().cast_mut().cast());
        // SAFETY: the slice holds the compact elements and outlives the synchronous copy; it is
        // only read.
        unsafe { copy_tensor(&from, self.dltensor(), None, true) }
    }

    fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        check_element::<T>(self)?;
        let len = usize::try_from(self.numel()).unwrap_or(0);
        let mut out: Vec<T> = Vec::with_capacity(len);
        let to = host_view(self, out.as_mut_ptr().cast());
        // SAFETY: the vector has room for every element and outlives the synchronous copy,
        // which writes all `len` of them.
        unsafe {
            copy_tensor(self.dltensor(), &to, None, true)?;
            out.set_len(len);
        }
        Ok(out)
    }

    fn copy_to(&self, device: Device) -> Result<Tensor> {
        let target = empty_on(self.shape(), self.dtype(), device)?;
        target.copy_from(self)?;
        Ok(target)
    }
}
