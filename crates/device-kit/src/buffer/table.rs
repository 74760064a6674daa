//! The live allocations of a buffer-handle backend by handle: the `data` of its tensors is the
//! address of a buffer object of the backend, which this table keeps alive until it is freed.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::{BackendError, BackendResult, DeviceBuffer};

/// Live buffers by handle (the address of the buffer object).
pub struct BufferTable<B> {
    buffers: Mutex<HashMap<usize, Arc<B>>>,
}

impl<B> Default for BufferTable<B> {
    fn default() -> Self {
        BufferTable {
            buffers: Mutex::default(),
        }
    }
}

impl<B: DeviceBuffer> BufferTable<B> {
    fn lock(&self) -> MutexGuard<'_, HashMap<usize, Arc<B>>> {
        self.buffers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `buffer` and returns its handle.
    pub fn insert(&self, buffer: Arc<B>) -> *mut c_void {
        let handle = Arc::as_ptr(&buffer) as *mut c_void;
        self.lock().insert(handle as usize, buffer);
        handle
    }

    /// Forgets the buffer of `handle` (it is destroyed once nothing else holds it).
    pub fn remove(&self, handle: *mut c_void) {
        self.lock().remove(&(handle as usize));
    }

    /// The live buffer whose handle is `data`, on device `device_id`; a `ValueError` otherwise.
    pub fn get(&self, data: *mut c_void, device_id: i32) -> BackendResult<Arc<B>, B::Failure> {
        let title = <B::Failure as super::BackendFailure>::TITLE;
        let devices = <B::Failure as super::BackendFailure>::DEVICE_NAME;
        let buffer = self.lock().get(&(data as usize)).cloned();
        match buffer {
            Some(b) if b.placement().device_index as i32 == device_id => Ok(b),
            Some(b) => Err(BackendError::invalid(format!(
                "{title} buffer {data:p} belongs to {devices}:{}, not {devices}:{device_id}",
                b.placement().device_index
            ))),
            None => Err(BackendError::invalid(format!(
                "{data:p} is not a live {title} buffer (freed, or memory of another device)"
            ))),
        }
    }

    /// The live buffer whose handle is `data`, on whichever device holds it.
    pub fn get_anywhere(&self, data: *mut c_void) -> BackendResult<Arc<B>, B::Failure> {
        let title = <B::Failure as super::BackendFailure>::TITLE;
        self.lock()
            .get(&(data as usize))
            .cloned()
            .ok_or_else(|| BackendError::invalid(format!("{data:p} is not a live {title} buffer")))
    }
}

/// A backend's devices by index, each created on first use and created again after it was
/// lost (the memory of a lost one stays unusable).
pub struct DeviceSlots<D> {
    devices: Mutex<HashMap<usize, Arc<D>>>,
}

impl<D> Default for DeviceSlots<D> {
    fn default() -> Self {
        DeviceSlots {
            devices: Mutex::default(),
        }
    }
}

impl<D> DeviceSlots<D> {
    fn lock(&self) -> MutexGuard<'_, HashMap<usize, Arc<D>>> {
        self.devices.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The device of `index` unless `is_lost` says it was lost; otherwise one `create` makes.
    pub fn get_or_create<E>(
        &self,
        index: usize,
        is_lost: impl Fn(&D) -> bool,
        create: impl FnOnce() -> Result<D, E>,
    ) -> Result<Arc<D>, E> {
        let mut devices = self.lock();
        if let Some(d) = devices.get(&index).filter(|d| !is_lost(d)) {
            return Ok(Arc::clone(d));
        }
        let created = Arc::new(create()?);
        devices.insert(index, Arc::clone(&created));
        Ok(created)
    }

    /// Forgets the device of `index`, returning it.
    pub fn remove(&self, index: usize) -> Option<Arc<D>> {
        self.lock().remove(&index)
    }

    /// Every device created so far.
    pub fn all(&self) -> Vec<Arc<D>> {
        self.lock().values().cloned().collect()
    }
}
