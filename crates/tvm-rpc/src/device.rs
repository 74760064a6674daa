//! The device backend of every remote device (`device_type >= 128`): each operation goes to the
//! session the device type names, as a system call or a streamed copy.

use std::ffi::c_void;
use std::sync::{Arc, Once};

use tvm_ffi::abi::{DLDevice, DLTensor, kDLCPU};
use tvm_ffi::tensor::is_contiguous;
use tvm_ffi::{Any, DataType, Device, ErrorKind, Result};
use tvm_runtime::device::{
    self as registry, DeviceApi, DeviceAttr, RPC_SESSION_DEVICE_TYPES, StreamHandle,
    copy_host_strided, tensor_nbytes,
};

use crate::codec::{TensorMeta, WireValue};
use crate::protocol::RpcCode;
use crate::remote::SessionCore;
use crate::session::{CopySink, CopySource};

/// Forwards device operations to the session a device belongs to.
pub struct RpcDeviceApi;

/// Registers the backend for remote devices (once per process).
pub fn register_rpc_device_api() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = registry::register_device_api(RPC_SESSION_DEVICE_TYPES, Arc::new(RpcDeviceApi));
    });
}

fn handle(ptr: *mut c_void) -> WireValue {
    WireValue::Handle(ptr as usize as u64)
}

/// # Safety
/// `t` is a valid descriptor.
unsafe fn shape_of(t: &DLTensor) -> Vec<i64> {
    if t.ndim <= 0 {
        return Vec::new();
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(t.shape, t.ndim as usize) }.to_vec()
}

/// # Safety
/// `t` is a valid descriptor.
unsafe fn is_compact(t: &DLTensor) -> bool {
    // SAFETY: guaranteed by the caller.
    let shape = unsafe { shape_of(t) };
    if t.strides.is_null() {
        return true;
    }
    // SAFETY: guaranteed by the caller.
    let strides = unsafe { std::slice::from_raw_parts(t.strides, shape.len()) };
    is_contiguous(&shape, Some(strides))
}

/// The wire descriptor of a remote tensor (which must be compact).
///
/// # Safety
/// `t` is a valid descriptor.
unsafe fn remote_meta(t: &DLTensor, remote: DLDevice) -> Result<TensorMeta> {
    // SAFETY: guaranteed by the caller.
    if !unsafe { is_compact(t) } {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "a remote tensor must be compact to be copied (RPC carries no strides)"
        );
    }
    Ok(TensorMeta {
        data: t.data as usize as u64,
        device: remote,
        dtype: t.dtype,
        // SAFETY: guaranteed by the caller.
        shape: unsafe { shape_of(t) },
        byte_offset: t.byte_offset,
    })
}

/// A compact host descriptor over `buffer`, shaped like `like`.
fn compact_host(like: &DLTensor, shape: &mut [i64], buffer: &mut [u8]) -> DLTensor {
    DLTensor {
        data: buffer.as_mut_ptr().cast(),
        device: DLDevice {
            device_type: kDLCPU,
            device_id: 0,
        },
        ndim: like.ndim,
        dtype: like.dtype,
        shape: shape.as_mut_ptr(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

impl DeviceApi for RpcDeviceApi {
    fn name(&self) -> &str {
        "rpc"
    }

    fn attr(&self, device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
        let Ok((core, remote)) = SessionCore::of_device(device.0) else {
            return Ok((attr == DeviceAttr::Exist).then(|| Any::from(0i64)));
        };
        if attr == DeviceAttr::Exist {
            return Ok(Some(Any::from(i64::from(core.device_exists(remote)?))));
        }
        let value = core.session().device_call(
            RpcCode::DevGetAttr,
            vec![WireValue::Device(remote), WireValue::Int(attr as i64)],
        )?;
        Ok(match value {
            WireValue::None => None,
            WireValue::Int(v) => Some(Any::from(v)),
            WireValue::Bool(v) => Some(Any::from(i64::from(v))),
            other => other
                .as_bytes()
                .map(|b| Any::from(String::from_utf8_lossy(b).into_owned())),
        })
    }

    fn alloc(
        &self,
        device: Device,
        nbytes: usize,
        alignment: usize,
        dtype_hint: DataType,
    ) -> Result<*mut c_void> {
        let (core, remote) = SessionCore::of_device(device.0)?;
        let value = core.session().device_call(
            RpcCode::DevAllocData,
            vec![
                WireValue::Device(remote),
                WireValue::Int(nbytes as i64),
                WireValue::Int(alignment as i64),
                WireValue::DataType(dtype_hint.0),
            ],
        )?;
        let address = value.as_handle().unwrap_or(0);
        Ok(address as usize as *mut c_void)
    }

    unsafe fn free(&self, device: Device, ptr: *mut c_void) -> Result<()> {
        // A closed session freed its memory when it ended.
        let Ok((core, remote)) = SessionCore::of_device(device.0) else {
            return Ok(());
        };
        core.session().post_device_call(
            RpcCode::DevFreeData,
            vec![WireValue::Device(remote), handle(ptr)],
        );
        Ok(())
    }

    unsafe fn copy(&self, from: &DLTensor, to: &DLTensor, stream: StreamHandle) -> Result<()> {
        // SAFETY: the registry checked both descriptors (same shape and dtype, valid).
        let nbytes = unsafe { tensor_nbytes(from)? };
        match (
            from.device.device_type == kDLCPU,
            to.device.device_type == kDLCPU,
        ) {
            (true, false) => {
                let (core, remote) = SessionCore::of_device(to.device)?;
                // SAFETY: `to` is a valid descriptor.
                let meta = unsafe { remote_meta(to, remote)? };
                // SAFETY: `from` is valid host memory of `nbytes` compact bytes when compact.
                if unsafe { is_compact(from) } {
                    // SAFETY: a compact host tensor holds `nbytes` bytes from its offset.
                    let bytes = unsafe {
                        std::slice::from_raw_parts(
                            from.data.cast::<u8>().add(from.byte_offset as usize),
                            nbytes,
                        )
                    };
                    return core.session().copy_to_remote(
                        &meta,
                        nbytes as u64,
                        CopySource::Bytes(bytes),
                    );
                }
                let mut buffer = vec![0u8; nbytes];
                // SAFETY: `from` is valid.
                let mut shape = unsafe { shape_of(from) };
                let compact = compact_host(from, &mut shape, &mut buffer);
                // SAFETY: both are host tensors of the same shape and dtype.
                unsafe { copy_host_strided(from, &compact) };
                core.session()
                    .copy_to_remote(&meta, nbytes as u64, CopySource::Bytes(&buffer))
            }
            (false, true) => {
                let (core, remote) = SessionCore::of_device(from.device)?;
                // SAFETY: `from` is a valid descriptor.
                let meta = unsafe { remote_meta(from, remote)? };
                // SAFETY: `to` is valid.
                if unsafe { is_compact(to) } {
                    // SAFETY: a compact host tensor holds `nbytes` bytes from its offset.
                    let bytes = unsafe {
                        std::slice::from_raw_parts_mut(
                            to.data.cast::<u8>().add(to.byte_offset as usize),
                            nbytes,
                        )
                    };
                    return core.session().copy_from_remote(
                        &meta,
                        nbytes as u64,
                        CopySink::Bytes(bytes),
                    );
                }
                let mut buffer = vec![0u8; nbytes];
                core.session().copy_from_remote(
                    &meta,
                    nbytes as u64,
                    CopySink::Bytes(&mut buffer),
                )?;
                // SAFETY: `to` is valid.
                let mut shape = unsafe { shape_of(to) };
                let compact = compact_host(to, &mut shape, &mut buffer);
                // SAFETY: both are host tensors of the same shape and dtype.
                unsafe { copy_host_strided(&compact, to) };
                Ok(())
            }
            _ => {
                let (core, from_remote) = SessionCore::of_device(from.device)?;
                let (other, to_remote) = SessionCore::of_device(to.device)?;
                if core.index() != other.index() {
                    tvm_ffi::bail!(
                        ErrorKind::ValueError,
                        "cannot copy between two RPC sessions ({} and {}) directly; copy \
                         through the host",
                        core.index(),
                        other.index()
                    );
                }
                // SAFETY: both descriptors are valid.
                let (from_meta, to_meta) =
                    unsafe { (remote_meta(from, from_remote)?, remote_meta(to, to_remote)?) };
                core.session()
                    .device_call(
                        RpcCode::CopyAmongRemote,
                        vec![
                            WireValue::Tensor(from_meta),
                            WireValue::Tensor(to_meta),
                            handle(stream.0),
                        ],
                    )
                    .map(drop)
            }
        }
    }

    fn create_stream(&self, device: Device) -> Result<StreamHandle> {
        let (core, remote) = SessionCore::of_device(device.0)?;
        let value = core
            .session()
            .device_call(RpcCode::DevCreateStream, vec![WireValue::Device(remote)])?;
        Ok(StreamHandle(
            value.as_handle().unwrap_or(0) as usize as *mut c_void
        ))
    }

    unsafe fn free_stream(&self, device: Device, stream: StreamHandle) -> Result<()> {
        let Ok((core, remote)) = SessionCore::of_device(device.0) else {
            return Ok(());
        };
        core.session()
            .device_call(
                RpcCode::DevFreeStream,
                vec![WireValue::Device(remote), handle(stream.0)],
            )
            .map(drop)
    }

    fn sync_stream(&self, device: Device, stream: StreamHandle) -> Result<()> {
        let (core, remote) = SessionCore::of_device(device.0)?;
        core.session()
            .device_call(
                RpcCode::DevStreamSync,
                vec![WireValue::Device(remote), handle(stream.0)],
            )
            .map(drop)
    }
}
