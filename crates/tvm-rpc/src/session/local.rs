//! The machine itself as a session: global functions, objects by handle, and copies into and
//! out of its memory; the device system calls are answered in `local_device.rs`.

use std::collections::HashSet;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use tvm_ffi::abi::{
    DLDevice, DLTensor, kDLCPU, kTVMFFIBool, kTVMFFIBytes, kTVMFFIDataType, kTVMFFIDevice,
    kTVMFFIFloat, kTVMFFIInt, kTVMFFINone, kTVMFFIOpaquePtr, kTVMFFISmallBytes, kTVMFFISmallStr,
    kTVMFFIStr, kTVMFFITensor,
};
use tvm_ffi::string::bytes_of_any;
use tvm_ffi::{Any, AnyView, DataType, Device, ErrorKind, Function, Result, Tensor};
use tvm_runtime::device as registry;

use super::handles::HandleTable;
use super::host_cache::HostBlockCache;
use super::plain::{plain_from_return, plain_to_wire};
use super::warm_memory;
use super::{CopySink, CopySource, Peer, RpcSession};
use crate::codec::{RPC_CALLBACK_INDEX, TensorMeta, WireValue};
use crate::protocol::{RPC_SESS_MASK, RpcCode};

/// Bytes staged per step when a copy goes through a device (host memory is written in place).
const STAGING_CHUNK: usize = 4 << 20;

/// Serves the functions, objects and devices of this process.
#[derive(Default)]
pub struct LocalSession {
    table: Mutex<HandleTable>,
    /// Serves only the functions handed to it ([`LocalSession::export`]): no globals, devices
    /// or memory (the session a client offers its server for callbacks).
    callbacks_only: bool,
    /// The connection this session serves, for callbacks to the peer (none before one binds).
    peer: Mutex<Option<Weak<dyn Peer>>>,
    /// Handles exported for the length of one call (in-process callbacks).
    transient: Mutex<HashSet<u64>>,
    /// Large host blocks the peer freed, for its next allocations of the same size.
    pub(super) host_cache: Mutex<HostBlockCache>,
}

impl LocalSession {
    /// A session with nothing handed out yet.
    pub fn new() -> LocalSession {
        LocalSession::default()
    }

    /// A session that serves only the functions exported to it.
    pub fn callbacks_only() -> LocalSession {
        LocalSession {
            table: Mutex::default(),
            callbacks_only: true,
            peer: Mutex::default(),
            transient: Mutex::default(),
            host_cache: Mutex::default(),
        }
    }

    /// Hands `function` out; the peer may call it until it frees the handle.
    pub fn export(&self, function: Function) -> u64 {
        self.table().insert(Any::from(function))
    }

    fn refuse_in_callback_session(&self, what: &str) -> Result<()> {
        if self.callbacks_only {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "this side of the connection only runs the callbacks it passed; {what} is refused"
            );
        }
        Ok(())
    }

    /// The peer of the connection this session serves, while that connection is open.
    fn live_peer(&self) -> Option<(Weak<dyn Peer>, Arc<dyn Peer>)> {
        let peer = self
            .peer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        let live = peer.upgrade()?;
        Some((peer, live))
    }

    /// Whether the session serves an open connection (set by [`RpcSession::bind_peer`]).
    pub(crate) fn has_peer(&self) -> bool {
        self.live_peer().is_some()
    }

    /// A function that calls back the peer's function `handle` through the endpoint this
    /// session serves; the peer's function is released when the last reference goes.
    pub(crate) fn callback(&self, handle: u64) -> Result<Any> {
        let Some((peer, _)) = self.live_peer() else {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "a callback arrived outside of a connection"
            );
        };
        let releaser = CallbackRelease {
            peer: peer.clone(),
            handle,
        };
        let function = Function::from_packed(move |args| {
            let _ = &releaser;
            let connection = peer.upgrade().ok_or_else(|| {
                tvm_ffi::Error::new("RPCError", "the connection of this callback is closed")
            })?;
            let wire = args
                .iter()
                .map(|a| plain_to_wire(a, "a callback argument"))
                .collect::<Result<Vec<_>>>()?;
            let values = connection.call(handle, wire)?;
            plain_from_return(&values, "a callback's result")
        });
        Ok(Any::from(function))
    }

    pub(super) fn table(&self) -> MutexGuard<'_, HandleTable> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Number of object handles the peer still holds.
    pub fn live_handles(&self) -> usize {
        self.table().live_objects()
    }

    /// A wire value as an argument of a local call.
    fn to_local(&self, value: WireValue) -> Result<Any> {
        Ok(match value {
            WireValue::None => Any::none(),
            WireValue::Int(v) => Any::from(v),
            WireValue::Bool(v) => Any::from(v),
            WireValue::Float(v) => Any::from(v),
            WireValue::Handle(v) => Any::from(v as usize as *mut c_void),
            WireValue::DataType(dtype) => Any::from(DataType(dtype)),
            WireValue::Device(device) => Any::from(Device(checked_device(device)?)),
            WireValue::Tensor(meta) => Any::from(self.tensor_view(&meta)?),
            WireValue::RawStr(s) | WireValue::Str(s) => tvm_ffi::String::from_bytes(&s).into_any(),
            WireValue::ByteArray(s) | WireValue::Bytes(s) => {
                tvm_ffi::Bytes::from_bytes(&s).into_any()
            }
            WireValue::Object {
                type_index: RPC_CALLBACK_INDEX,
                handle,
            } => self.callback(handle)?,
            WireValue::Function(handle)
            | WireValue::Module(handle)
            | WireValue::Object { handle, .. } => self.table().get(handle)?,
        })
    }

    /// A tensor over memory the peer names, after checking that it was handed out.
    pub(super) fn tensor_view(&self, meta: &TensorMeta) -> Result<Tensor> {
        let device = checked_device(meta.device)?;
        let nbytes = tensor_nbytes(meta)?;
        let start = meta.data.checked_add(meta.byte_offset).ok_or_else(|| {
            tvm_ffi::Error::new(ErrorKind::ValueError, "tensor byte offset overflows")
        })?;
        self.table().check_access(start, nbytes, device)?;
        let mut shape = meta.shape.clone();
        let prototype = DLTensor {
            data: meta.data as usize as *mut c_void,
            device,
            ndim: shape.len() as i32,
            dtype: meta.dtype,
            shape: shape.as_mut_ptr(),
            strides: std::ptr::null_mut(),
            byte_offset: meta.byte_offset,
        };
        // SAFETY: the descriptor is complete (its shape is read before this returns), and its
        // memory was checked to lie in a region this session handed out; the no-op release
        // matches that the view owns nothing.
        unsafe { Tensor::from_foreign(&prototype, false, &mut [], release_nothing) }
    }

    /// Encodes a local return value by the protocol's return convention.
    fn encode_return(&self, value: Any) -> Result<Vec<WireValue>> {
        let index = value.type_index();
        let tag = WireValue::Int(i64::from(index));
        Ok(match index {
            kTVMFFINone => vec![tag, WireValue::None],
            kTVMFFIInt => vec![tag, WireValue::Int(value.cast()?)],
            kTVMFFIBool => vec![tag, WireValue::Bool(value.cast()?)],
            kTVMFFIFloat => vec![tag, WireValue::Float(value.cast()?)],
            kTVMFFIOpaquePtr => {
                let ptr: *mut c_void = value.cast()?;
                vec![tag, WireValue::Handle(ptr as usize as u64)]
            }
            kTVMFFIDataType => vec![tag, WireValue::DataType(value.cast::<DataType>()?.0)],
            kTVMFFIDevice => vec![tag, WireValue::Device(value.cast::<Device>()?.0)],
            kTVMFFISmallStr | kTVMFFIStr => {
                let text = bytes_of_any(&value).unwrap_or_default().to_vec();
                vec![tag, WireValue::RawStr(text)]
            }
            kTVMFFISmallBytes | kTVMFFIBytes => {
                let bytes = bytes_of_any(&value).unwrap_or_default().to_vec();
                vec![tag, WireValue::ByteArray(bytes)]
            }
            kTVMFFITensor => {
                let tensor: Tensor = value.cast()?;
                self.encode_tensor(tensor)?
            }
            _ if value.is_object() => vec![tag, WireValue::Handle(self.table().insert(value))],
            _ => tvm_ffi::bail!(
                ErrorKind::TypeError,
                "a value of type {} cannot be returned over RPC",
                value.type_key()
            ),
        })
    }

    fn encode_tensor(&self, tensor: Tensor) -> Result<Vec<WireValue>> {
        if !tensor.is_contiguous() {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "a non-contiguous tensor (shape {:?}, strides {:?}) cannot be returned over RPC",
                tensor.shape(),
                tensor.strides()
            );
        }
        let dl = *tensor.dltensor();
        let meta = TensorMeta {
            data: dl.data as usize as u64,
            device: dl.device,
            dtype: dl.dtype,
            shape: tensor.shape().to_vec(),
            byte_offset: dl.byte_offset,
        };
        let nbytes = tensor_nbytes(&meta)?;
        let mut table = self.table();
        let handle = table.insert(Any::from(tensor));
        table.add_region(meta.data + meta.byte_offset, nbytes, meta.device, handle);
        Ok(vec![
            WireValue::Int(i64::from(kTVMFFITensor)),
            WireValue::Tensor(meta),
            WireValue::Handle(handle),
        ])
    }

    /// A descriptor of `nbytes` at the tensor's byte offset, checked against the handed-out
    /// memory.
    fn checked_span(&self, tensor: &TensorMeta, nbytes: u64) -> Result<(DLDevice, u64)> {
        let device = checked_device(tensor.device)?;
        let start = tensor.data.checked_add(tensor.byte_offset).ok_or_else(|| {
            tvm_ffi::Error::new(ErrorKind::ValueError, "tensor byte offset overflows")
        })?;
        self.table().check_access(start, nbytes, device)?;
        Ok((device, start))
    }
}

extern "C" fn release_nothing(_: *mut c_void) {}

/// Frees the peer's function when the local stand-in for it dies.
struct CallbackRelease {
    peer: Weak<dyn Peer>,
    handle: u64,
}

impl Drop for CallbackRelease {
    fn drop(&mut self) {
        if let Some(connection) = self.peer.upgrade() {
            connection.free_handle(self.handle);
        }
    }
}

fn checked_len(given: usize, expected: usize) -> Result<()> {
    if given != expected {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "a copy of {expected} bytes was given a buffer of {given} bytes"
        );
    }
    Ok(())
}

pub(super) fn too_large(value: u64) -> tvm_ffi::Error {
    tvm_ffi::Error::new(
        ErrorKind::ValueError,
        format!("{value} does not fit in this machine's address space"),
    )
}

/// Devices on the wire never carry a session mask.
pub(super) fn checked_device(device: DLDevice) -> Result<DLDevice> {
    if device.device_type >= RPC_SESS_MASK || device.device_type < 0 || device.device_id < 0 {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "device ({}, {}) cannot be used through RPC (a remote session's device, or negative)",
            device.device_type,
            device.device_id
        );
    }
    Ok(device)
}

pub(super) fn tensor_nbytes(meta: &TensorMeta) -> Result<u64> {
    meta.nbytes().ok_or_else(|| {
        tvm_ffi::Error::new(
            ErrorKind::ValueError,
            format!("tensor shape {:?} overflows its size", meta.shape),
        )
    })
}

impl RpcSession for LocalSession {
    fn name(&self) -> String {
        "local".into()
    }

    fn get_function(&self, name: &str) -> Result<u64> {
        if self.callbacks_only {
            return Ok(0);
        }
        Ok(match Function::get_global(name) {
            Some(function) => self.table().insert(Any::from(function)),
            None => 0,
        })
    }

    fn call_function(&self, handle: u64, args: Vec<WireValue>) -> Result<Vec<WireValue>> {
        let transient: Vec<u64> = args
            .iter()
            .filter_map(|a| match a {
                WireValue::Function(h) => Some(*h),
                _ => None,
            })
            .collect();
        let function: Function = self.table().get(handle)?.cast().map_err(|_| {
            tvm_ffi::Error::new(
                ErrorKind::TypeError,
                format!("remote handle {handle:#x} is not a function"),
            )
        })?;
        let args = args
            .into_iter()
            .map(|value| self.to_local(value))
            .collect::<Result<Vec<Any>>>();
        let args = match args {
            Ok(args) => args,
            Err(error) => {
                self.release_transient(&transient);
                return Err(error);
            }
        };
        let views: Vec<AnyView<'_>> = args.iter().map(AnyView::from).collect();
        let result = function.call_packed(&views);
        drop(views);
        drop(args);
        self.release_transient(&transient);
        self.encode_return(result?)
    }

    fn copy_to_remote(&self, tensor: &TensorMeta, nbytes: u64, data: CopySource<'_>) -> Result<()> {
        self.refuse_in_callback_session("writing memory")?;
        let (device, start) = self.checked_span(tensor, nbytes)?;
        let len = usize::try_from(nbytes).map_err(|_| too_large(nbytes))?;
        if device.device_type == kDLCPU {
            // SAFETY: the span was checked to lie in host memory this session handed out and
            // that is still alive.
            let target = unsafe { std::slice::from_raw_parts_mut(start as usize as *mut u8, len) };
            return match data {
                CopySource::Bytes(bytes) => {
                    checked_len(bytes.len(), len)?;
                    target.copy_from_slice(bytes);
                    Ok(())
                }
                CopySource::Stream(reader) => reader
                    .read_exact(target)
                    .map_err(|e| crate::transport::connection_error(e, "receiving tensor bytes")),
            };
        }
        let data = match data {
            CopySource::Bytes(bytes) => {
                checked_len(bytes.len(), len)?;
                // SAFETY: the destination span was checked above; `bytes` outlives the
                // synchronous copy.
                return unsafe { copy_bytes_to_device(bytes, device, start) };
            }
            CopySource::Stream(reader) => reader,
        };
        let mut staging = vec![0u8; len.min(STAGING_CHUNK)];
        let mut done = 0usize;
        while done < len {
            let step = (len - done).min(staging.len());
            data.read_exact(&mut staging[..step])
                .map_err(|e| crate::transport::connection_error(e, "receiving tensor bytes"))?;
            // SAFETY: the destination span was checked above; the staging buffer holds `step`
            // bytes and outlives the synchronous copy.
            unsafe { copy_bytes_to_device(&staging[..step], device, start + done as u64)? };
            done += step;
        }
        Ok(())
    }

    fn check_copy_from_remote(&self, tensor: &TensorMeta, nbytes: u64) -> Result<()> {
        self.checked_span(tensor, nbytes).map(|_| ())
    }

    fn copy_from_remote(&self, tensor: &TensorMeta, nbytes: u64, out: CopySink<'_>) -> Result<()> {
        self.refuse_in_callback_session("reading memory")?;
        let (device, start) = self.checked_span(tensor, nbytes)?;
        let len = usize::try_from(nbytes).map_err(|_| too_large(nbytes))?;
        let sent = |e| crate::transport::connection_error(e, "sending tensor bytes");
        if device.device_type == kDLCPU {
            // SAFETY: the span was checked to lie in live host memory this session handed out.
            let source = unsafe { std::slice::from_raw_parts(start as usize as *const u8, len) };
            return match out {
                CopySink::Bytes(bytes) => {
                    checked_len(bytes.len(), len)?;
                    bytes.copy_from_slice(source);
                    Ok(())
                }
                CopySink::Stream(out) => out.write_all(source).map_err(sent),
            };
        }
        let out = match out {
            CopySink::Bytes(bytes) => {
                checked_len(bytes.len(), len)?;
                // SAFETY: the source span was checked above; `bytes` has `len` bytes.
                return unsafe { copy_bytes_from_device(device, start, bytes) };
            }
            CopySink::Stream(out) => out,
        };
        let mut staging = vec![0u8; len.min(STAGING_CHUNK)];
        let mut done = 0usize;
        while done < len {
            let step = (len - done).min(staging.len());
            // SAFETY: the source span was checked above; the staging buffer has `step` bytes.
            unsafe { copy_bytes_from_device(device, start + done as u64, &mut staging[..step])? };
            out.write_all(&staging[..step]).map_err(sent)?;
            done += step;
        }
        Ok(())
    }

    fn free_handle(&self, handle: u64) -> Result<()> {
        let value = self.table().remove(handle)?;
        drop(value);
        Ok(())
    }

    fn device_call(&self, code: RpcCode, args: Vec<WireValue>) -> Result<WireValue> {
        self.refuse_in_callback_session("a device call")?;
        self.serve_device_call(code, &args)
    }

    fn export_callback(&self, function: Function) -> Result<WireValue> {
        let handle = self.export(function);
        self.transient
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(handle);
        Ok(WireValue::Function(handle))
    }

    fn bind_peer(&self, peer: Weak<dyn Peer>) {
        *self.peer.lock().unwrap_or_else(PoisonError::into_inner) = Some(peer);
    }

    fn is_local(&self) -> bool {
        true
    }
}

impl LocalSession {
    /// Frees the handles among `handles` that were exported for one call only.
    fn release_transient(&self, handles: &[u64]) {
        let mut transient = self
            .transient
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let done: Vec<u64> = handles
            .iter()
            .copied()
            .filter(|h| transient.remove(h))
            .collect();
        drop(transient);
        let mut released = Vec::new();
        for handle in done {
            if let Ok(value) = self.table().remove(handle) {
                released.push(value);
            }
        }
        drop(released);
    }
}

impl Drop for LocalSession {
    fn drop(&mut self) {
        let table = self.table.get_mut().unwrap_or_else(PoisonError::into_inner);
        let objects = table.take_objects();
        let allocations = table.take_allocations();
        drop(objects);
        let cached = self
            .host_cache
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .drain();
        let host = DLDevice {
            device_type: kDLCPU,
            device_id: 0,
        };
        let cached = cached.into_iter().map(|block| (block.address, host));
        for (address, device) in allocations.into_iter().chain(cached) {
            if device.device_type == kDLCPU && warm_memory::give_back(address) {
                continue;
            }
            // SAFETY: each allocation of this session is freed once, here, when no request can
            // use it any more (the cached ones were forgotten by the table when the peer freed
            // them).
            let _ = unsafe { registry::free_data(Device(device), address as usize as *mut c_void) };
        }
    }
}

/// A one-dimensional byte tensor descriptor at `address` on `device`.
fn byte_tensor(address: u64, device: DLDevice, len: &mut i64) -> DLTensor {
    DLTensor {
        data: address as usize as *mut c_void,
        device,
        ndim: 1,
        dtype: DataType::uint(8).0,
        shape: len,
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

/// Copies host bytes to device memory, synchronously.
///
/// # Safety
/// `len(source)` bytes at `address` on `device` are live device memory.
unsafe fn copy_bytes_to_device(source: &[u8], device: DLDevice, address: u64) -> Result<()> {
    let mut len = source.len() as i64;
    let mut host_len = len;
    let host = byte_tensor(source.as_ptr() as usize as u64, cpu(), &mut host_len);
    let target = byte_tensor(address, device, &mut len);
    // SAFETY: both sides are live for the synchronous copy (guaranteed by the caller).
    unsafe { registry::copy_tensor(&host, &target, None, true) }
}

/// Copies device memory to host bytes, synchronously.
///
/// # Safety
/// `len(target)` bytes at `address` on `device` are live device memory.
unsafe fn copy_bytes_from_device(device: DLDevice, address: u64, target: &mut [u8]) -> Result<()> {
    let mut len = target.len() as i64;
    let mut host_len = len;
    let source = byte_tensor(address, device, &mut len);
    let host = byte_tensor(target.as_mut_ptr() as usize as u64, cpu(), &mut host_len);
    // SAFETY: both sides are live for the synchronous copy (guaranteed by the caller).
    unsafe { registry::copy_tensor(&source, &host, None, true) }
}

fn cpu() -> DLDevice {
    DLDevice {
        device_type: kDLCPU,
        device_id: 0,
    }
}
