//! The half of the kit for backends whose tensors hold buffer handles (Vulkan, WebGPU): the
//! `data` of a tensor is the address of one of the backend's buffer objects, and every device
//! has one queue, the default stream.
//!
//! A backend implements [`BufferBackend`] (its devices, allocation, attributes, module
//! loaders), [`DeviceBuffer`] (host views of a buffer's bytes, writes, copies on the device)
//! and [`ShaderKernel`] (a launch); the kit gives it the rest, written once:
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
use std::sync::Arc;

use tvm_ffi::{Any, DataType, Device};
use tvm_runtime::device::DeviceAttr;

pub use device_api::BufferDeviceApi;
pub use error::{BackendError, BackendFailure, BackendResult};
pub use module::{ShaderKernel, ShaderModule};
pub use table::{BufferTable, DeviceSlots};

/// Where a buffer lives and how large it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The index of the device that holds it.
    pub device_index: usize,
    /// The identity of that device object (a device created again has another).
    pub device_id: u64,
    /// Usable bytes (what was asked for).
    pub size: u64,
}

/// What a copy does with host views of a buffer's bytes. A view holds the buffer's bytes from
/// offset `start` (at most the extent's start) on, and `f` gets `(view, start)`.
pub enum HostAccess<'a> {
    /// Reads bytes `extent`, after the work queued before.
    Read {
        /// The bytes to read.
        extent: Range<u64>,
        /// Reads the view.
        f: &'a mut dyn FnMut(*const u8, u64),
    },
    /// Stores what `f` leaves in a view of bytes `extent`, which holds the buffer's bytes first
    /// when `read_first` (otherwise `f` writes the whole extent).
    Update {
        /// The bytes to update.
        extent: Range<u64>,
        /// Whether the view holds the buffer's bytes before `f` runs.
        read_first: bool,
        /// Writes the view.
        f: &'a mut dyn FnMut(*mut u8, u64),
    },
    /// Writes `bytes` at `offset`, ordered after the work queued before and before later work.
    Write {
        /// Where the bytes go.
        offset: u64,
        /// The bytes.
        bytes: &'a [u8],
    },
}

/// One allocation of a buffer-handle backend.
pub trait DeviceBuffer: Send + Sync + Sized + 'static {
    /// How the backend's calls fail.
    type Failure: BackendFailure;

    /// Where it lives and how large it is.
    fn placement(&self) -> Placement;

    /// Does `access` (its extent checked by the caller).
    fn access(self: &Arc<Self>, access: HostAccess<'_>) -> BackendResult<(), Self::Failure>;

    /// Queues a copy of bytes `ranges[0]` of this buffer to `ranges[1]` of `dst` (same length,
    /// not empty, both buffers of one device); `Ok(false)` when the backend cannot take these
    /// ranges there (the copy then goes through the host).
    fn copy_to(
        self: &Arc<Self>,
        dst: &Arc<Self>,
        ranges: [&Range<u64>; 2],
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

    /// Its live allocations.
    fn buffers(&self) -> &BufferTable<Self::Buffer>;

    /// The names of the devices present, by index; an error naming what is missing when the
    /// backend cannot be loaded.
    fn device_names(&self) -> BackendResult<Vec<String>, Self::Failure>;

    /// The index of `device`, if such a device is present; otherwise an error naming the
    /// devices present, or what is missing.
    fn device_index(&self, device: Device) -> BackendResult<usize, Self::Failure> {
        let names = self.device_names()?;
        let (title, devices) = (Self::Failure::TITLE, Self::Failure::DEVICE_NAME);
        let names = names.iter().map(String::as_str);
        tvm_runtime::device::device_index(title, devices, device, names)
            .map_err(BackendError::unavailable)
    }

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
}
