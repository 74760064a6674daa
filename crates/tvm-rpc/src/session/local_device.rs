//! The serving half of the device system calls (the client half is `crate::device`):
//! allocation, attributes, streams and copies among this side's memory, answered from the
//! runtime's device registry, and the host memory the peer allocates (warm memory, then the
//! block cache, then the CPU device).

use std::ffi::c_void;
use std::sync::{MutexGuard, PoisonError};

use tvm_ffi::abi::{DLDevice, kDLCPU};
use tvm_ffi::string::bytes_of_any;
use tvm_ffi::{DataType, Device, ErrorKind, Result};
use tvm_runtime::device::{self as registry, DeviceAttr, StreamHandle, TENSOR_ALIGNMENT};

use super::host_cache::{self, Block, HostBlockCache};
use super::local::{LocalSession, checked_device, tensor_nbytes, too_large};
use super::warm_memory;
use crate::codec::{TensorMeta, WireValue};
use crate::protocol::RpcCode;

impl LocalSession {
    /// Answers device system call `code` (allocation, attributes, streams, copies among this
    /// side's memory) from the device registry.
    pub(super) fn serve_device_call(&self, code: RpcCode, args: &[WireValue]) -> Result<WireValue> {
        match code {
            RpcCode::DevSetDevice => {
                device_arg(args, 0, code)?;
                Ok(WireValue::None)
            }
            RpcCode::DevGetAttr => {
                let device = device_arg(args, 0, code)?;
                let kind = int_arg(args, 1, code)?;
                let Some(attr) = i32::try_from(kind).ok().and_then(DeviceAttr::from_code) else {
                    tvm_ffi::bail!(ErrorKind::ValueError, "unknown device attribute {kind}");
                };
                let value = registry::device_attr(Device(device), attr)?;
                Ok(match value {
                    None => WireValue::None,
                    Some(v) => match v.try_as::<i64>() {
                        Some(i) => WireValue::Int(i),
                        None => WireValue::RawStr(
                            bytes_of_any(&v).map(<[u8]>::to_vec).unwrap_or_default(),
                        ),
                    },
                })
            }
            RpcCode::DevAllocData => {
                let device = device_arg(args, 0, code)?;
                let nbytes = u64::try_from(int_arg(args, 1, code)?).map_err(|_| {
                    tvm_ffi::Error::new(ErrorKind::ValueError, "allocation size is negative")
                })?;
                let alignment = u64::try_from(int_arg(args, 2, code)?).map_err(|_| {
                    tvm_ffi::Error::new(ErrorKind::ValueError, "alignment is negative")
                })?;
                let dtype = match args.get(3) {
                    Some(WireValue::DataType(dtype)) => DataType(*dtype),
                    _ => DataType::uint(8),
                };
                Ok(WireValue::Handle(
                    self.alloc(device, nbytes, alignment, dtype)?,
                ))
            }
            RpcCode::DevAllocDataWithScope => {
                let meta = tensor_arg(args, 0, code)?;
                match args.get(1) {
                    None | Some(WireValue::None) => {}
                    Some(scope) if scope.as_text() == Some(b"global") => {}
                    Some(scope) => tvm_ffi::bail!(
                        ErrorKind::ValueError,
                        "memory scope {:?} is not supported (only 'global')",
                        scope.as_text().map(String::from_utf8_lossy)
                    ),
                }
                let nbytes = tensor_nbytes(meta)?;
                let address = self.alloc(
                    meta.device,
                    nbytes,
                    TENSOR_ALIGNMENT as u64,
                    DataType(meta.dtype),
                )?;
                Ok(WireValue::Handle(address))
            }
            RpcCode::DevFreeData => {
                let device = device_arg(args, 0, code)?;
                let address = handle_arg(args, 1, code)?;
                let len = self.table().remove_allocation(address, device)?;
                self.free_allocation(address, len, device)?;
                Ok(WireValue::None)
            }
            RpcCode::DevStreamSync => {
                let device = device_arg(args, 0, code)?;
                let handle = handle_arg(args, 1, code)?;
                registry::sync_stream(Device(device), Some(stream(handle)))?;
                Ok(WireValue::None)
            }
            RpcCode::DevCreateStream => {
                let device = device_arg(args, 0, code)?;
                let created = registry::create_stream(Device(device))?;
                Ok(WireValue::Handle(created.0 as usize as u64))
            }
            RpcCode::DevFreeStream => {
                let device = device_arg(args, 0, code)?;
                let handle = handle_arg(args, 1, code)?;
                // SAFETY: the registry checks that the stream is one it created for this device
                // before the backend sees it.
                unsafe { registry::free_stream(Device(device), stream(handle)) }?;
                Ok(WireValue::None)
            }
            RpcCode::DevSetStream => {
                let device = device_arg(args, 0, code)?;
                let handle = handle_arg(args, 1, code)?;
                registry::set_current_stream(Device(device), stream(handle))?;
                Ok(WireValue::None)
            }
            RpcCode::DevGetCurrentStream => {
                let device = device_arg(args, 0, code)?;
                let current = registry::current_stream(Device(device));
                Ok(WireValue::Handle(current.0 as usize as u64))
            }
            RpcCode::CopyAmongRemote => {
                let from = tensor_arg(args, 0, code)?.clone();
                let to = tensor_arg(args, 1, code)?.clone();
                let stream_handle = match args.get(2) {
                    Some(value) => value.as_handle().unwrap_or(0),
                    None => 0,
                };
                let from_view = self.tensor_view(&from)?;
                let to_view = self.tensor_view(&to)?;
                let stream = (stream_handle != 0).then(|| stream(stream_handle));
                // SAFETY: both descriptors come from views over checked, live memory, kept
                // alive until the synchronous copy returns.
                unsafe {
                    registry::copy_tensor(from_view.dltensor(), to_view.dltensor(), stream, true)
                }?;
                Ok(WireValue::None)
            }
            _ => tvm_ffi::bail!(
                ErrorKind::ValueError,
                "{code:?} is not a device system call"
            ),
        }
    }

    fn alloc(&self, device: DLDevice, nbytes: u64, alignment: u64, dtype: DataType) -> Result<u64> {
        let device = checked_device(device)?;
        if device.device_type == kDLCPU
            && nbytes >= host_cache::MIN_BYTES
            && alignment.is_power_of_two()
            && let Some(address) = warm_memory::take(nbytes, alignment)
                .or_else(|| self.host_cache().take(nbytes, alignment))
        {
            self.table().add_allocation(address, nbytes, device);
            return Ok(address);
        }
        let size = usize::try_from(nbytes).map_err(|_| too_large(nbytes))?;
        let alignment = usize::try_from(alignment).map_err(|_| too_large(alignment))?;
        let ptr = match registry::alloc_data(Device(device), size, alignment, dtype) {
            Err(error) if device.device_type == kDLCPU && error.is_kind("MemoryError") => {
                // The cached blocks go back first, then the allocation is tried once more.
                let cached = self.host_cache().drain();
                for block in cached {
                    // SAFETY: cached blocks are allocations of this session nothing refers to.
                    unsafe {
                        registry::free_data(Device(device), block.address as usize as *mut c_void)
                    }?;
                }
                registry::alloc_data(Device(device), size, alignment, dtype)?
            }
            other => other?,
        };
        let address = ptr as usize as u64;
        self.table().add_allocation(address, nbytes, device);
        Ok(address)
    }

    fn host_cache(&self) -> MutexGuard<'_, HostBlockCache> {
        self.host_cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Frees memory the peer allocated: blocks of the warm arena go back to it, other large host
    /// blocks to the cache, the rest (and what the cache lets go) back to the device.
    fn free_allocation(&self, address: u64, len: u64, device: DLDevice) -> Result<()> {
        if device.device_type == kDLCPU && warm_memory::give_back(address) {
            return Ok(());
        }
        let blocks = if device.device_type == kDLCPU {
            self.host_cache().keep(Block { address, len })
        } else {
            vec![Block { address, len }]
        };
        for block in blocks {
            // SAFETY: each block is an allocation of this session that nothing refers to any
            // more (forgotten by the table, or evicted from the cache), freed once.
            unsafe { registry::free_data(Device(device), block.address as usize as *mut c_void) }?;
        }
        Ok(())
    }
}

fn arg(args: &[WireValue], index: usize, code: RpcCode) -> Result<&WireValue> {
    args.get(index).ok_or_else(|| {
        tvm_ffi::Error::new(
            ErrorKind::ValueError,
            format!(
                "{code:?} needs at least {} arguments, got {}",
                index + 1,
                args.len()
            ),
        )
    })
}

fn device_arg(args: &[WireValue], index: usize, code: RpcCode) -> Result<DLDevice> {
    match arg(args, index, code)? {
        WireValue::Device(device) => checked_device(*device),
        other => tvm_ffi::bail!(
            ErrorKind::TypeError,
            "{code:?} argument {index} must be a device, got {}",
            other.kind()
        ),
    }
}

fn int_arg(args: &[WireValue], index: usize, code: RpcCode) -> Result<i64> {
    typed_arg(args, index, code, "an int", WireValue::as_int)
}

fn handle_arg(args: &[WireValue], index: usize, code: RpcCode) -> Result<u64> {
    typed_arg(args, index, code, "a handle", WireValue::as_handle)
}

/// Argument `index` read by `read`, or a `TypeError` naming what it had to be (`what`).
fn typed_arg<T>(
    args: &[WireValue],
    index: usize,
    code: RpcCode,
    what: &str,
    read: impl FnOnce(&WireValue) -> Option<T>,
) -> Result<T> {
    let value = arg(args, index, code)?;
    read(value).ok_or_else(|| {
        tvm_ffi::Error::new(
            ErrorKind::TypeError,
            format!(
                "{code:?} argument {index} must be {what}, got {}",
                value.kind()
            ),
        )
    })
}

fn tensor_arg(args: &[WireValue], index: usize, code: RpcCode) -> Result<&TensorMeta> {
    match arg(args, index, code)? {
        WireValue::Tensor(meta) => Ok(meta),
        other => tvm_ffi::bail!(
            ErrorKind::TypeError,
            "{code:?} argument {index} must be a tensor, got {}",
            other.kind()
        ),
    }
}

fn stream(handle: u64) -> StreamHandle {
    StreamHandle(handle as usize as *mut c_void)
}
