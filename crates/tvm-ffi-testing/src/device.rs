//! The simulated device (`ext_dev`, the runtime's strict test backend) for suites in other
//! languages, registered through the C table as any out-of-tree backend is, plus
//! `testing.device_stats` to check it for leaks.

use std::sync::{Arc, OnceLock};

use tvm_ffi::abi::kDLExtDev;
use tvm_ffi::{Any, Function, Map};
use tvm_runtime::device::{TestDeviceApi, TestDeviceConfig, register_external};

static DEVICE: OnceLock<Arc<TestDeviceApi>> = OnceLock::new();

/// `testing.device_stats()`: what the simulated device holds now, as a map of counts.
fn device_stats() -> Function {
    Function::from_typed("testing.device_stats", || -> Map {
        let stats = DEVICE.get().map(|d| d.stats()).unwrap_or_default();
        [
            ("live_allocations", stats.live_allocations as i64),
            ("live_bytes", stats.live_bytes as i64),
            ("live_streams", stats.live_streams as i64),
            ("pending_copies", stats.pending_copies as i64),
        ]
        .into_iter()
        .map(|(k, v)| (Any::from(k), Any::from(v)))
        .collect()
    })
}

/// Registers the simulated device with the process's runtime, when it has a device registry
/// and `ext_dev` is free; registers `testing.device_stats` either way.
pub(crate) fn register() {
    let _ = device_stats().register_global("testing.device_stats", false);
    if Function::get_global("ffi.DeviceAPIRegister").is_none() {
        return;
    }
    let device = Arc::new(TestDeviceApi::new(TestDeviceConfig::default()));
    if register_external(kDLExtDev, device.clone()).is_ok() {
        let _ = DEVICE.set(device);
    }
}
