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
    let of = |t: &DLTensor| {
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
            of(tensor.dltensor())
        }
        abi::kTVMFFIDLTensorPtr => {
            // SAFETY: a DLTensor pointer argument points at a descriptor valid for the call.
            of(unsafe { &*raw.payload.v_ptr.cast::<DLTensor>() })
        }
        _ => Ok(None),
    }
}
