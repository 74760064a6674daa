//! [`BufferDeviceApi`]: the runtime's device API over a buffer-handle backend. Every device has
//! one queue, the default (NULL) stream, as in Apache TVM; other streams are refused.

use std::ffi::c_void;
use std::ops::Deref;
use std::sync::Arc;

use tvm_ffi::abi::DLTensor;
use tvm_ffi::{Any, DataType, Device, Result};
use tvm_runtime::device::{DeviceApi, DeviceAttr, StreamHandle, require_default_stream};

use super::{BackendFailure, BufferBackend};

/// The device API of backend `B`, registered for its device type; dereferences to the backend.
pub struct BufferDeviceApi<B> {
    backend: Arc<B>,
}

impl<B: BufferBackend> BufferDeviceApi<B> {
    /// The device API of `backend`.
    pub fn new(backend: Arc<B>) -> BufferDeviceApi<B> {
        BufferDeviceApi { backend }
    }

    /// The backend behind it.
    pub fn backend(&self) -> &Arc<B> {
        &self.backend
    }
}

impl<B> Deref for BufferDeviceApi<B> {
    type Target = B;

    fn deref(&self) -> &B {
        &self.backend
    }
}

impl<B: BufferBackend> DeviceApi for BufferDeviceApi<B> {
    fn name(&self) -> &str {
        B::Failure::DEVICE_NAME
    }

    fn attr(&self, device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
        if attr == DeviceAttr::Exist {
            let present = self.backend.device_index(device).is_ok();
            return Ok(Some(Any::from(i64::from(present))));
        }
        Ok(self.backend.device_attr(device, attr)?)
    }

    fn unavailable_reason(&self, device: Device) -> Option<String> {
        self.backend
            .device_index(device)
            .err()
            .map(|e| e.to_string())
    }

    fn alloc(
        &self,
        device: Device,
        nbytes: usize,
        _alignment: usize,
        dtype_hint: DataType,
    ) -> Result<*mut c_void> {
        let buffer = self.backend.allocate(device, nbytes as u64, dtype_hint)?;
        Ok(self.backend.buffers().insert(buffer))
    }

    unsafe fn free(&self, device: Device, ptr: *mut c_void) -> Result<()> {
        let buffer = self.backend.buffers().get(ptr, device.device_id())?;
        self.backend.before_free(&buffer)?;
        self.backend.buffers().remove(ptr);
        Ok(())
    }

    unsafe fn copy(&self, from: &DLTensor, to: &DLTensor, stream: StreamHandle) -> Result<()> {
        require_default_stream(B::Failure::TITLE, stream)?;
        // SAFETY: forwarded from the caller (valid descriptors, checked shapes).
        Ok(unsafe { super::copy::copy_tensors(&*self.backend, from, to) }?)
    }

    fn create_stream(&self, _device: Device) -> Result<StreamHandle> {
        Ok(StreamHandle::NULL)
    }

    unsafe fn free_stream(&self, _device: Device, stream: StreamHandle) -> Result<()> {
        require_default_stream(B::Failure::TITLE, stream)
    }

    fn check_raw_stream(&self, _device: Device, stream: StreamHandle) -> Result<()> {
        require_default_stream(B::Failure::TITLE, stream)
    }

    fn sync_stream(&self, device: Device, stream: StreamHandle) -> Result<()> {
        require_default_stream(B::Failure::TITLE, stream)?;
        Ok(self.backend.synchronize(device)?)
    }
}
