//! `TVMBackendAllocWorkspace` / `TVMBackendFreeWorkspace`: scratch memory of compiled kernels.
//!
//! Each thread keeps its own pool, so the hot path takes no lock: a freed block waits in the
//! thread's free list and serves the next request of the same device and size class (sizes
//! round up to 64 bytes, and to 4 KiB past 4 KiB). Kernels free in the reverse order of
//! allocation, so both lists are searched from the end. A thread caches at most
//! [`CACHE_BYTES`] in at most [`CACHE_BLOCKS`] blocks and releases the rest. CPU memory comes
//! from the process allocator, aligned to [`ALIGNMENT`]; other devices' from their backend
//! through the device registry.

use std::alloc::Layout;
use std::cell::RefCell;
use std::ffi::c_void;

use tvm_ffi::{DataType, Device, Error, ErrorKind, Result};

use crate::device;

/// The alignment of every workspace block (a cache line; enough for any vector load).
pub const ALIGNMENT: usize = 64;
/// The bytes one thread keeps in freed blocks for reuse.
const CACHE_BYTES: usize = 64 << 20;
/// The freed blocks one thread keeps for reuse.
const CACHE_BLOCKS: usize = 32;
/// Requests above this many bytes round up to whole pages.
const PAGE: usize = 4096;

const DL_CPU: i32 = 1;

#[derive(Clone, Copy, Debug)]
struct Block {
    ptr: *mut c_void,
    device: Device,
    size: usize,
}

#[derive(Default)]
struct ThreadWorkspaces {
    live: Vec<Block>,
    free: Vec<Block>,
    free_bytes: usize,
}

impl Drop for ThreadWorkspaces {
    fn drop(&mut self) {
        for block in self.free.drain(..) {
            // Nothing to report to at thread exit; a backend that fails keeps its memory.
            let _ = release(block);
        }
    }
}

thread_local! {
    static WORKSPACES: RefCell<ThreadWorkspaces> = RefCell::new(ThreadWorkspaces::default());
}

fn same_device(a: Device, b: Device) -> bool {
    a.device_type() == b.device_type() && a.device_id() == b.device_id()
}

/// The size class of a request of `nbytes` (0 reserves the smallest block).
fn size_class(nbytes: u64) -> Result<usize> {
    let limit = isize::MAX as usize - PAGE;
    let nbytes = match usize::try_from(nbytes) {
        Ok(n) if n <= limit => n.max(1),
        _ => tvm_ffi::bail!(
            ErrorKind::MemoryError,
            "TVMBackendAllocWorkspace: {nbytes} bytes is more than any allocation can hold"
        ),
    };
    let granule = if nbytes > PAGE { PAGE } else { ALIGNMENT };
    Ok(nbytes.div_ceil(granule) * granule)
}

/// A workspace of `nbytes` on `device`, aligned to [`ALIGNMENT`].
pub fn alloc_workspace(device: Device, nbytes: u64, dtype_hint: DataType) -> Result<*mut c_void> {
    let size = size_class(nbytes)?;
    let reused = WORKSPACES
        .try_with(|cell| {
            let mut pool = cell.borrow_mut();
            let index = pool
                .free
                .iter()
                .rposition(|b| b.size == size && same_device(b.device, device))?;
            let block = pool.free.swap_remove(index);
            pool.free_bytes -= block.size;
            pool.live.push(block);
            Some(block.ptr)
        })
        .map_err(|_| thread_exiting("TVMBackendAllocWorkspace"))?;
    if let Some(ptr) = reused {
        return Ok(ptr);
    }
    let ptr = acquire(device, size, dtype_hint)?;
    let block = Block { ptr, device, size };
    let recorded = WORKSPACES.try_with(|cell| cell.borrow_mut().live.push(block));
    if recorded.is_err() {
        let _ = release(block);
        return Err(thread_exiting("TVMBackendAllocWorkspace"));
    }
    Ok(ptr)
}

/// Returns a block from [`alloc_workspace`] on the same thread to the thread's pool.
pub fn free_workspace(device: Device, ptr: *mut c_void) -> Result<()> {
    let outcome = WORKSPACES
        .try_with(|cell| {
            let mut pool = cell.borrow_mut();
            let Some(index) = pool.live.iter().rposition(|b| b.ptr == ptr) else {
                return Err(Error::new(
                    ErrorKind::ValueError,
                    format!(
                        "TVMBackendFreeWorkspace: {ptr:p} on {device} is not a workspace this \
                         thread allocated with TVMBackendAllocWorkspace (or it was freed already)"
                    ),
                ));
            };
            let block = pool.live[index];
            if !same_device(block.device, device) {
                return Err(Error::new(
                    ErrorKind::ValueError,
                    format!(
                        "TVMBackendFreeWorkspace: {ptr:p} was allocated on {}, not on {device}",
                        block.device
                    ),
                ));
            }
            pool.live.remove(index);
            if pool.free.len() < CACHE_BLOCKS && pool.free_bytes + block.size <= CACHE_BYTES {
                pool.free_bytes += block.size;
                pool.free.push(block);
                return Ok(None);
            }
            Ok(Some(block))
        })
        .map_err(|_| thread_exiting("TVMBackendFreeWorkspace"))??;
    match outcome {
        Some(block) => release(block),
        None => Ok(()),
    }
}

/// The number of workspace blocks the calling thread holds: (in use, cached for reuse).
pub fn thread_workspace_blocks() -> (usize, usize) {
    WORKSPACES
        .try_with(|cell| {
            let pool = cell.borrow();
            (pool.live.len(), pool.free.len())
        })
        .unwrap_or((0, 0))
}

fn thread_exiting(function: &str) -> Error {
    Error::new(
        ErrorKind::RuntimeError,
        format!("{function}: called while the thread's storage is being destroyed"),
    )
}

fn acquire(device: Device, size: usize, dtype_hint: DataType) -> Result<*mut c_void> {
    if device.device_type() == DL_CPU {
        let layout = Layout::from_size_align(size, ALIGNMENT).map_err(|e| {
            Error::new(
                ErrorKind::MemoryError,
                format!("TVMBackendAllocWorkspace: {size} bytes: {e}"),
            )
        })?;
        // SAFETY: `layout` has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            tvm_ffi::bail!(
                ErrorKind::MemoryError,
                "TVMBackendAllocWorkspace: out of memory allocating {size} bytes on {device}"
            );
        }
        return Ok(ptr.cast());
    }
    device::alloc_workspace(device, size, dtype_hint)
}

fn release(block: Block) -> Result<()> {
    if block.device.device_type() == DL_CPU {
        let layout = Layout::from_size_align(block.size, ALIGNMENT).expect("checked at allocation");
        // SAFETY: the block came from `std::alloc::alloc` with this layout and is freed once.
        unsafe { std::alloc::dealloc(block.ptr.cast(), layout) };
        return Ok(());
    }
    // SAFETY: the block came from this backend's `alloc_workspace` and is freed once.
    unsafe { device::free_workspace(block.device, block.ptr) }
}
