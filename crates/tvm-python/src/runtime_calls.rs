//! The runtime's device and tensor operations, reached through its global functions.
//!
//! This extension is a client of `libtvm_ffi.so` and keeps no device registry of its own: the
//! one registry of the process is the library's, and every operation here goes through the
//! `runtime.*` globals it registers at load. Each global is looked up once and kept.

use std::ffi::c_void;
use std::sync::OnceLock;

use tvm_ffi::device::DeviceAttr;
use tvm_ffi::{Any, DataType, Device, Function, Result, Shape, Tensor};

/// The global `name`, looked up on first use and kept in `cell`.
fn global(cell: &'static OnceLock<Function>, name: &str) -> Result<&'static Function> {
    if let Some(function) = cell.get() {
        return Ok(function);
    }
    let function = Function::get_global_required(name)?;
    Ok(cell.get_or_init(|| function))
}

/// Declares a function returning the kept global of the given name.
macro_rules! runtime_global {
    ($fn_name:ident, $global:literal) => {
        fn $fn_name() -> Result<&'static Function> {
            static CELL: OnceLock<Function> = OnceLock::new();
            global(&CELL, $global)
        }
    };
}

runtime_global!(tensor_empty, "runtime.TensorEmpty");
runtime_global!(tensor_copy_from_to, "runtime.TensorCopyFromTo");
runtime_global!(device_get_attr, "runtime.DeviceGetAttr");
runtime_global!(stream_create, "runtime.DeviceStreamCreate");
runtime_global!(stream_free, "runtime.DeviceStreamFree");
runtime_global!(stream_sync, "runtime.DeviceStreamSync");
runtime_global!(stream_sync_from_to, "runtime.DeviceStreamSyncFromTo");
runtime_global!(stream_set, "runtime.DeviceSetStream");

/// A stream handle as the globals pass it.
fn stream_arg(stream: usize) -> *mut c_void {
    stream as *mut c_void
}

/// A new, uninitialized tensor on `device`.
pub(crate) fn empty(shape: &[i64], dtype: DataType, device: Device) -> Result<Tensor> {
    tensor_empty()?
        .call((Shape::new(shape), dtype, device))?
        .cast()
}

/// Copies the elements of `from` into `to` (same shape and dtype, any devices), waiting for the
/// copy to finish.
pub(crate) fn copy(from: &Tensor, to: &Tensor) -> Result<()> {
    tensor_copy_from_to()?.call((from.clone(), to.clone()))?;
    Ok(())
}

/// A compact copy of `tensor` on `device`.
pub(crate) fn copy_to(tensor: &Tensor, device: Device) -> Result<Tensor> {
    let target = empty(tensor.shape(), tensor.dtype(), device)?;
    copy(tensor, &target)?;
    Ok(target)
}

/// An attribute of `device`, `None` when its backend does not know it.
pub(crate) fn device_attr(device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
    let value = device_get_attr()?.call((device, attr as i32))?;
    Ok((!value.is_none()).then_some(value))
}

/// Whether `device` is present: its backend is registered and reports it.
pub(crate) fn device_exists(device: Device) -> bool {
    matches!(
        device_attr(device, DeviceAttr::Exist).map(|v| v.and_then(|v| v.try_as::<i64>())),
        Ok(Some(flag)) if flag != 0
    )
}

/// A new stream on `device` (0 for backends without streams).
pub(crate) fn create_stream(device: Device) -> Result<usize> {
    let stream: *mut c_void = stream_create()?.call((device,))?.cast()?;
    Ok(stream as usize)
}

/// Frees a stream from [`create_stream`]; the library refuses streams it did not create.
pub(crate) fn free_stream(device: Device, stream: usize) -> Result<()> {
    stream_free()?.call((device, stream_arg(stream)))?;
    Ok(())
}

/// Waits for the work queued on `stream` (`None`: the calling thread's current stream).
pub(crate) fn sync_stream(device: Device, stream: Option<usize>) -> Result<()> {
    stream_sync()?.call((device, stream.map(stream_arg)))?;
    Ok(())
}

/// Makes the work queued on `to` from now on wait for the work queued so far on the calling
/// thread's current stream of `device` (the DLPack stream hand-off).
pub(crate) fn sync_current_stream_to(device: Device, to: usize) -> Result<()> {
    stream_sync_from_to()?.call((device, None::<*mut c_void>, stream_arg(to)))?;
    Ok(())
}

/// Makes `stream` the calling thread's current stream on `device`; returns the previous one.
pub(crate) fn set_current_stream(device: Device, stream: usize) -> Result<usize> {
    let previous: *mut c_void = stream_set()?.call((device, stream_arg(stream)))?.cast()?;
    Ok(previous as usize)
}
