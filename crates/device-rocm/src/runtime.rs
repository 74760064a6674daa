//! HIP as the backend's [`GpuRuntime`]: devices bound per thread with `hipSetDevice`, memory
//! and copies.

use std::ffi::c_void;

use device_kit::driver::DriverLibrary;
use device_kit::driver::copy::FlatCopy;
use device_kit::driver::runtime::{
    GpuRuntime, RuntimeNames, VendorErrors, check_alignment, check_device_index,
};
use device_kit::driver::shared_calls::SharedCalls;
use tvm_ffi::abi::kDLROCM;
use tvm_ffi::{Any, Device, Result};
use tvm_runtime::device::{DeviceAttr, StreamHandle};

use crate::hip::{HIP_SUCCESS, HipLibrary, RUNTIME_NAMES, copy_kind};

/// The alignment of every HIP allocation.
pub const HIP_ALIGNMENT: usize = 256;
/// `hipHostMallocDefault`.
const HOST_MALLOC_DEFAULT: u32 = 0;

/// The loaded HIP runtime.
#[derive(Debug)]
pub struct HipRuntime {
    /// The library, its entry points and what was learned when it loaded.
    pub hip: HipLibrary,
}

impl HipRuntime {
    /// The device HIP has current on the calling thread.
    #[inline]
    pub fn current_device(&self) -> Option<i32> {
        let mut id = -1;
        // SAFETY: an out-parameter.
        let rc = unsafe { (self.hip.api.get_device)(&mut id) };
        (rc == HIP_SUCCESS && (0..self.hip.device_count).contains(&id)).then_some(id)
    }

    /// Makes `device` (a checked index) current on the calling thread.
    #[inline]
    fn set_device(&self, device: Device) -> Result<()> {
        // SAFETY: an index checked against the device count.
        let rc = unsafe { (self.hip.api.set_device)(device.device_id()) };
        if rc == HIP_SUCCESS {
            // Every launch binds: the message is formatted only on failure.
            return Ok(());
        }
        Err(self
            .hip
            .error(rc, &format!("making {device} current (hipSetDevice)")))
    }

    /// The device a kernel launch runs on, made current on the calling thread: `tensors_on`
    /// (the device of the call's tensors) when given, else HIP's current device. `hipSetDevice`
    /// is called only when the device is not current already, so a launch costs one runtime
    /// call besides the launch itself.
    #[inline]
    pub fn launch_device(&self, tensors_on: Option<Device>) -> Result<Device> {
        let current = self.current_device();
        let device = tensors_on.unwrap_or_else(|| Device::new(kDLROCM, current.unwrap_or(0)));
        self.check_device(device)?;
        if current != Some(device.device_id()) {
            self.set_device(device)?;
        }
        Ok(device)
    }

    /// Queues `len` bytes from `src` to `dst` on `stream` (`hipMemcpyAsync` of `kind`).
    ///
    /// # Safety
    /// Both ranges are valid for `len` bytes, of the memory `kind` says, until the copy is done.
    unsafe fn memcpy(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        len: usize,
        kind: i32,
        stream: StreamHandle,
        what: impl FnOnce() -> String,
    ) -> Result<()> {
        // SAFETY: guaranteed by the caller.
        let rc = unsafe { (self.hip.api.memcpy_async)(dst, src, len, kind, stream.0) };
        self.hip.check(rc, &what())
    }
}

fn address(ptr: u64) -> *mut c_void {
    ptr as usize as *mut c_void
}

impl GpuRuntime for HipRuntime {
    const NAMES: RuntimeNames = RUNTIME_NAMES;

    fn load(library: DriverLibrary) -> std::result::Result<HipRuntime, String> {
        Ok(HipRuntime {
            hip: HipLibrary::load(library)?,
        })
    }

    fn calls(&self) -> &SharedCalls {
        &self.hip.calls
    }

    fn check(&self, rc: i32, what: &str) -> Result<()> {
        self.hip.check(rc, what)
    }

    #[inline]
    fn check_device(&self, device: Device) -> Result<()> {
        check_device_index(
            "HIP runtime",
            device,
            self.hip.device_count,
            self.hip.no_device_reason.as_deref(),
        )
    }

    fn bind(&self, device: Device) -> Result<()> {
        self.check_device(device)?;
        self.set_device(device)
    }

    #[inline]
    fn launch_device(&self, tensors_on: Option<Device>) -> Result<Device> {
        HipRuntime::launch_device(self, tensors_on)
    }

    fn attr(&self, device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
        HipRuntime::attr(self, device, attr)
    }

    fn alloc_device(&self, device: Device, nbytes: usize, alignment: usize) -> Result<u64> {
        check_alignment("HIP", HIP_ALIGNMENT, alignment)?;
        self.bind(device)?;
        let mut ptr = std::ptr::null_mut();
        // SAFETY: an out-parameter; `device` is current.
        let rc = unsafe { (self.hip.api.malloc)(&mut ptr, nbytes.max(1)) };
        self.hip
            .check(rc, &format!("allocating {nbytes} bytes on {device}"))?;
        Ok(ptr as u64)
    }

    unsafe fn free_device(&self, device: Device, ptr: u64) -> Result<()> {
        self.bind(device)?;
        // SAFETY: memory from hipMalloc, freed once (the caller's contract).
        let rc = unsafe { (self.hip.api.free)(address(ptr)) };
        self.hip.check(rc, &format!("freeing {ptr:#x} on {device}"))
    }

    fn alloc_host(&self, device: Device, nbytes: usize, alignment: usize) -> Result<*mut c_void> {
        check_alignment("HIP", HIP_ALIGNMENT, alignment)?;
        self.bind(device)?;
        let mut ptr = std::ptr::null_mut();
        // SAFETY: an out-parameter.
        let rc =
            unsafe { (self.hip.api.host_malloc)(&mut ptr, nbytes.max(1), HOST_MALLOC_DEFAULT) };
        self.hip.check(
            rc,
            &format!("allocating {nbytes} bytes of pinned host memory"),
        )?;
        Ok(ptr)
    }

    unsafe fn free_host(&self, ptr: *mut c_void) -> Result<()> {
        // SAFETY: memory from hipHostMalloc, freed once (the caller's contract).
        let rc = unsafe { (self.hip.api.host_free)(ptr) };
        self.hip
            .check(rc, &format!("freeing pinned host memory {ptr:p}"))
    }

    unsafe fn copy(&self, device: Device, copy: FlatCopy, stream: StreamHandle) -> Result<()> {
        let (dst, src, len, kind) = match copy {
            FlatCopy::HostToDevice { dst, src, len } => {
                (address(dst), src.cast(), len, copy_kind::HOST_TO_DEVICE)
            }
            FlatCopy::DeviceToHost { dst, src, len } => (
                dst.cast(),
                address(src).cast_const(),
                len,
                copy_kind::DEVICE_TO_HOST,
            ),
            FlatCopy::DeviceToDevice { dst, src, len } => (
                address(dst),
                address(src).cast_const(),
                len,
                copy_kind::DEVICE_TO_DEVICE,
            ),
        };
        // SAFETY: forwarded from the caller; `device` is bound.
        unsafe { self.memcpy(dst, src, len, kind, stream, || copy.describe(device)) }
    }
}

device_kit::driver_backend!(RocmBackend, HipRuntime, "ROCm");
