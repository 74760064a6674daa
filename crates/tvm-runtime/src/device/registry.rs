//! The registry of device backends, keyed by DLPack device type, and the checked operations
//! everything else calls: allocation, copies, streams and attributes.

use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;
use std::sync::{Arc, LazyLock, Mutex, PoisonError, RwLock};

use tvm_ffi::abi::{DLTensor, TVMFFIEnvGetStream, TVMFFIEnvSetStream, kDLCPU};
use tvm_ffi::{Any, DataType, Device, Error, ErrorKind, Result};

use super::host_copy::{check_copy_shapes, tensor_nbytes};
use super::{DeviceApi, DeviceAttr, StreamHandle, TENSOR_ALIGNMENT, cpu::CpuDeviceApi};

type Backends = BTreeMap<i32, Arc<dyn DeviceApi>>;

/// The backends; the CPU one is always present.
static BACKENDS: LazyLock<RwLock<Backends>> = LazyLock::new(|| {
    let mut backends: Backends = BTreeMap::new();
    backends.insert(kDLCPU, Arc::new(CpuDeviceApi));
    RwLock::new(backends)
});

/// The device each stream created through the registry belongs to (by address), so that a
/// stream handed to another device is refused.
static STREAM_OWNERS: LazyLock<Mutex<HashMap<usize, Device>>> = LazyLock::new(Default::default);

fn device_type_text(device_type: i32) -> String {
    let name = tvm_ffi::device::device_type_name(device_type).unwrap_or("unknown");
    format!("{name} ({device_type})")
}

/// Registers the backend of one device type. A second backend for the same type is a
/// `ValueError` naming the type and the backend already there.
pub fn register_device_api(device_type: i32, api: Arc<dyn DeviceApi>) -> Result<()> {
    let mut backends = BACKENDS.write().unwrap_or_else(PoisonError::into_inner);
    if let Some(existing) = backends.get(&device_type) {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "a device backend for {} is already registered ('{}'); cannot register '{}'",
            device_type_text(device_type),
            existing.name(),
            api.name()
        );
    }
    backends.insert(device_type, api);
    Ok(())
}

/// The device types that have a backend, in increasing order.
pub fn registered_device_types() -> Vec<i32> {
    let backends = BACKENDS.read().unwrap_or_else(PoisonError::into_inner);
    backends.keys().copied().collect()
}

/// Device types at or above this belong to RPC sessions (`type + 128 * (session + 1)`); the
/// backend registered for exactly this type serves all of them.
pub const RPC_SESSION_DEVICE_TYPES: i32 = 128;

/// The backend of `device`'s type; a `ValueError` naming the device when none is registered.
/// Types from [`RPC_SESSION_DEVICE_TYPES`] up go to the backend registered for that type.
pub fn device_api(device: Device) -> Result<Arc<dyn DeviceApi>> {
    let backends = BACKENDS.read().unwrap_or_else(PoisonError::into_inner);
    let key = if device.device_type() >= RPC_SESSION_DEVICE_TYPES {
        RPC_SESSION_DEVICE_TYPES
    } else {
        device.device_type()
    };
    if let Some(api) = backends.get(&key) {
        return Ok(Arc::clone(api));
    }
    let known: Vec<String> = backends.keys().map(|t| device_type_text(*t)).collect();
    Err(Error::new(
        ErrorKind::ValueError,
        format!(
            "no device backend is registered for {device} (device type {}); registered: {}",
            device_type_text(device.device_type()),
            known.join(", ")
        ),
    ))
}

fn attr_is_true(value: Option<Any>) -> bool {
    value
        .and_then(|v| v.try_as::<i64>())
        .is_some_and(|v| v != 0)
}

/// The backend of a device that exists; a `ValueError` naming the device otherwise.
fn existing(device: Device) -> Result<Arc<dyn DeviceApi>> {
    let api = device_api(device)?;
    if device.device_id() < 0 || !attr_is_true(api.attr(device, DeviceAttr::Exist)?) {
        let reason = api
            .unavailable_reason(device)
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "device {device} does not exist (backend '{}'){reason}",
            api.name()
        );
    }
    Ok(api)
}

/// Whether `device` has a backend that reports it present.
pub fn device_exists(device: Device) -> bool {
    device.device_id() >= 0
        && device_api(device)
            .and_then(|api| api.attr(device, DeviceAttr::Exist))
            .is_ok_and(attr_is_true)
}

/// An attribute of `device` (`None` when its backend does not know it). Asking whether a device
/// exists never fails for a registered type; every other attribute needs the device to exist.
pub fn device_attr(device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
    if attr == DeviceAttr::Exist {
        return Ok(Some(Any::from(i64::from(device_exists(device)))));
    }
    existing(device)?.attr(device, attr)
}

fn check_alignment(alignment: usize) -> Result<()> {
    if !alignment.is_power_of_two() {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "alignment must be a power of two, got {alignment}"
        );
    }
    Ok(())
}

/// Allocates `nbytes` on `device`, aligned to `alignment` (a power of two).
pub fn alloc_data(
    device: Device,
    nbytes: usize,
    alignment: usize,
    dtype_hint: DataType,
) -> Result<*mut c_void> {
    check_alignment(alignment)?;
    existing(device)?.alloc(device, nbytes, alignment, dtype_hint)
}

/// Frees memory from [`alloc_data`].
///
/// # Safety
/// `ptr` came from [`alloc_data`] on `device` and is freed once.
pub unsafe fn free_data(device: Device, ptr: *mut c_void) -> Result<()> {
    // SAFETY: forwarded from the caller.
    unsafe { device_api(device)?.free(device, ptr) }
}

/// Scratch memory for a kernel on `device` (the backend's [`DeviceApi::alloc_workspace`]).
pub fn alloc_workspace(device: Device, nbytes: usize, dtype_hint: DataType) -> Result<*mut c_void> {
    existing(device)?.alloc_workspace(device, nbytes, dtype_hint)
}

/// Frees memory from [`alloc_workspace`].
///
/// # Safety
/// `ptr` came from [`alloc_workspace`] on `device` and is freed once.
pub unsafe fn free_workspace(device: Device, ptr: *mut c_void) -> Result<()> {
    // SAFETY: forwarded from the caller.
    unsafe { device_api(device)?.free_workspace(device, ptr) }
}

/// Refuses a stream that the registry created for another device.
fn check_stream(device: Device, stream: StreamHandle) -> Result<()> {
    if stream.is_null() {
        return Ok(());
    }
    let owners = STREAM_OWNERS.lock().unwrap_or_else(PoisonError::into_inner);
    match owners.get(&(stream.0 as usize)) {
        Some(owner) if *owner != device => Err(Error::new(
            ErrorKind::ValueError,
            format!(
                "stream {:p} belongs to device {owner}, not {device}",
                stream.0
            ),
        )),
        _ => Ok(()),
    }
}

/// A new stream on `device`.
pub fn create_stream(device: Device) -> Result<StreamHandle> {
    let stream = existing(device)?.create_stream(device)?;
    if !stream.is_null() {
        let mut owners = STREAM_OWNERS.lock().unwrap_or_else(PoisonError::into_inner);
        owners.insert(stream.0 as usize, device);
    }
    Ok(stream)
}

/// Frees a stream from [`create_stream`]; it stops being the calling thread's current stream.
///
/// # Safety
/// `stream` came from [`create_stream`] on `device` and is not used after this.
pub unsafe fn free_stream(device: Device, stream: StreamHandle) -> Result<()> {
    if stream.is_null() {
        return Ok(());
    }
    check_stream(device, stream)?;
    let api = device_api(device)?;
    // SAFETY: forwarded from the caller.
    unsafe { api.free_stream(device, stream)? };
    STREAM_OWNERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&(stream.0 as usize));
    if current_stream(device) == stream {
        set_current_stream(device, StreamHandle::NULL)?;
    }
    Ok(())
}

/// The calling thread's current stream for `device` (NULL: the default stream).
pub fn current_stream(device: Device) -> StreamHandle {
    // SAFETY: reads the calling thread's stream table.
    StreamHandle(unsafe { TVMFFIEnvGetStream(device.device_type(), device.device_id()) })
}

/// Makes `stream` the calling thread's current stream for `device`; returns the previous one.
pub fn set_current_stream(device: Device, stream: StreamHandle) -> Result<StreamHandle> {
    check_stream(device, stream)?;
    if !stream.is_null() {
        // A device type without a backend keeps accepting streams: the stream table also
        // serves libraries (a framework's kernels) that bring their own device code.
        if let Ok(api) = device_api(device) {
            api.check_raw_stream(device, stream)?;
        }
    }
    let mut previous = std::ptr::null_mut();
    // SAFETY: `previous` is valid for writes.
    let rc = unsafe {
        TVMFFIEnvSetStream(
            device.device_type(),
            device.device_id(),
            stream.0,
            &mut previous,
        )
    };
    if rc != 0 {
        return Err(Error::take_raised_or(
            ErrorKind::RuntimeError,
            format!("setting the stream of {device}"),
        ));
    }
    Ok(StreamHandle(previous))
}

/// Waits for the work queued on `stream` of `device`; `None` means the calling thread's current
/// stream.
pub fn sync_stream(device: Device, stream: Option<StreamHandle>) -> Result<()> {
    let stream = stream.unwrap_or_else(|| current_stream(device));
    check_stream(device, stream)?;
    existing(device)?.sync_stream(device, stream)
}

/// Makes the work queued on `to` from now on wait for the work queued on `from` so far, both
/// streams of `device` (`None` for `from`: the calling thread's current stream).
pub fn sync_stream_from_to(
    device: Device,
    from: Option<StreamHandle>,
    to: StreamHandle,
) -> Result<()> {
    let from = from.unwrap_or_else(|| current_stream(device));
    check_stream(device, from)?;
    check_stream(device, to)?;
    let api = existing(device)?;
    if from == to {
        return Ok(());
    }
    api.sync_stream_from_to(device, from, to)
}

/// Copies `from` into `to` (same shape and dtype; any devices, strides and byte offsets) on
/// `stream` (`None`: the current stream of the device side), then waits for it when `sync`.
/// Between two kinds of device the data passes through host memory, synchronously.
///
/// # Safety
/// Both descriptors are valid, and their memory stays valid until the copy is done (at once
/// when `sync`; otherwise when the stream is synchronized).
pub unsafe fn copy_tensor(
    from: &DLTensor,
    to: &DLTensor,
    stream: Option<StreamHandle>,
    sync: bool,
) -> Result<()> {
    // SAFETY: guaranteed by the caller.
    if unsafe { check_copy_shapes(from, to)? } == 0 {
        return Ok(());
    }
    let (from_device, to_device) = (Device(from.device), Device(to.device));
    let on_host = |d: Device| d.device_type() == kDLCPU;
    // The device that runs the copy: the non-CPU side (the source when both are devices).
    let runner = if on_host(from_device) {
        to_device
    } else {
        from_device
    };
    if !on_host(from_device) && !on_host(to_device) {
        existing(to_device)?;
        if from_device.device_type() != to_device.device_type() {
            // SAFETY: guaranteed by the caller.
            return unsafe { copy_through_host(from, to) };
        }
    }
    let api = existing(runner)?;
    if on_host(from_device) && on_host(to_device) {
        existing(from_device)?;
    }
    let stream = stream.unwrap_or_else(|| current_stream(runner));
    check_stream(runner, stream)?;
    // SAFETY: guaranteed by the caller; shapes and dtypes were checked.
    unsafe { api.copy(from, to, stream)? };
    if sync {
        api.sync_stream(runner, stream)?;
    }
    Ok(())
}

/// A copy between two kinds of device: into a compact host buffer, then out of it, each
/// synchronized on the current stream of its device.
///
/// # Safety
/// As for [`copy_tensor`].
unsafe fn copy_through_host(from: &DLTensor, to: &DLTensor) -> Result<()> {
    // SAFETY: guaranteed by the caller.
    let nbytes = unsafe { tensor_nbytes(from)? };
    let host = HostBuffer::new(nbytes)?;
    let staged = DLTensor {
        data: host.ptr,
        device: Device::cpu(0).0,
        strides: std::ptr::null_mut(),
        byte_offset: 0,
        ..*from
    };
    // SAFETY: the staging buffer holds the compact elements and outlives both synchronous copies.
    unsafe {
        copy_tensor(from, &staged, None, true)?;
        copy_tensor(&staged, to, None, true)
    }
}

/// Host memory from the CPU backend, freed on drop.
struct HostBuffer {
    ptr: *mut c_void,
}

impl HostBuffer {
    fn new(nbytes: usize) -> Result<HostBuffer> {
        let ptr =
            CpuDeviceApi.alloc(Device::cpu(0), nbytes, TENSOR_ALIGNMENT, DataType::uint(8))?;
        Ok(HostBuffer { ptr })
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated by the CPU backend in `new`, freed once.
        let _ = unsafe { CpuDeviceApi.free(Device::cpu(0), self.ptr) };
    }
}
