//! Devices: one [`DeviceApi`] trait, a registry keyed by DLPack device type, and the backends
//! that live in this crate (the host [`cpu`] and, with the `test-device` feature, a strict
//! `test_backend` that simulates a non-CPU device on host memory for the test suites).
//!
//! Everything that depends on a device (tensor allocation, copies, streams, the DLPack allocator
//! of the environment, the Python `Device` attributes) asks the registry; nothing else branches on
//! a device type. Backends compiled into the final artifact register with
//! [`register_device_api`]; a backend from another library registers the C table of
//! `tvm/ffi/extra/device_api.h` through the global function `ffi.DeviceAPIRegister` ([`c_table`]).
//!
//! Memory handed out by a backend is opaque: only the backend that allocated a pointer may
//! interpret it. Copies always go through a backend, which also handles strides and byte
//! offsets.

pub mod c_table;
pub mod cpu;
pub mod export;
mod globals;
mod host_copy;
mod registry;
mod tensor;
#[cfg(feature = "test-device")]
pub mod test_backend;

use std::ffi::c_void;
use std::fmt;

use tvm_ffi::abi::DLTensor;
use tvm_ffi::{Any, DataType, Device, Result};

pub use export::{export_table, register_external};
pub use host_copy::{
    byte_extent, check_copy_shapes, copy_host_strided, host_view, is_row_major, tensor_nbytes,
};
pub use registry::{
    RPC_SESSION_DEVICE_TYPES, alloc_data, alloc_workspace, copy_tensor, create_stream,
    current_stream, device_api, device_attr, device_exists, free_data, free_stream, free_workspace,
    register_device_api, registered_device_types, set_current_stream, sync_stream,
    sync_stream_from_to,
};
pub use tensor::{TensorDeviceExt, empty_on};
#[cfg(feature = "test-device")]
pub use test_backend::{
    TestDeviceApi, TestDeviceConfig, TestDeviceStats, register_test_device, test_device_stats,
};

pub(crate) use globals::register_globals;
pub(crate) use tensor::install_dlpack_allocator;

/// A stream (a queue of work on a device), as the backend that created it defines it; NULL is
/// the device's default stream. An opaque token: only its backend interprets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct StreamHandle(pub *mut c_void);

// SAFETY: a token passed between threads and back to its backend, never dereferenced here.
unsafe impl Send for StreamHandle {}
// SAFETY: as above.
unsafe impl Sync for StreamHandle {}

impl StreamHandle {
    /// The default stream of a device.
    pub const NULL: StreamHandle = StreamHandle(std::ptr::null_mut());

    /// Whether this is the default stream.
    pub fn is_null(self) -> bool {
        self.0.is_null()
    }
}

impl fmt::Pointer for StreamHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Pointer::fmt(&self.0, f)
    }
}

/// Refuses every stream but the default (NULL) one: for backends with one queue per device
/// (Vulkan, WebGPU), whose `create_stream` hands out NULL. `backend` names them in the message.
pub fn require_default_stream(backend: &str, stream: StreamHandle) -> Result<()> {
    if !stream.is_null() {
        tvm_ffi::bail!(
            tvm_ffi::ErrorKind::ValueError,
            "{backend} devices have one queue, the default (NULL) stream; got stream {stream:p}"
        );
    }
    Ok(())
}

/// The index of `device` among the devices a backend found (`names`, in index order), or the
/// message naming what is present: `no Vulkan device 7; present: [vulkan:0 'llvmpipe']`.
/// `backend` names the backend in text, `prefix` its devices (`vulkan`, `webgpu`).
pub fn device_index<'a>(
    backend: &str,
    prefix: &str,
    device: Device,
    names: impl ExactSizeIterator<Item = &'a str>,
) -> std::result::Result<usize, String> {
    let id = device.device_id();
    match usize::try_from(id) {
        Ok(index) if index < names.len() => Ok(index),
        _ => {
            let present: Vec<String> = names
                .enumerate()
                .map(|(i, name)| format!("{prefix}:{i} '{name}'"))
                .collect();
            Err(format!(
                "no {backend} device {id}; present: [{}]",
                present.join(", ")
            ))
        }
    }
}

/// Default alignment of tensor data, in bytes (as DLPack producers and TVM use).
pub const TENSOR_ALIGNMENT: usize = 64;

pub use tvm_ffi::device::DeviceAttr;

/// One kind of device: the operations the runtime needs from a backend (the shape of TVM's
/// `DeviceAPI`). Implementations are shared between threads.
///
/// Pointers and streams are the backend's own: the registry hands a backend only what that
/// backend produced (or a host address, for the host side of a copy). The registry checks
/// shapes, dtypes and sizes before [`DeviceApi::copy`], and that the device exists before any
/// other call.
pub trait DeviceApi: Send + Sync + 'static {
    /// A short name of the backend, for messages ("cpu", "test", "cuda").
    fn name(&self) -> &str;

    /// An attribute of `device`; `Ok(None)` when the backend does not know it. [`DeviceAttr::Exist`]
    /// must be answered for every index, with an int.
    fn attr(&self, device: Device, attr: DeviceAttr) -> Result<Option<Any>>;

    /// Why `device` does not exist (a missing driver library, no such index), for the error that
    /// refuses an operation on it; `None` when the backend has nothing to add.
    fn unavailable_reason(&self, _device: Device) -> Option<String> {
        None
    }

    /// Allocates `nbytes` (at least one byte is reserved for 0) aligned to `alignment`, a power
    /// of two. `dtype_hint` is the element type the memory will hold.
    fn alloc(
        &self,
        device: Device,
        nbytes: usize,
        alignment: usize,
        dtype_hint: DataType,
    ) -> Result<*mut c_void>;

    /// Frees memory from [`DeviceApi::alloc`], after the work queued on it has finished.
    ///
    /// # Safety
    /// `ptr` came from `alloc` on `device` of this backend and is freed once.
    unsafe fn free(&self, device: Device, ptr: *mut c_void) -> Result<()>;

    /// Copies the elements of `from` into `to` (same shape and dtype, any strides and byte
    /// offsets) on `stream`. One side may be a CPU tensor (host memory); the other is on a
    /// device of this backend. The copy may still be in flight when this returns: it is done
    /// once the stream is synchronized.
    ///
    /// # Safety
    /// Both descriptors are valid, and their memory stays valid until the stream is synchronized.
    unsafe fn copy(&self, from: &DLTensor, to: &DLTensor, stream: StreamHandle) -> Result<()>;

    /// A new stream on `device`. Backends without streams return NULL.
    fn create_stream(&self, device: Device) -> Result<StreamHandle>;

    /// Frees a stream from [`DeviceApi::create_stream`] (its queued work completes first).
    ///
    /// # Safety
    /// `stream` came from `create_stream` on `device` and is freed once.
    unsafe fn free_stream(&self, device: Device, stream: StreamHandle) -> Result<()>;

    /// Waits until the work queued on `stream` (NULL: the default stream) is done.
    fn sync_stream(&self, device: Device, stream: StreamHandle) -> Result<()>;

    /// Refuses a raw stream this backend cannot use, before it becomes a thread's current
    /// stream (`set_raw_stream`). The default accepts any: a stream made by another library
    /// (a framework's CUDA stream) is the caller's to vouch for.
    fn check_raw_stream(&self, _device: Device, _stream: StreamHandle) -> Result<()> {
        Ok(())
    }

    /// Makes the work queued on `to` from now on wait for the work queued on `from` so far (the
    /// DLPack stream hand-off). Backends with events record one on `from` and make `to` wait on
    /// it without blocking the host; the default waits for `from` on the host.
    fn sync_stream_from_to(
        &self,
        device: Device,
        from: StreamHandle,
        _to: StreamHandle,
    ) -> Result<()> {
        self.sync_stream(device, from)
    }

    /// Scratch memory for a kernel's temporaries; the default is [`DeviceApi::alloc`] with
    /// [`TENSOR_ALIGNMENT`].
    fn alloc_workspace(
        &self,
        device: Device,
        nbytes: usize,
        dtype_hint: DataType,
    ) -> Result<*mut c_void> {
        self.alloc(device, nbytes, TENSOR_ALIGNMENT, dtype_hint)
    }

    /// Frees memory from [`DeviceApi::alloc_workspace`].
    ///
    /// # Safety
    /// As for [`DeviceApi::free`].
    unsafe fn free_workspace(&self, device: Device, ptr: *mut c_void) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.free(device, ptr) }
    }
}
