//! What a serving session has handed out: object handles and the memory a peer may touch.
//!
//! A peer names objects and memory by number. Nothing it sends is dereferenced unless it names
//! something this table recorded: an unknown handle or an address outside every recorded region
//! is an error, never a wild access. Dropping the table releases everything a closed session
//! still held.

use std::collections::{BTreeMap, HashMap};

use tvm_ffi::abi::DLDevice;
use tvm_ffi::{Any, ErrorKind, Result};

/// A range of memory on one device that the peer may read and write.
#[derive(Clone, Copy, Debug)]
struct Region {
    device: DLDevice,
    len: u64,
    /// The object handle that keeps the memory alive, or 0 for a peer allocation.
    owner: u64,
}

/// Objects and memory regions handed to the peer.
#[derive(Default)]
pub(super) struct HandleTable {
    next_handle: u64,
    objects: HashMap<u64, Any>,
    /// Regions by start address (several may start at one address).
    regions: BTreeMap<(u64, u64), Region>,
    next_region: u64,
    /// Peer allocations: address → device.
    allocations: HashMap<u64, DLDevice>,
}

impl HandleTable {
    /// Records `value` and returns its new handle (never 0).
    pub(super) fn insert(&mut self, value: Any) -> u64 {
        self.next_handle += 1;
        // Handles look like aligned addresses, as Apache TVM's do, but are only numbers.
        let handle = self.next_handle << 4;
        self.objects.insert(handle, value);
        handle
    }

    /// The object behind `handle`.
    pub(super) fn get(&self, handle: u64) -> Result<Any> {
        self.objects.get(&handle).cloned().ok_or_else(|| {
            tvm_ffi::Error::new(
                ErrorKind::ValueError,
                format!("unknown remote handle {handle:#x} (freed, or never handed out)"),
            )
        })
    }

    /// Forgets `handle` and the regions it kept alive; returns the object to drop.
    pub(super) fn remove(&mut self, handle: u64) -> Result<Any> {
        let value = self.objects.remove(&handle).ok_or_else(|| {
            tvm_ffi::Error::new(
                ErrorKind::ValueError,
                format!("cannot free unknown remote handle {handle:#x}"),
            )
        })?;
        self.regions.retain(|_, region| region.owner != handle);
        Ok(value)
    }

    /// Lets the peer touch `len` bytes at `start` on `device`, while `owner` lives (0: until
    /// [`HandleTable::remove_allocation`]).
    pub(super) fn add_region(&mut self, start: u64, len: u64, device: DLDevice, owner: u64) {
        self.next_region += 1;
        self.regions
            .insert((start, self.next_region), Region { device, len, owner });
    }

    /// Records a peer allocation.
    pub(super) fn add_allocation(&mut self, start: u64, len: u64, device: DLDevice) {
        self.allocations.insert(start, device);
        self.add_region(start, len, device, 0);
    }

    /// Forgets a peer allocation and returns its length; an error unless `start` is one on
    /// `device`.
    pub(super) fn remove_allocation(&mut self, start: u64, device: DLDevice) -> Result<u64> {
        if self.allocations.get(&start) != Some(&device) {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "cannot free {start:#x} on device ({}, {}): not memory this session allocated",
                device.device_type,
                device.device_id
            );
        }
        self.allocations.remove(&start);
        let mut len = 0;
        self.regions.retain(|(at, _), region| {
            let own = *at == start && region.owner == 0;
            if own {
                len = region.len;
            }
            !own
        });
        Ok(len)
    }

    /// Every live peer allocation, for release when the session ends.
    pub(super) fn take_allocations(&mut self) -> Vec<(u64, DLDevice)> {
        self.regions.clear();
        self.allocations.drain().collect()
    }

    /// Every live object, for release when the session ends.
    pub(super) fn take_objects(&mut self) -> Vec<Any> {
        self.objects.drain().map(|(_, value)| value).collect()
    }

    /// Number of live object handles.
    pub(super) fn live_objects(&self) -> usize {
        self.objects.len()
    }

    /// Checks that `len` bytes at `start` on `device` lie in one recorded region.
    pub(super) fn check_access(&self, start: u64, len: u64, device: DLDevice) -> Result<()> {
        let end = start.checked_add(len);
        let inside = end.is_some_and(|end| {
            self.regions
                .range(..=(start, u64::MAX))
                .rev()
                .any(|((at, _), region)| {
                    region.device == device && at + region.len >= end && *at <= start
                })
        });
        if !inside {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "{len} bytes at {start:#x} on device ({}, {}) are not memory this session handed out",
                device.device_type,
                device.device_id
            );
        }
        Ok(())
    }
}
