//! The device API of `cuda` (device memory) and `cuda_host` (pinned host memory) devices.

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use tvm_ffi::abi::{self, DLTensor, kDLCUDA};
use tvm_ffi::{Any, DataType, Device, Result};
use tvm_runtime::device::{DeviceApi, DeviceAttr, StreamHandle, copy_host_strided};

use crate::context::{CudaBackend, CudaRuntime};
use crate::copy::DeviceCopies;
use crate::driver::version_text;

/// `CUdevice_attribute` numbers the attributes are read with.
mod attribute {
    pub const MAX_THREADS_PER_BLOCK: i32 = 1;
    pub const MAX_BLOCK_DIM_X: i32 = 2;
    pub const MAX_BLOCK_DIM_Y: i32 = 3;
    pub const MAX_BLOCK_DIM_Z: i32 = 4;
    pub const MAX_SHARED_MEMORY_PER_BLOCK: i32 = 8;
    pub const WARP_SIZE: i32 = 10;
    pub const MAX_REGISTERS_PER_BLOCK: i32 = 12;
    pub const CLOCK_RATE: i32 = 13;
    pub const MULTIPROCESSOR_COUNT: i32 = 16;
    pub const L2_CACHE_SIZE: i32 = 38;
    pub const COMPUTE_CAPABILITY_MAJOR: i32 = 75;
    pub const COMPUTE_CAPABILITY_MINOR: i32 = 76;
}

impl CudaRuntime {
    /// `cuDeviceGetAttribute`.
    pub fn device_attribute(&self, device: Device, attribute: i32) -> Result<i32> {
        self.check_device(device)?;
        let mut value = 0;
        // SAFETY: an out-parameter; the index was checked.
        let rc = unsafe {
            (self.driver.api.device_get_attribute)(&mut value, attribute, device.device_id())
        };
        self.driver
            .check(rc, &format!("reading attribute {attribute} of {device}"))?;
        Ok(value)
    }

    /// The device's name.
    pub fn device_name(&self, device: Device) -> Result<String> {
        self.check_device(device)?;
        let mut name = [0 as c_char; 256];
        // SAFETY: a buffer of the length given; the index was checked.
        let rc = unsafe {
            (self.driver.api.device_get_name)(name.as_mut_ptr(), 256, device.device_id())
        };
        self.driver
            .check(rc, &format!("reading the name of {device}"))?;
        name[255] = 0;
        // SAFETY: NUL-terminated (the last byte is forced to NUL).
        Ok(unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned())
    }

    /// Total bytes of memory of `device`.
    pub fn total_memory(&self, device: Device) -> Result<usize> {
        self.check_device(device)?;
        let mut bytes = 0;
        // SAFETY: an out-parameter; the index was checked.
        let rc = unsafe { (self.driver.api.device_total_mem)(&mut bytes, device.device_id()) };
        self.driver
            .check(rc, &format!("reading the memory size of {device}"))?;
        Ok(bytes)
    }

    /// An attribute of `device` (which exists), as the device API reports it.
    pub fn attr(&self, device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
        let int = |a| -> Result<Option<Any>> {
            Ok(Some(Any::from(i64::from(
                self.device_attribute(device, a)?,
            ))))
        };
        match attr {
            DeviceAttr::Exist => Ok(Some(Any::from(i64::from(
                self.check_device(device).is_ok(),
            )))),
            DeviceAttr::MaxThreadsPerBlock => int(attribute::MAX_THREADS_PER_BLOCK),
            DeviceAttr::WarpSize => int(attribute::WARP_SIZE),
            DeviceAttr::MaxSharedMemoryPerBlock => int(attribute::MAX_SHARED_MEMORY_PER_BLOCK),
            DeviceAttr::MaxClockRate => int(attribute::CLOCK_RATE),
            DeviceAttr::MultiProcessorCount => int(attribute::MULTIPROCESSOR_COUNT),
            DeviceAttr::MaxRegistersPerBlock => int(attribute::MAX_REGISTERS_PER_BLOCK),
            DeviceAttr::L2CacheSizeBytes => int(attribute::L2_CACHE_SIZE),
            DeviceAttr::ComputeVersion => {
                let major = self.device_attribute(device, attribute::COMPUTE_CAPABILITY_MAJOR)?;
                let minor = self.device_attribute(device, attribute::COMPUTE_CAPABILITY_MINOR)?;
                Ok(Some(Any::from(format!("{major}.{minor}"))))
            }
            DeviceAttr::MaxThreadDimensions => {
                let dims = [
                    attribute::MAX_BLOCK_DIM_X,
                    attribute::MAX_BLOCK_DIM_Y,
                    attribute::MAX_BLOCK_DIM_Z,
                ]
                .map(|a| self.device_attribute(device, a));
                let [x, y, z] = dims;
                Ok(Some(Any::from(format!("[{}, {}, {}]", x?, y?, z?))))
            }
            DeviceAttr::DeviceName => Ok(Some(Any::from(self.device_name(device)?))),
            DeviceAttr::ApiVersion => Ok(Some(Any::from(i64::from(self.driver.version)))),
            DeviceAttr::DriverVersion => Ok(Some(Any::from(version_text(self.driver.version)))),
            DeviceAttr::TotalGlobalMemory => Ok(Some(Any::from(self.total_memory(device)? as i64))),
            DeviceAttr::AvailableGlobalMemory => {
                Ok(Some(Any::from(self.memory_info(device)?.0 as i64)))
            }
            DeviceAttr::GcnArch | DeviceAttr::ImagePitchAlignment => Ok(None),
        }
    }
}

/// The `cuda` devices: memory from `cuMemAlloc`, copies and streams of the driver.
#[derive(Debug)]
pub struct CudaDeviceApi {
    backend: Arc<CudaBackend>,
}

impl CudaDeviceApi {
    /// The device API over `backend`.
    pub fn new(backend: Arc<CudaBackend>) -> CudaDeviceApi {
        CudaDeviceApi { backend }
    }

    fn runtime(&self) -> Result<&Arc<CudaRuntime>> {
        self.backend.runtime()
    }
}

impl DeviceApi for CudaDeviceApi {
    fn name(&self) -> &str {
        "cuda"
    }

    fn attr(&self, device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
        if attr == DeviceAttr::Exist {
            return Ok(Some(Any::from(i64::from(self.backend.exists(device)))));
        }
        self.runtime()?.attr(device, attr)
    }

    fn unavailable_reason(&self, device: Device) -> Option<String> {
        self.backend.unavailable_reason(device)
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
        let on_device = |t: &DLTensor| t.device.device_type == kDLCUDA;
        let runner = Device(if on_device(from) {
            from.device
        } else {
            to.device
        });
        let runtime = self.runtime()?;
        runtime.bind(runner)?;
        let copies = DeviceCopies {
            runtime,
            device: runner,
        };
        // SAFETY: valid descriptors whose memory lives until the stream is synchronized (the
        // caller's contract); sides not on a CUDA device are host memory.
        unsafe {
            device_common::copy::copy_tensor(
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

/// The `cuda_host` devices: page-locked host memory (`cuMemAllocHost`), which the host reads
/// and writes directly and kernels can reach. Index `i` allocates through the context of `cuda:i`.
#[derive(Debug)]
pub struct CudaHostDeviceApi {
    backend: Arc<CudaBackend>,
}

impl CudaHostDeviceApi {
    /// The device API over `backend`.
    pub fn new(backend: Arc<CudaBackend>) -> CudaHostDeviceApi {
        CudaHostDeviceApi { backend }
    }

    fn cuda(device: Device) -> Device {
        Device::new(kDLCUDA, device.device_id())
    }
}

impl DeviceApi for CudaHostDeviceApi {
    fn name(&self) -> &str {
        "cuda_host"
    }

    fn attr(&self, device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
        let cuda = Self::cuda(device);
        match attr {
            DeviceAttr::Exist => Ok(Some(Any::from(i64::from(self.backend.exists(cuda))))),
            DeviceAttr::DeviceName => Ok(Some(Any::from("cuda_host"))),
            _ => Ok(None),
        }
    }

    fn unavailable_reason(&self, device: Device) -> Option<String> {
        self.backend.unavailable_reason(Self::cuda(device))
    }

    fn alloc(
        &self,
        device: Device,
        nbytes: usize,
        alignment: usize,
        _dtype_hint: DataType,
    ) -> Result<*mut c_void> {
        self.backend
            .runtime()?
            .alloc_host(Self::cuda(device), nbytes, alignment)
    }

    unsafe fn free(&self, _device: Device, ptr: *mut c_void) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.backend.runtime()?.free_host(ptr) }
    }

    unsafe fn copy(&self, from: &DLTensor, to: &DLTensor, _stream: StreamHandle) -> Result<()> {
        debug_assert!(
            [from, to]
                .iter()
                .all(|t| matches!(t.device.device_type, abi::kDLCPU | abi::kDLCUDAHost))
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
