//! Checks every driver-API backend passes over its fake driver (two devices, the kernels of
//! the fake kernels library), and the metadata of those kernels.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::Arc;

use tvm_ffi::{Any, DataType, Device, ErrorKind, Function, Tensor};
use tvm_runtime::Module;
use tvm_runtime::device::{DeviceApi, DeviceAttr, StreamHandle};

use super::{FakeDriver, f32_tensor};
use crate::driver::device_api::GpuDeviceApi;
use crate::driver::module::{DeviceModule, KernelBackend, serialize};
use crate::driver::runtime::{GpuRuntime, RuntimeSource};
use crate::kernel::FunctionInfo;

/// Whether `device` exists for `api`.
fn exists(api: &dyn DeviceApi, device: Device) -> bool {
    let value = api.attr(device, DeviceAttr::Exist).unwrap().unwrap();
    value.try_as::<i64>() == Some(1)
}

/// Checks a driver-API backend over a fake with two devices: indices 0 and 1 exist, 2 and -1
/// do not and say they are out of range of `what` (the runtime's name in messages) in their
/// reason, in an allocation and in an attribute, while the others keep working.
pub fn assert_two_devices<B: RuntimeSource>(api: &GpuDeviceApi<B>, what: &str) {
    let names = B::Runtime::NAMES;
    let device = |id: i32| Device::new(names.device_type, id);
    assert!(exists(api, device(0)) && exists(api, device(1)));
    assert!(!exists(api, device(2)) && !exists(api, device(-1)));
    let reason = api.unavailable_reason(device(2)).unwrap();
    let expected = format!(
        "{}:2 is out of range: the {what} reports 2 device(s)",
        names.name
    );
    assert!(reason.contains(&expected), "{reason}");
    let err = api.alloc(device(2), 16, 64, DataType::uint(8)).unwrap_err();
    assert!(err.message().contains("out of range"), "{err}");
    let err = api.attr(device(5), DeviceAttr::WarpSize).unwrap_err();
    let expected = format!("{}:5 is out of range", names.name);
    assert!(err.message().contains(&expected), "{err}");
    let ptr = api.alloc(device(1), 16, 64, DataType::uint(8)).unwrap();
    // SAFETY: allocated above on device 1.
    unsafe { api.free(device(1), ptr).unwrap() };
}

/// Checks that allocations on `device` of `api` are released: three made, three live in
/// `fake`, none once freed.
pub fn assert_allocations_released<B: RuntimeSource>(
    api: &GpuDeviceApi<B>,
    fake: &FakeDriver,
    device: Device,
) {
    let ptrs: Vec<_> = (0..3)
        .map(|_| api.alloc(device, 40, 64, DataType::float(32)).unwrap())
        .collect();
    assert_eq!(fake.live("allocations"), 3);
    for ptr in ptrs {
        // SAFETY: allocated above, freed once.
        unsafe { api.free(device, ptr).unwrap() };
    }
    assert_eq!(fake.live("allocations"), 0);
}

/// Checks `scalars`, a kernel of the fake kernels library taking `(out, int32, uint32,
/// float32, float64, int64)` and writing each scalar to `out` as a double, launched through
/// `api`'s device 0: the call's values are narrowed to those types and packed, and values
/// outside them are refused naming the argument.
pub fn assert_scalars_packed<B: RuntimeSource>(api: &GpuDeviceApi<B>, scalars: &Function) {
    let device = Device::new(B::Runtime::NAMES.device_type, 0);
    let out = api.alloc(device, 64, 64, DataType::uint(8)).unwrap();
    let values = (-7i64, 4_000_000_000i64, 0.5f64, 2.25f64, -(1i64 << 40));
    let (a, b, c, d, e) = values;
    scalars.call((Any::from(out), a, b, c, d, e)).unwrap();
    let mut written = [0f32; 10];
    let mut shape = [written.len() as i64];
    let cpu = Device::new(tvm_ffi::abi::kDLCPU, 0);
    let host = f32_tensor(written.as_mut_ptr().cast(), cpu, &mut shape, None);
    let on_device = f32_tensor(out.cast(), device, &mut shape, None);
    // SAFETY: both hold ten floats; the stream is synchronized before they are read.
    unsafe { api.copy(&on_device, &host, StreamHandle::NULL).unwrap() };
    api.sync_stream(device, StreamHandle::NULL).unwrap();
    let doubles: Vec<f64> = written
        .chunks(2)
        .map(|p| f64::from_bits(u64::from(p[0].to_bits()) | (u64::from(p[1].to_bits()) << 32)))
        .collect();
    assert_eq!(doubles, [-7.0, 4e9, 0.5, 2.25, -(2f64.powi(40))]);
    let refused = |args: (i64, i64), says: &str| {
        let err = scalars
            .call((Any::from(out), args.0, args.1, 0.0f64, 0.0f64, 0i64))
            .unwrap_err();
        assert!(err.message().contains(says), "{err}");
    };
    refused((1 << 40, 0), "argument 1 is 1099511627776, outside int32");
    refused((0, -1), "argument 2 is -1, outside uint32");
    // SAFETY: allocated above on device 0, freed once.
    unsafe { api.free(device, out).unwrap() };
}

/// Copies `host.len()` floats between the host and `memory` on `device` of `api`, then waits.
fn transfer<B: RuntimeSource>(
    api: &GpuDeviceApi<B>,
    device: Device,
    host: &mut [f32],
    memory: *mut c_void,
    to_device: bool,
) {
    let mut shape = [host.len() as i64];
    let cpu = Device::new(tvm_ffi::abi::kDLCPU, 0);
    let on_host = f32_tensor(host.as_mut_ptr().cast(), cpu, &mut shape, None);
    let on_device = f32_tensor(memory.cast(), device, &mut shape, None);
    let (from, to) = if to_device {
        (&on_host, &on_device)
    } else {
        (&on_device, &on_host)
    };
    // SAFETY: both hold `host.len()` floats; the stream is synchronized before returning.
    unsafe { api.copy(from, to, StreamHandle::NULL).unwrap() };
    api.sync_stream(device, StreamHandle::NULL).unwrap();
}

/// Checks a module loaded from the code file `kernels.<extension>` (holding `code`) and its
/// `kernels.tvm_meta.json` (`meta`), written into `fake`'s directory: of the backend's kind,
/// its `add_one` (x, n) adds one to the first `grid * block` of ten floats on device 0, the code
/// stays loaded while a function of it lives and is unloaded with the last, and an absent file
/// is a `FileNotFoundError`.
pub fn assert_add_one_from_file<B: KernelBackend>(
    api: &GpuDeviceApi<B>,
    fake: &FakeDriver,
    code_file: (&str, &[u8]),
    meta: &str,
    [grid, block]: [i64; 2],
) {
    let (extension, code) = code_file;
    let backend = Arc::clone(api.backend());
    let path = fake.dir.join(format!("kernels.{extension}"));
    std::fs::write(&path, code).unwrap();
    std::fs::write(fake.dir.join("kernels.tvm_meta.json"), meta).unwrap();
    let module = Module::new(DeviceModule::from_file(backend.clone(), &path, extension).unwrap());
    assert_eq!(module.kind(), backend.kind());
    let add_one = module.get_function_required("add_one").unwrap();
    let device = Device::new(B::Runtime::NAMES.device_type, 0);
    let memory = api.alloc(device, 40, 64, DataType::float(32)).unwrap();
    let mut data: Vec<f32> = (0..10).map(|v| v as f32).collect();
    transfer(api, device, &mut data, memory, true);
    add_one
        .call((Any::from(memory), 10i64, grid, block))
        .unwrap();
    transfer(api, device, &mut data, memory, false);
    let covered = (grid * block) as usize;
    let expected: Vec<f32> = (0..10)
        .map(|v| v as f32 + if v < covered { 1.0 } else { 0.0 })
        .collect();
    assert_eq!(data, expected, "the launch dimensions reach the kernel");
    assert_eq!(fake.live("modules"), 1);
    drop((add_one, module));
    assert_eq!(fake.live("modules"), 0, "unloaded with its last function");
    // SAFETY: allocated above.
    unsafe { api.free(device, memory).unwrap() };
    let absent = fake.dir.join(format!("absent.{extension}"));
    let err = DeviceModule::from_file(backend, &absent, extension)
        .err()
        .unwrap();
    assert_eq!(err.kind(), "FileNotFoundError");
}

/// Checks the serialized form of a module of `functions` with `code` in `format`: it loads
/// again with its functions (`present` among them), cut short by one or three bytes it is a
/// `ValueError` naming the module kind, and code in the `foreign` format is refused by name.
pub fn assert_round_trip<B: KernelBackend>(
    backend: Arc<B>,
    (format, code): (&str, &[u8]),
    functions: &BTreeMap<String, FunctionInfo>,
    present: &str,
    foreign: &str,
) {
    let bytes = serialize(format, functions, code);
    let module = Module::new(DeviceModule::from_bytes(backend.clone(), &bytes).unwrap());
    assert!(module.implements_function(present).unwrap());
    assert!(!module.implements_function("nothing").unwrap());
    let kind = format!("{} module", backend.kind());
    for cut in [1, 3] {
        let short = &bytes[..bytes.len() - cut];
        let err = DeviceModule::from_bytes(backend.clone(), short)
            .err()
            .unwrap();
        assert!(
            err.is_kind(ErrorKind::ValueError) && err.message().contains(&kind),
            "{err}"
        );
    }
    let err = DeviceModule::new(backend, foreign, functions.clone(), Vec::new())
        .err()
        .unwrap();
    let says = format!("not \"{foreign}\"");
    assert!(
        err.is_kind(ErrorKind::ValueError) && err.message().contains(&says),
        "{err}"
    );
}

/// The `.tvm_meta.json` of `add_one(x, n)` of the fake kernels library.
pub const ADD_ONE_META: &str = r#"{"func_info": {"add_one": {"name": "add_one", "arg_types": ["handle", "int32"],
    "launch_param_tags": ["blockIdx.x", "threadIdx.x"]}}}"#;

/// The `.tvm_meta.json` of the fake kernels library's kernels that both fake drivers' code
/// holds (`add_one`, `scalars`, `launch_fails`, `faults`), and of `not_in_code`, which no code
/// holds.
pub const FAKE_KERNELS_META: &str = r#"{"func_info": {
  "add_one": {"name": "add_one", "arg_types": ["handle", "int32"],
              "launch_param_tags": ["blockIdx.x", "threadIdx.x"]},
  "scalars": {"name": "scalars", "arg_types": ["handle", "int32", "uint32", "float32", "float64", "int64"],
              "launch_param_tags": []},
  "launch_fails": {"name": "launch_fails", "arg_types": [], "launch_param_tags": ["blockIdx.x"]},
  "faults": {"name": "faults", "arg_types": [], "launch_param_tags": []},
  "not_in_code": {"name": "not_in_code", "arg_types": [], "launch_param_tags": []}
}}"#;

/// Checks that `add_one` (x, n, then its launch arguments) refuses a host tensor, naming the
/// argument and its device, and a call with too few arguments, naming how many it takes.
pub fn assert_argument_refusals(add_one: &Function) {
    let host = Tensor::from_slice(&[1f32, 2.0], &[2]).unwrap();
    let err = add_one.call((host, 2i64, 1i64, 2i64)).unwrap_err();
    assert!(
        err.is_kind(ErrorKind::ValueError)
            && err.message().contains("argument 0 is a tensor on cpu:0"),
        "{err}"
    );
    let null = Any::from(std::ptr::null_mut::<c_void>());
    let err = add_one.call((null, 2i64)).unwrap_err();
    assert!(
        err.is_kind(ErrorKind::TypeError) && err.message().contains("takes 4"),
        "{err}"
    );
}
