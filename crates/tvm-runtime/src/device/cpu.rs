//! The host CPU: aligned heap memory, synchronous copies, no streams.

use std::ffi::c_void;

use tvm_ffi::abi::DLTensor;
use tvm_ffi::{Any, DataType, Device, Error, ErrorKind, Result};

use super::host_copy::copy_host_strided;
use super::{DeviceApi, DeviceAttr, StreamHandle};

/// The CPU backend (device type `kDLCPU`); one device, index 0.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuDeviceApi;

/// A transparent huge page of x86-64 and most arm64 kernels; allocations from this size up are
/// aligned to it and advised to use huge pages.
const HUGE_PAGE: usize = 2 << 20;

/// The smallest page size of the platforms served (madvise ranges are counted in pages).
const PAGE: usize = 4096;

/// Total and available physical memory, in bytes, from `sysconf`.
fn physical_memory(pages: libc::c_int) -> Option<i64> {
    // SAFETY: sysconf has no preconditions.
    let (count, size) = unsafe { (libc::sysconf(pages), libc::sysconf(libc::_SC_PAGESIZE)) };
    (count > 0 && size > 0).then(|| count.saturating_mul(size))
}

impl DeviceApi for CpuDeviceApi {
    fn name(&self) -> &str {
        "cpu"
    }

    fn attr(&self, device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
        Ok(match attr {
            DeviceAttr::Exist => Some(Any::from(i64::from(device.device_id() == 0))),
            DeviceAttr::DeviceName => Some(Any::from("cpu")),
            DeviceAttr::MultiProcessorCount => std::thread::available_parallelism()
                .ok()
                .map(|n| Any::from(n.get() as i64)),
            DeviceAttr::TotalGlobalMemory => physical_memory(libc::_SC_PHYS_PAGES).map(Any::from),
            DeviceAttr::AvailableGlobalMemory => {
                physical_memory(libc::_SC_AVPHYS_PAGES).map(Any::from)
            }
            _ => None,
        })
    }

    fn alloc(
        &self,
        _device: Device,
        nbytes: usize,
        alignment: usize,
        _dtype_hint: DataType,
    ) -> Result<*mut c_void> {
        let large = nbytes >= HUGE_PAGE;
        let alignment = alignment
            .max(std::mem::size_of::<*mut c_void>())
            .max(if large { HUGE_PAGE } else { 1 });
        let mut ptr = std::ptr::null_mut();
        // SAFETY: posix_memalign with a power-of-two multiple of the pointer size.
        if unsafe { libc::posix_memalign(&mut ptr, alignment, nbytes.max(1)) } != 0 {
            return Err(Error::new(
                ErrorKind::MemoryError,
                format!("cannot allocate {nbytes} bytes of host memory"),
            ));
        }
        if large {
            // Tensors this large are filled by streams of bytes (a copy, a socket): backing them
            // with transparent huge pages makes filling fresh memory take 512x fewer page faults.
            // The advice is a hint: a kernel without it (or with THP off) keeps small pages.
            let whole_pages = nbytes & !(PAGE - 1);
            // SAFETY: `ptr` is page-aligned (HUGE_PAGE-aligned) and the allocation covers
            // `whole_pages` bytes from it; the advice changes no contents.
            unsafe { libc::madvise(ptr, whole_pages, libc::MADV_HUGEPAGE) };
        }
        Ok(ptr)
    }

    unsafe fn free(&self, _device: Device, ptr: *mut c_void) -> Result<()> {
        // SAFETY: `ptr` came from posix_memalign and is freed once (the caller's contract).
        unsafe { libc::free(ptr) };
        Ok(())
    }

    unsafe fn copy(&self, from: &DLTensor, to: &DLTensor, _stream: StreamHandle) -> Result<()> {
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
