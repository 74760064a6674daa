//! A strict simulated device on host memory (`ext_dev`), so that every non-CPU path (copies
//! with strides and offsets, streams, DLPack with a device, remote devices) runs on machines
//! without a GPU and fails loudly where a real device would misbehave:
//!
//! - its pointers are opaque: non-canonical addresses that crash if the host dereferences them;
//! - copies are queued on their stream and happen only when that stream is synchronized;
//! - an access outside a live allocation, a double free, an unknown stream or a stream of another
//!   device is a `ValueError`; an allocation past the configured memory is a `MemoryError`;
//! - live allocations, bytes, streams and queued copies are counted ([`test_device_stats`]).

use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use tvm_ffi::abi::{self, DLTensor, kDLExtDev};
use tvm_ffi::{Any, DataType, Device, Error, ErrorKind, Result};

use super::host_copy::{byte_extent, copy_host_strided};
use super::{DeviceApi, DeviceAttr, StreamHandle, register_device_api};

/// The first address handed out: non-canonical on x86-64 and AArch64, so a host dereference
/// faults at once instead of reading someone else's memory.
const ADDRESS_BASE: u64 = 0x7e57_0000_0000_0000;
/// The first stream handle (also not an address).
const STREAM_BASE: u64 = 0x5713_0000_0000_0000;
/// Unused addresses between two allocations, so that an overrun lands outside both.
const GUARD_GAP: u64 = 4096;

/// How the simulated device is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestDeviceConfig {
    /// Devices `ext_dev:0` .. `ext_dev:N-1` exist.
    pub num_devices: i32,
    /// Memory of each device, in bytes.
    pub memory_bytes: u64,
}

impl Default for TestDeviceConfig {
    fn default() -> Self {
        TestDeviceConfig {
            num_devices: 2,
            memory_bytes: 256 << 20,
        }
    }
}

/// What the simulated device holds right now (all devices together).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TestDeviceStats {
    /// Allocations not freed yet.
    pub live_allocations: usize,
    /// Bytes in those allocations.
    pub live_bytes: u64,
    /// Streams not freed yet.
    pub live_streams: usize,
    /// Copies queued on some stream and not done yet.
    pub pending_copies: usize,
}

/// Where one side of a queued copy lives.
#[derive(Clone, Copy)]
enum Location {
    /// A host address.
    Host(usize),
    /// A device address of this backend.
    Device(u64),
}

/// One side of a queued copy, with its dims copied (the caller's descriptor may be gone by the
/// time the stream runs).
struct Side {
    location: Location,
    descriptor: DLTensor,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

impl Side {
    /// # Safety
    /// `t` is a valid descriptor.
    unsafe fn capture(t: &DLTensor, location: Location) -> Side {
        let ndim = usize::try_from(t.ndim).unwrap_or(0);
        let dims = |p: *mut i64| {
            if p.is_null() || ndim == 0 {
                Vec::new()
            } else {
                // SAFETY: a valid descriptor's shape and strides hold `ndim` values.
                unsafe { std::slice::from_raw_parts(p, ndim) }.to_vec()
            }
        };
        let (shape, mut strides) = (dims(t.shape), dims(t.strides));
        if strides.is_empty() {
            strides = tvm_ffi::tensor::compact_strides(&shape);
        }
        Side {
            location,
            descriptor: *t,
            shape,
            strides,
        }
    }
}

struct PendingCopy {
    from: Side,
    to: Side,
}

/// Host memory standing in for one device allocation.
struct Allocation {
    device_id: i32,
    host: *mut u8,
    len: usize,
}

// SAFETY: the buffer is owned by the allocation and only touched under the state's lock.
unsafe impl Send for Allocation {}

impl Allocation {
    fn new(device_id: i32, len: usize) -> Allocation {
        let host = Box::into_raw(vec![0u8; len].into_boxed_slice()).cast::<u8>();
        Allocation {
            device_id,
            host,
            len,
        }
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        // SAFETY: made by `Box::into_raw` of a boxed slice of `len` bytes in `new`.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.host, self.len)) });
    }
}

#[derive(Default)]
struct State {
    /// Live allocations by start address.
    allocations: BTreeMap<u64, Allocation>,
    next_address: u64,
    used: HashMap<i32, u64>,
    /// Created streams: handle → (device id, queue).
    streams: HashMap<u64, (i32, Vec<PendingCopy>)>,
    next_stream: u64,
    /// The queue of each device's default (NULL) stream.
    default_queues: HashMap<i32, Vec<PendingCopy>>,
}

// SAFETY: queued descriptors point at memory their submitters keep alive until the stream is
// synchronized (the DeviceApi::copy contract); they are only read under the state's lock.
unsafe impl Send for PendingCopy {}

impl State {
    /// The allocation holding `[address + range.start, address + range.end)` on `device_id`.
    fn resolve(
        &self,
        address: u64,
        range: std::ops::Range<i128>,
        device_id: i32,
    ) -> Result<*mut u8> {
        let first = i128::from(address) + range.start;
        let last = i128::from(address) + range.end;
        let found = self
            .allocations
            .range(..=u64::try_from(first).unwrap_or(0))
            .next_back()
            .filter(|(start, a)| {
                a.device_id == device_id && last <= i128::from(**start) + a.len as i128
            });
        match found {
            // `address` itself may lie before the allocation when a byte offset brings the
            // elements inside it.
            Some((start, a)) => Ok(a.host.wrapping_add(address.wrapping_sub(*start) as usize)),
            None => Err(Error::new(
                ErrorKind::ValueError,
                format!(
                    "test device: bytes {first:#x}..{last:#x} are not inside a live allocation \
                     of ext_dev:{device_id}"
                ),
            )),
        }
    }

    fn queue(&mut self, device_id: i32, stream: StreamHandle) -> Result<&mut Vec<PendingCopy>> {
        if stream.is_null() {
            return Ok(self.default_queues.entry(device_id).or_default());
        }
        match self.streams.get_mut(&(stream.0 as u64)) {
            Some((owner, queue)) if *owner == device_id => Ok(queue),
            Some((owner, _)) => Err(Error::new(
                ErrorKind::ValueError,
                format!(
                    "test device: stream {stream:p} belongs to device {owner}, not {device_id}"
                ),
            )),
            None => Err(Error::new(
                ErrorKind::ValueError,
                format!("test device: unknown stream {:p}", stream.0),
            )),
        }
    }

    /// Runs queued copies in order.
    fn run(&self, copies: Vec<PendingCopy>) -> Result<()> {
        for copy in copies {
            let from = self.host_descriptor(&copy.from)?;
            let to = self.host_descriptor(&copy.to)?;
            // SAFETY: both descriptors now address host memory holding their elements (device
            // sides were bounds-checked when queued and their allocations are still alive).
            unsafe { copy_host_strided(&from, &to) };
        }
        Ok(())
    }

    fn host_descriptor(&self, side: &Side) -> Result<DLTensor> {
        let mut t = DLTensor {
            shape: side.shape.as_ptr().cast_mut(),
            strides: side.strides.as_ptr().cast_mut(),
            ..side.descriptor
        };
        t.data = match side.location {
            Location::Host(address) => address as *mut c_void,
            Location::Device(address) => {
                // The same bytes as when the copy was queued, which must still be allocated.
                // SAFETY: the dims point at the side's own copies.
                let extent = unsafe { byte_extent(&t)? };
                self.resolve(address, extent, side.descriptor.device.device_id)?
                    .cast()
            }
        };
        Ok(t)
    }

    fn drain_all(&mut self) -> Result<()> {
        let mut queues: Vec<Vec<PendingCopy>> = self
            .default_queues
            .values_mut()
            .map(std::mem::take)
            .collect();
        queues.extend(self.streams.values_mut().map(|(_, q)| std::mem::take(q)));
        queues.into_iter().try_for_each(|q| self.run(q))
    }
}

/// The simulated device's backend.
pub struct TestDeviceApi {
    config: TestDeviceConfig,
    state: Mutex<State>,
}

impl TestDeviceApi {
    /// A backend with the given set-up (not registered).
    pub fn new(config: TestDeviceConfig) -> TestDeviceApi {
        let state = State {
            next_address: ADDRESS_BASE,
            next_stream: STREAM_BASE,
            ..State::default()
        };
        TestDeviceApi {
            config,
            state: Mutex::new(state),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn check_device(&self, device: Device) -> Result<i32> {
        let id = device.device_id();
        if device.device_type() == abi::kDLCPU || !(0..self.config.num_devices).contains(&id) {
            tvm_ffi::bail!(ErrorKind::ValueError, "test device: no device {device}");
        }
        Ok(id)
    }

    /// What the device holds now.
    pub fn stats(&self) -> TestDeviceStats {
        let state = self.state();
        let queued = |q: &Vec<PendingCopy>| q.len();
        TestDeviceStats {
            live_allocations: state.allocations.len(),
            live_bytes: state.allocations.values().map(|a| a.len as u64).sum(),
            live_streams: state.streams.len(),
            pending_copies: state.default_queues.values().map(queued).sum::<usize>()
                + state
                    .streams
                    .values()
                    .map(|(_, q)| queued(q))
                    .sum::<usize>(),
        }
    }

    /// One side of a copy: host memory, or checked device memory of this backend.
    ///
    /// # Safety
    /// `t` is a valid descriptor.
    unsafe fn side(&self, state: &State, t: &DLTensor) -> Result<Side> {
        let device = Device(t.device);
        let location = match device.device_type() {
            abi::kDLCPU => Location::Host(t.data as usize),
            _ => {
                let id = self.check_device(device)?;
                // SAFETY: guaranteed by the caller.
                let extent = unsafe { byte_extent(t)? };
                state.resolve(t.data as u64, extent, id)?;
                Location::Device(t.data as u64)
            }
        };
        // SAFETY: guaranteed by the caller.
        Ok(unsafe { Side::capture(t, location) })
    }
}

impl DeviceApi for TestDeviceApi {
    fn name(&self) -> &str {
        "test"
    }

    fn attr(&self, device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
        if attr == DeviceAttr::Exist {
            return Ok(Some(Any::from(i64::from(
                self.check_device(device).is_ok(),
            ))));
        }
        let id = self.check_device(device)?;
        let memory = self.config.memory_bytes as i64;
        Ok(Some(match attr {
            DeviceAttr::DeviceName => Any::from("tvm test device"),
            DeviceAttr::MaxThreadsPerBlock => Any::from(1024i64),
            DeviceAttr::WarpSize => Any::from(32i64),
            DeviceAttr::MaxSharedMemoryPerBlock => Any::from(48i64 << 10),
            DeviceAttr::ComputeVersion => Any::from("1.0"),
            DeviceAttr::MultiProcessorCount => Any::from(4i64),
            DeviceAttr::MaxThreadDimensions => Any::from("[1024, 1024, 64]"),
            DeviceAttr::TotalGlobalMemory => Any::from(memory),
            DeviceAttr::AvailableGlobalMemory => {
                let used = self.state().used.get(&id).copied().unwrap_or(0);
                Any::from(memory - used as i64)
            }
            _ => return Ok(None),
        }))
    }

    fn alloc(
        &self,
        device: Device,
        nbytes: usize,
        alignment: usize,
        _dtype_hint: DataType,
    ) -> Result<*mut c_void> {
        let id = self.check_device(device)?;
        let mut state = self.state();
        let used = state.used.get(&id).copied().unwrap_or(0);
        let request = nbytes.max(1) as u64;
        if request > self.config.memory_bytes - used {
            tvm_ffi::bail!(
                ErrorKind::MemoryError,
                "test device {device}: cannot allocate {nbytes} bytes ({used} of {} in use)",
                self.config.memory_bytes
            );
        }
        let align = alignment.max(1) as u64;
        let start = state.next_address.next_multiple_of(align);
        state.next_address = start + request + GUARD_GAP;
        *state.used.entry(id).or_default() += request;
        state
            .allocations
            .insert(start, Allocation::new(id, request as usize));
        Ok(start as *mut c_void)
    }

    unsafe fn free(&self, device: Device, ptr: *mut c_void) -> Result<()> {
        let id = self.check_device(device)?;
        let mut state = self.state();
        // Like a GPU driver's free: the work queued so far completes first.
        state.drain_all()?;
        match state.allocations.get(&(ptr as u64)) {
            Some(a) if a.device_id == id => {
                let len = a.len as u64;
                state.allocations.remove(&(ptr as u64));
                *state.used.entry(id).or_default() -= len;
                Ok(())
            }
            _ => Err(Error::new(
                ErrorKind::ValueError,
                format!("test device: {ptr:p} is not a live allocation of {device} (double free?)"),
            )),
        }
    }

    unsafe fn copy(&self, from: &DLTensor, to: &DLTensor, stream: StreamHandle) -> Result<()> {
        let runner = if from.device.device_type == abi::kDLCPU {
            to.device
        } else {
            from.device
        };
        let id = self.check_device(Device(runner))?;
        let mut state = self.state();
        // SAFETY: valid descriptors (the caller's contract).
        let (from, to) = unsafe { (self.side(&state, from)?, self.side(&state, to)?) };
        state.queue(id, stream)?.push(PendingCopy { from, to });
        Ok(())
    }

    fn create_stream(&self, device: Device) -> Result<StreamHandle> {
        let id = self.check_device(device)?;
        let mut state = self.state();
        let handle = state.next_stream;
        state.next_stream += 16;
        state.streams.insert(handle, (id, Vec::new()));
        Ok(StreamHandle(handle as *mut c_void))
    }

    unsafe fn free_stream(&self, device: Device, stream: StreamHandle) -> Result<()> {
        let id = self.check_device(device)?;
        let mut state = self.state();
        let queue = std::mem::take(state.queue(id, stream)?);
        state.run(queue)?;
        state.streams.remove(&(stream.0 as u64));
        Ok(())
    }

    fn sync_stream(&self, device: Device, stream: StreamHandle) -> Result<()> {
        let id = self.check_device(device)?;
        let mut state = self.state();
        let queue = std::mem::take(state.queue(id, stream)?);
        state.run(queue)
    }
}

static REGISTERED: OnceLock<Arc<TestDeviceApi>> = OnceLock::new();

/// Registers the simulated device for `ext_dev` (a `ValueError` if `ext_dev` already has a
/// backend, including a test device registered before).
pub fn register_test_device(config: TestDeviceConfig) -> Result<()> {
    if config.num_devices < 1 {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "the test device needs at least one device, got num_devices={}",
            config.num_devices
        );
    }
    let api = Arc::new(TestDeviceApi::new(config));
    register_device_api(kDLExtDev, api.clone())?;
    let _ = REGISTERED.set(api);
    Ok(())
}

/// What the registered simulated device holds now; a `RuntimeError` if none was registered.
pub fn test_device_stats() -> Result<TestDeviceStats> {
    REGISTERED.get().map(|api| api.stats()).ok_or_else(|| {
        Error::new(
            ErrorKind::RuntimeError,
            "the test device is not registered (register_test_device)",
        )
    })
}
