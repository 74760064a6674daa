//! The half of the kit for backends whose tensors hold buffer handles (Vulkan, WebGPU): the
//! `data` of a tensor is the address of one of the backend's buffer objects, and every device
//! has one queue, the default stream.
//!
//! A backend implements [`BufferBackend`] (its devices, allocation, attributes, module
//! loaders) and [`DeviceBuffer`] (host views of a buffer's bytes, writes, copies on the
//! device); the kit gives it the rest, written once:
//!
//! - [`BufferTable`] and [`DeviceSlots`]: live buffers by handle, devices by index;
//! - [`copy`]: the copy plan between host memory and buffers with any strides;
//! - [`BufferDeviceApi`]: the runtime's device API over the backend, default stream only;
//! - [`kernel`]: a kernel's metadata checked against the buffer convention (tensors first,
//!   then scalars), its tensor arguments bound to buffers, pipelines cached per device;
//! - [`ShaderModule`]: the module of a shader map (kernel name → code), its kernels built and
//!   checked against their shaders' entry points;
//! - [`BackendError`]: the backend's errors and their conversion into the runtime's.

pub mod copy;
mod device_api;
mod error;
pub mod kernel;
mod module;
mod table;

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use tvm_ffi::{Any, DataType, Device};
use tvm_runtime::Module;
use tvm_runtime::device::DeviceAttr;

pub use device_api::BufferDeviceApi;
pub use error::{BackendError, BackendFailure, BackendResult};
pub use module::{ShaderKernel, ShaderModule};
pub use table::{BufferTable, DeviceSlots};

/// One allocation of a buffer-handle backend.
pub trait DeviceBuffer: Send + Sync + Sized + 'static {
    /// How the backend's calls fail.
    type Failure: BackendFailure;

    /// The index of the device that holds it.
    fn device_index(&self) -> usize;

    /// Usable bytes (what was asked for).
    fn size(&self) -> u64;

    /// Whether `other` lives on the same device (the same device object, not only index).
    fn same_device(&self, other: &Self) -> bool;

    /// Runs `f` on a host view of bytes `extent` (checked by the caller), after the work queued
    /// before: `f(view, start)`, where `view` holds the buffer's bytes from offset `start`
    /// (at most `extent.start`) on.
    fn read_view<T>(
        self: &Arc<Self>,
        extent: &Range<u64>,
        f: impl FnOnce(*const u8, u64) -> T,
    ) -> BackendResult<T, Self::Failure>;

    /// Runs `f` on a writable host view of bytes `extent` as [`DeviceBuffer::read_view`] does,
    /// then stores what it left there in the buffer; the view holds the buffer's bytes first
    /// when `read_first` (otherwise `f` writes the whole extent).
    fn update_view<T>(
        self: &Arc<Self>,
        extent: &Range<u64>,
        read_first: bool,
        f: impl FnOnce(*mut u8, u64) -> T,
    ) -> BackendResult<T, Self::Failure>;

    /// Writes `bytes` at `offset`, ordered after the work queued before and before later work.
    fn write_bytes(self: &Arc<Self>, offset: u64, bytes: &[u8])
    -> BackendResult<(), Self::Failure>;

    /// Queues a copy of `src_extent` of `src` to `dst_extent` of `dst` (same length, both
    /// buffers of one device, not empty) on the device; `Ok(false)` when the backend cannot take
    /// these extents there (the copy then goes through the host).
    fn copy_on_device(
        src: &Arc<Self>,
        src_extent: &Range<u64>,
        dst: &Arc<Self>,
        dst_extent: &Range<u64>,
    ) -> BackendResult<bool, Self::Failure>;
}

/// A buffer-handle backend: what the kit cannot know about it.
pub trait BufferBackend: Send + Sync + Sized + 'static {
    /// How the backend's calls fail.
    type Failure: BackendFailure;
    /// Its allocations.
    type Buffer: DeviceBuffer<Failure = Self::Failure>;

    /// DLPack's device type of its devices.
    const DEVICE_TYPE: i32;
    /// The kind of its kernel modules (`ffi.Module.load_from_bytes.<kind>`).
    const MODULE_KIND: &'static str;
    /// The extension of its kernel files (`ffi.Module.load_from_file.<extension>`).
    const FILE_EXTENSION: &'static str;

    /// Its live allocations.
    fn buffers(&self) -> &BufferTable<Self::Buffer>;

    /// The names of the devices present, by index; an error naming what is missing when the
    /// backend cannot be loaded.
    fn device_names(&self) -> BackendResult<Vec<String>, Self::Failure>;

    /// The index of `device`, if such a device is present.
    fn device_index(&self, device: Device) -> BackendResult<usize, Self::Failure>;

    /// Attribute `attr` of `device` (present), `None` where the backend has no value.
    fn device_attr(
        &self,
        device: Device,
        attr: DeviceAttr,
    ) -> BackendResult<Option<Any>, Self::Failure>;

    /// A buffer of `nbytes` bytes on `device` for elements of `dtype_hint` (each allocation is
    /// a buffer of its own, whose offset 0 meets any alignment).
    fn allocate(
        &self,
        device: Device,
        nbytes: u64,
        dtype_hint: DataType,
    ) -> BackendResult<Arc<Self::Buffer>, Self::Failure>;

    /// What must happen before `buffer` is forgotten by the table.
    fn before_free(&self, buffer: &Self::Buffer) -> BackendResult<(), Self::Failure>;

    /// Waits for the work queued on `device` so far.
    fn synchronize(&self, device: Device) -> BackendResult<(), Self::Failure>;

    /// Loads the serialized form of a module (what `ffi.Module.load_from_bytes.<kind>`
    /// receives).
    fn module_from_bytes(self: Arc<Self>, bytes: &[u8]) -> tvm_ffi::Result<Module>;

    /// Loads a kernel file and its `.tvm_meta.json`.
    fn module_from_file(self: Arc<Self>, path: &Path) -> tvm_ffi::Result<Module>;
}
