//! The device API of a [`GpuRuntime`]: device memory devices and pinned host memory devices.

use std::ffi::c_void;
use std::sync::Arc;

use tvm_ffi::abi::{DLTensor, kDLCPU};
use tvm_ffi::{Any, DataType, Device, Result};
use tvm_runtime::device::{DeviceApi, DeviceAttr, StreamHandle, copy_host_strided};

use crate::driver::copy::{FlatCopy, RawCopies};
use crate::driver::runtime::{GpuRuntime, RuntimeSource};
use crate::driver::shared_ops::SharedOps;

/// The runtime's flat copies through one bound device.
struct BoundCopies<'a, R> {
    runtime: &'a R,
    device: Device,
}

impl<R: GpuRuntime> RawCopies for BoundCopies<'_, R> {
    unsafe fn copy(&self, copy: FlatCopy, stream: StreamHandle) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.runtime.copy(self.device, copy, stream) }
    }

    fn synchronize(&self, stream: StreamHandle) -> Result<()> {
        self.runtime.synchronize(self.device, stream)
    }
}

/// Devices with their own memory: allocation, copies with strides, streams, attributes.
#[derive(Debug)]
pub struct GpuDeviceApi<B: RuntimeSource> {
    backend: Arc<B>,
}

impl<B: RuntimeSource> GpuDeviceApi<B> {
    /// The device API over `backend`.
    pub fn new(backend: Arc<B>) -> GpuDeviceApi<B> {
        GpuDeviceApi { backend }
    }

    /// The backend behind it.
    pub fn backend(&self) -> &Arc<B> {
        &self.backend
    }

    fn runtime(&self) -> Result<&Arc<B::Runtime>> {
        self.backend.lazy().runtime()
    }
}

impl<B: RuntimeSource> DeviceApi for GpuDeviceApi<B> {
    fn name(&self) -> &str {
        B::Runtime::NAMES.name
    }

    fn attr(&self, device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
        if attr == DeviceAttr::Exist {
            let exists = self.backend.lazy().exists(device);
            return Ok(Some(Any::from(i64::from(exists))));
        }
        self.runtime()?.attr(device, attr)
    }

    fn unavailable_reason(&self, device: Device) -> Option<String> {
        self.backend.lazy().unavailable_reason(device)
    }

    fn alloc(
        &self,
        device: Device,
        nbytes: usize,
        alignment: usize,
        _dtype_hint: DataType,
    ) -> Result<*mut c_void> {
        let ptr = self.runtime()?.alloc_device(device, nbytes, alignment)?;
        Ok(ptr as *mut c_void)
    }

    unsafe fn free(&self, device: Device, ptr: *mut c_void) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.runtime()?.free_device(device, ptr as u64) }
    }

    unsafe fn copy(&self, from: &DLTensor, to: &DLTensor, stream: StreamHandle) -> Result<()> {
        let on_device = |t: &DLTensor| t.device.device_type == B::Runtime::NAMES.device_type;
        let runner = Device(if on_device(from) {
            from.device
        } else {
            to.device
        });
        let runtime = self.runtime()?;
        runtime.bind(runner)?;
        let copies = BoundCopies {
            runtime: &**runtime,
            device: runner,
        };
        // SAFETY: valid descriptors whose memory lives until the stream is synchronized (the
        // caller's contract); sides not on a device of this backend are host memory.
        unsafe {
            crate::driver::copy::copy_tensor(
                &copies,
                from,
                on_device(from),
                to,
                on_device(to),
                stream,
            )
        }
    }

    fn create_stream(&self, device: Device) -> Result<StreamHandle> {
        self.runtime()?.create_stream(device)
    }

    unsafe fn free_stream(&self, device: Device, stream: StreamHandle) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.runtime()?.destroy_stream(device, stream) }
    }

    fn sync_stream(&self, device: Device, stream: StreamHandle) -> Result<()> {
        self.runtime()?.synchronize(device, stream)
    }

    fn sync_stream_from_to(
        &self,
        device: Device,
        from: StreamHandle,
        to: StreamHandle,
    ) -> Result<()> {
        self.runtime()?.stream_wait(device, from, to)
    }
}

/// Page-locked host memory devices: the host reads and writes them directly and kernels can
/// reach them. Index `i` allocates through device `i` of the runtime.
#[derive(Debug)]
pub struct GpuHostDeviceApi<B: RuntimeSource> {
    backend: Arc<B>,
}

impl<B: RuntimeSource> GpuHostDeviceApi<B> {
    /// The device API over `backend`.
    pub fn new(backend: Arc<B>) -> GpuHostDeviceApi<B> {
        GpuHostDeviceApi { backend }
    }

    fn device_of(device: Device) -> Device {
        Device::new(B::Runtime::NAMES.device_type, device.device_id())
    }
}

impl<B: RuntimeSource> DeviceApi for GpuHostDeviceApi<B> {
    fn name(&self) -> &str {
        let names = B::Runtime::NAMES;
        names.host_name
    }

    fn attr(&self, device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
        match attr {
            DeviceAttr::Exist => {
                let exists = self.backend.lazy().exists(Self::device_of(device));
                Ok(Some(Any::from(i64::from(exists))))
            }
            DeviceAttr::DeviceName => Ok(Some(Any::from(B::Runtime::NAMES.host_name))),
            _ => Ok(None),
        }
    }

    fn unavailable_reason(&self, device: Device) -> Option<String> {
        self.backend
            .lazy()
            .unavailable_reason(Self::device_of(device))
    }

    fn alloc(
        &self,
        device: Device,
        nbytes: usize,
        alignment: usize,
        _dtype_hint: DataType,
    ) -> Result<*mut c_void> {
        self.backend
            .lazy()
            .runtime()?
            .alloc_host(Self::device_of(device), nbytes, alignment)
    }

    unsafe fn free(&self, _device: Device, ptr: *mut c_void) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.backend.lazy().runtime()?.free_host(ptr) }
    }

    unsafe fn copy(&self, from: &DLTensor, to: &DLTensor, _stream: StreamHandle) -> Result<()> {
        debug_assert!(
            [from, to]
                .iter()
                .all(|t| t.device.device_type != B::Runtime::NAMES.device_type
                    || t.device.device_type == kDLCPU)
        );
        // SAFETY: both sides are host memory holding their elements (the caller's contract).
        unsafe { copy_host_strided(from, to) };
        Ok(())
    }

    fn create_stream(&self, _device: Device) -> Result<StreamHandle> {
        Ok(StreamHandle::NULL)
    }

    unsafe fn free_stream(&self, _device: Device, _stream: StreamHandle) -> Result<()> {
        Ok(())
    }

    fn sync_stream(&self, _device: Device, _stream: StreamHandle) -> Result<()> {
        Ok(())
    }
}
