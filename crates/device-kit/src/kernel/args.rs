//! Reading the tensor arguments of a kernel call, as every GPU backend does.

use tvm_ffi::abi::{self, DLDevice, DLTensor};
use tvm_ffi::{AnyView, Device, Error, ErrorKind, Result, Tensor};

/// Where a tensor argument's elements live: its device, its data handle and its byte offset.
#[derive(Clone, Copy, Debug)]
pub struct TensorArg {
    /// The tensor's device.
    pub device: DLDevice,
    /// Its data handle (an opaque buffer handle on most GPU backends).
    pub data: *mut std::ffi::c_void,
    /// The offset of its first element from `data`, in bytes.
    pub byte_offset: u64,
    /// Whether a `Tensor` argument is marked read-only ([`Tensor::is_read_only`]); a
    /// `DLTensor*` carries no such mark and reads as writable.
    pub read_only: bool,
}

/// Argument `index` of kernel `kernel` as a tensor (a `Tensor` or a `DLTensor*`) on a device of
/// type `device_type`; `Ok(None)` when the value is of another type (the backend may take it
/// otherwise). A tensor of another kind of device is a `ValueError` naming `backend`.
pub fn tensor_arg(
    kernel: &str,
    index: usize,
    value: &AnyView<'_>,
    device_type: i32,
    backend: &str,
) -> Result<Option<TensorArg>> {
    let raw = value.as_raw();
    let of = |t: &DLTensor, read_only: bool| {
        if t.device.device_type != device_type {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "kernel `{kernel}`: argument {index} is a tensor on {}, not on a {backend} device",
                Device(t.device)
            );
        }
        Ok(Some(TensorArg {
            device: t.device,
            data: t.data,
            byte_offset: t.byte_offset,
            read_only,
        }))
    };
    match raw.type_index {
        abi::kTVMFFITensor => {
            let tensor = value.cast::<Tensor>().map_err(|_| {
                Error::new(
                    ErrorKind::TypeError,
                    format!("kernel `{kernel}`: argument {index} is not a tensor"),
                )
            })?;
            of(tensor.dltensor(), tensor.is_read_only())
        }
        abi::kTVMFFIDLTensorPtr => {
            // SAFETY: a DLTensor pointer argument points at a descriptor valid for the call.
            of(unsafe { &*raw.payload.v_ptr.cast::<DLTensor>() }, false)
        }
        _ => Ok(None),
    }
}

/// Where a tensor argument binds as a storage buffer of a shader (Vulkan, WebGPU).
#[derive(Clone, Copy, Debug)]
pub struct StorageBinding {
    /// Bytes of the buffer the tensor lives in.
    pub buffer_size: u64,
    /// The tensor's byte offset in it: where the binding starts.
    pub offset: u64,
}

impl StorageBinding {
    /// The bytes the binding of argument `index` of kernel `kernel` covers (from its offset to
    /// the buffer's end), checked against the device: the offset inside the buffer at a
    /// multiple of `alignment`, the range at most `max_range` bytes (one binding's limit on the
    /// device named `device_name`). A `ValueError` naming the kernel and the value otherwise.
    pub fn range(
        &self,
        kernel: &str,
        index: usize,
        alignment: u64,
        max_range: u64,
        device_name: &str,
    ) -> Result<u64> {
        let StorageBinding {
            buffer_size: size,
            offset,
        } = *self;
        let alignment = alignment.max(1);
        if offset >= size || !offset.is_multiple_of(alignment) {
            return Err(Error::new(
                ErrorKind::ValueError,
                format!(
                    "kernel `{kernel}`: argument {index} starts at byte offset {offset}, which is \
                     not inside its buffer of {size} bytes at a multiple of {alignment}"
                ),
            ));
        }
        let range = size - offset;
        if range > max_range {
            return Err(Error::new(
                ErrorKind::ValueError,
                format!(
                    "kernel `{kernel}`: argument {index} spans {range} bytes; one storage \
                     binding of '{device_name}' holds at most {max_range}"
                ),
            ));
        }
        Ok(range)
    }
}
