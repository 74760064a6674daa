//! What the backends' tests share (feature `testing`): the fake drivers of the driver-API
//! backends, built from C into a directory of each test's own over the host-memory GPU of
//! `fake/gpu_fake.h` and the kernels library `fake/kernels.c`, and what their launch-cost
//! examples share, and checks every driver-API backend passes over its fake; the check that a
//! buffer-handle backend has the default stream only.

use std::collections::BTreeMap;
use std::ffi::{CString, c_char, c_void};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tvm_ffi::abi::{DLDataType, DLDevice, DLTensor, kDLFloat};
use tvm_ffi::{Any, AnyView, DataType, Device, ErrorKind, Function, Tensor};
use tvm_runtime::Module;
use tvm_runtime::device::{DeviceApi, DeviceAttr, StreamHandle};

use crate::driver::DriverLibrary;
use crate::driver::device_api::GpuDeviceApi;
use crate::driver::module::{DeviceModule, KernelBackend, serialize};
use crate::driver::runtime::{GpuRuntime, RuntimeSource};
use crate::kernel::{FunctionInfo, LaunchDims};

/// The directory of the shared fake sources (`gpu_fake.h`, `kernels.c`).
pub fn fake_sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fake")
}

/// Compiles C `source` into the shared library `out`, with `-I` to [`fake_sources`] and the
/// extra flags `defines`. Panics (failing the test) when the compiler fails.
pub fn compile_library(source: &Path, out: &Path, defines: &[String]) {
    let target = env!("DEVICE_KIT_BUILD_TARGET");
    let compiler = cc::Build::new()
        .target(target)
        .host(target)
        .opt_level(1)
        .cargo_metadata(false)
        .get_compiler();
    let status = compiler
        .to_command()
        .args(["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(fake_sources())
        .arg("-o")
        .arg(out)
        .args(defines)
        .arg(source)
        .args(["-ldl", "-lpthread"])
        .status()
        .expect("the C compiler runs");
    assert!(status.success(), "compiling {} failed", source.display());
}

/// A fake driver built for one test, with its kernels library next to it.
#[derive(Debug)]
pub struct FakeDriver {
    /// The fake vendor library.
    pub library: PathBuf,
    /// The directory of this build, for the test's own files.
    pub dir: PathBuf,
    /// The name of the fake's `long <name>(const char *what)` that counts what is not released.
    live_symbol: &'static str,
}

impl FakeDriver {
    /// Builds fake driver `source` as `library_name` in a fresh directory (tests run in
    /// parallel: a shared output path would let one test load a file another is still
    /// writing), with the kernels library baked in and `-D` switches `defines`
    /// (`FAKE_DEVICE_COUNT=0`, ...). `prefix` names the directory after the crate.
    pub fn build(
        prefix: &str,
        source: &Path,
        library_name: &str,
        live_symbol: &'static str,
        defines: &[&str],
    ) -> FakeDriver {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir()
            .join(format!("{prefix}-{}", std::process::id()))
            .join(NEXT.fetch_add(1, Ordering::Relaxed).to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let kernels = dir.join("libfake_kernels.so");
        compile_library(&fake_sources().join("kernels.c"), &kernels, &[]);
        let mut flags: Vec<String> = defines.iter().map(|d| format!("-D{d}")).collect();
        flags.push(format!("-DFAKE_KERNELS_LIBRARY=\"{}\"", kernels.display()));
        let library = dir.join(library_name);
        compile_library(source, &library, &flags);
        FakeDriver {
            library,
            dir,
            live_symbol,
        }
    }

    /// What the fake holds and has not released: "allocations", "host", "streams", "events",
    /// "modules" (and what the vendor's fake adds).
    pub fn live(&self, what: &str) -> i64 {
        let library = DriverLibrary::open(self.library.to_str().unwrap()).unwrap();
        // SAFETY: the fake's `long <live_symbol>(const char *)`.
        let live: unsafe extern "C" fn(*const c_char) -> i64 =
            unsafe { library.function(self.live_symbol).unwrap() };
        let what = CString::new(what).unwrap();
        // SAFETY: a NUL-terminated name.
        unsafe { live(what.as_ptr()) }
    }
}

/// A float32 descriptor of `data` on `device` (host data when the device is the CPU), compact
/// unless `strides` are given.
pub fn f32_tensor(
    data: *mut u8,
    device: Device,
    shape: &mut [i64],
    strides: Option<&mut [i64]>,
) -> DLTensor {
    DLTensor {
        data: data.cast(),
        device: DLDevice {
            device_type: device.device_type(),
            device_id: device.device_id(),
        },
        ndim: shape.len() as i32,
        dtype: DLDataType {
            code: kDLFloat,
            bits: 32,
            lanes: 1,
        },
        shape: shape.as_mut_ptr(),
        strides: strides.map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
        byte_offset: 0,
    }
}

/// Checks that `device`, of a registered backend with one queue per device (the buffer-handle
/// backends), has the default stream only: a foreign stream is refused alike when made current
/// and when synchronized, in a `ValueError` saying that `<title> devices have one queue`, and
/// the thread's current stream stays the default one.
pub fn assert_default_stream_only(device: Device, title: &str) {
    use tvm_runtime::device::{StreamHandle, current_stream, set_current_stream, sync_stream};
    let foreign = StreamHandle(0x5150 as *mut std::ffi::c_void);
    let refused = set_current_stream(device, foreign).unwrap_err();
    let by_sync = sync_stream(device, Some(foreign)).unwrap_err();
    assert_eq!(refused.kind(), "ValueError");
    assert_eq!(refused.message(), by_sync.message());
    let says = format!("{title} devices have one queue");
    assert!(refused.message().contains(&says), "{refused}");
    assert_eq!(current_stream(device), StreamHandle::NULL);
    assert_eq!(
        set_current_stream(device, StreamHandle::NULL).unwrap(),
        StreamHandle::NULL
    );
}

/// The command line of a launch-cost example, `<example> <library> <packed|bare> <launches>`:
/// the library, the mode and the count (the usage is printed, and the process exits, otherwise).
pub fn launch_cost_args(example: &str, library: &str) -> (String, String, u64) {
    let args: Vec<String> = std::env::args().collect();
    let [_, path, mode, launches] = args.as_slice() else {
        eprintln!("usage: {example} <{library}> <packed|bare> <launches>");
        std::process::exit(2);
    };
    let launches = launches.parse().expect("<launches> is a count");
    (path.clone(), mode.clone(), launches)
}

/// The metadata of `add_one(x, n)` of the fake drivers' code, launched with
/// `blockIdx.x` and `threadIdx.x`.
pub fn add_one_info() -> FunctionInfo {
    FunctionInfo {
        name: "add_one".into(),
        arg_types: vec![DataType::handle(), DataType::int(32)],
        launch_param_tags: vec!["blockIdx.x".into(), "threadIdx.x".into()],
        arg_extra_tags: Vec::new(),
    }
}

/// Calls `add_one` of `module` (made with [`add_one_info`]) `launches` times on one block of
/// one thread with `data` as `x`: the `packed` mode of the launch-cost examples.
pub fn launch_packed(module: Module, data: u64, launches: u64) -> tvm_ffi::Result<()> {
    let add_one = module.get_function_required("add_one")?;
    let values = [
        Any::from(data as usize as *mut std::ffi::c_void),
        Any::from(1i64),
        Any::from(1i64),
        Any::from(1i64),
    ];
    let views: Vec<AnyView<'_>> = values.iter().map(Any::as_view).collect();
    for _ in 0..launches {
        add_one.call_packed(&views)?;
    }
    Ok(())
}

/// One block of one thread, no dynamic shared memory: the `bare` launches of the launch-cost
/// examples.
pub fn one_thread() -> LaunchDims {
    LaunchDims {
        grid: [1; 3],
        block: [1; 3],
        cluster: [1; 3],
        preferred_cluster: [1; 3],
        dyn_shared_memory: 0,
        cooperative: false,
        programmatic_dependent_launch: false,
    }
}

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
