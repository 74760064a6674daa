//! Modules from files and bytes, launches with each launch tag, and what goes wrong.

use std::collections::BTreeMap;
use std::ffi::c_void;

use device_kit::driver::module::DeviceModule;
use device_kit::kernel::{FunctionInfo, function_map_from_json};
use device_kit::testing::FAKE_KERNELS_META;
use tvm_ffi::{Any, DataType, Function};
use tvm_runtime::device::{DeviceApi, StreamHandle, set_current_stream};
use tvm_runtime::{Module, ModuleImpl};

use super::*;

/// PTX-shaped text with the kernels the fake runs.
const PTX: &str = "//\n.version 7.0\n.target sm_52\n.address_size 64\n\
    .visible .entry add_one(.param .u64 x, .param .u32 n) { ret; }\n\
    .visible .entry vadd(.param .u64 a) { ret; }\n\
    .visible .entry scalars(.param .u64 a) { ret; }\n\
    .visible .entry record_launch(.param .u64 out) { ret; }\n\
    .visible .entry launch_fails() { ret; }\n\
    .visible .entry faults() { ret; }\n";

fn functions(extra: &[(&str, &[&str])]) -> BTreeMap<String, FunctionInfo> {
    let mut map = function_map_from_json(FAKE_KERNELS_META).unwrap();
    // `vadd`, which the PTX holds as well.
    let vadd = FunctionInfo {
        name: "vadd".into(),
        arg_types: vec![
            DataType::handle(),
            DataType::handle(),
            DataType::handle(),
            DataType::int(32),
        ],
        launch_param_tags: vec!["blockIdx.x".into(), "threadIdx.x".into()],
        arg_extra_tags: Vec::new(),
    };
    map.insert("vadd".to_owned(), vadd);
    for (name, tags) in extra {
        map.insert(
            name.to_string(),
            FunctionInfo {
                name: "record_launch".into(),
                arg_types: vec![DataType::handle()],
                launch_param_tags: tags.iter().map(|t| t.to_string()).collect(),
                arg_extra_tags: Vec::new(),
            },
        );
    }
    map
}

struct Setup {
    fake: Fake,
    api: CudaDeviceApi,
    module: Module,
}

fn setup(code: &str, extra: &[(&str, &[&str])]) -> Setup {
    let fake = build_fake(&[]);
    let backend = fake.backend();
    let api = CudaDeviceApi::new(backend.clone());
    let module = DeviceModule::new(backend, "ptx", functions(extra), code.as_bytes().to_vec())
        .map(Module::new)
        .unwrap();
    Setup { fake, api, module }
}

fn kernel(setup: &Setup, name: &str) -> Function {
    setup.module.get_function_required(name).unwrap()
}

fn ptr(p: *mut u8) -> Any {
    Any::from(p.cast::<c_void>())
}

/// Copies `n` floats between host and device, synchronously.
fn transfer(api: &CudaDeviceApi, host: &mut [f32], device: *mut u8, to_device: bool) {
    let mut shape = [host.len() as i64];
    let h = f32_tensor(host.as_mut_ptr().cast(), cpu(), &mut shape, None);
    let d = f32_tensor(device, cuda(0), &mut shape, None);
    let (from, to) = if to_device { (&h, &d) } else { (&d, &h) };
    // SAFETY: both hold `host.len()` floats; synchronized before returning.
    unsafe { api.copy(from, to, StreamHandle::NULL).unwrap() };
    api.sync_stream(cuda(0), StreamHandle::NULL).unwrap();
}

fn alloc(api: &CudaDeviceApi, bytes: usize) -> *mut u8 {
    api.alloc(cuda(0), bytes, 64, DataType::uint(8))
        .unwrap()
        .cast()
}

#[test]
fn add_one_from_a_ptx_file_and_its_metadata() {
    let fake = build_fake(&[]);
    let api = CudaDeviceApi::new(fake.backend());
    let code = ("ptx", PTX.as_bytes());
    // Grid 2 x block 4 covers 8 of the 10 elements.
    device_kit::testing::assert_add_one_from_file(
        &api,
        &fake.build,
        code,
        FAKE_KERNELS_META,
        [2, 4],
    );
}

#[test]
fn modules_round_trip_through_their_serialized_form() {
    let fake = build_fake(&[]);
    let code = ("ptx", PTX.as_bytes());
    device_kit::testing::assert_round_trip(fake.backend(), code, &functions(&[]), "vadd", "sass");
}

/// Launches `record_launch` under `tags` with `launch_args` and returns the 16 dims it saw.
fn recorded(tags: &[&str], launch_args: &[i64]) -> [u32; 16] {
    let setup = setup(PTX, &[("probe", tags)]);
    let out = alloc(&setup.api, 64);
    let probe = kernel(&setup, "probe");
    let mut args = vec![ptr(out)];
    args.extend(launch_args.iter().map(|v| Any::from(*v)));
    let views: Vec<_> = args.iter().map(Any::as_view).collect();
    probe.call_packed(&views).unwrap();
    let mut dims = [0f32; 16];
    transfer(&setup.api, &mut dims, out, false);
    dims.map(f32::to_bits)
}

#[test]
fn each_launch_tag_reaches_the_driver() {
    let plain = recorded(
        &[
            "blockIdx.x",
            "blockIdx.y",
            "threadIdx.x",
            "threadIdx.z",
            "tirx.use_dyn_shared_memory",
        ],
        &[3, 2, 32, 4, 1024],
    );
    assert_eq!(&plain[..8], &[3, 2, 1, 32, 1, 4, 1024, 0]);
    let cooperative = recorded(&["blockIdx.x", "tirx.use_cooperative_launch"], &[5]);
    assert_eq!((cooperative[0], cooperative[7]), (5, 1));
    let cluster = recorded(
        &["blockIdx.x", "clusterCtaIdx.x", "clusterCtaIdx.y"],
        &[8, 2, 2],
    );
    assert_eq!(&cluster[8..11], &[2, 2, 1]);
    let preferred = recorded(
        &["preferredClusterCtaIdx.x", "tirx.use_cooperative_launch"],
        &[4],
    );
    assert_eq!((&preferred[12..15], preferred[7]), (&[4, 1, 1][..], 1));
    let dependent = recorded(&["tirx.use_programtic_dependent_launch"], &[]);
    assert_eq!(dependent[11], 1);
    // More than 48 KiB of dynamic shared memory needs the kernel's permission, which the
    // backend asks for (the fake refuses the launch otherwise).
    let large = recorded(&["tirx.use_dyn_shared_memory"], &[100 << 10]);
    assert_eq!(large[6], 100 << 10);
}

#[test]
fn kernels_run_on_the_current_stream() {
    let setup = setup(PTX, &[("probe", &["blockIdx.x"])]);
    let stream = setup.api.create_stream(cuda(0)).unwrap();
    let out = alloc(&setup.api, 64);
    let previous = set_current_stream(cuda(0), stream).unwrap();
    kernel(&setup, "probe").call((ptr(out), 1i64)).unwrap();
    set_current_stream(cuda(0), previous).unwrap();
    setup.api.sync_stream(cuda(0), stream).unwrap();
    let mut dims = [0f32; 16];
    transfer(&setup.api, &mut dims, out, false);
    assert_eq!(dims[15].to_bits(), stream.0 as usize as u32);
    // SAFETY: created above.
    unsafe { setup.api.free_stream(cuda(0), stream).unwrap() };
}

#[test]
fn scalars_are_narrowed_and_packed() {
    let setup = setup(PTX, &[]);
    device_kit::testing::assert_scalars_packed(&setup.api, &kernel(&setup, "scalars"));
}

#[test]
fn launch_errors_carry_the_driver_error_the_kernel_and_its_dimensions() {
    let setup = setup(PTX, &[]);
    let err = kernel(&setup, "launch_fails").call((3i64,)).unwrap_err();
    let message = err.message();
    assert!(
        message.contains("CUDA_ERROR_LAUNCH_FAILED (719): unspecified launch failure")
            && message.contains("kernel `launch_fails` on cuda:0")
            && message.contains("grid=(3, 1, 1), block=(1, 1, 1)"),
        "{message}"
    );
    let add_one = kernel(&setup, "add_one");
    let err = add_one
        .call((Any::none(), 1i64, 1i64, 2048i64))
        .unwrap_err();
    assert!(err.message().contains("CUDA_ERROR_INVALID_VALUE"), "{err}");
    // A kernel that faults while running shows when its stream is synchronized.
    kernel(&setup, "faults").call(()).unwrap();
    let err = setup
        .api
        .sync_stream(cuda(0), StreamHandle::NULL)
        .unwrap_err();
    assert!(err.message().contains("CUDA_ERROR_LAUNCH_FAILED"), "{err}");
    // The device keeps working.
    let device = alloc(&setup.api, 4);
    let mut one = [1f32];
    transfer(&setup.api, &mut one, device, true);
    add_one.call((ptr(device), 1i64, 1i64, 1i64)).unwrap();
    transfer(&setup.api, &mut one, device, false);
    assert_eq!(one, [2.0]);
}

#[test]
fn a_kernel_missing_from_the_code_is_an_error_naming_it() {
    let setup = setup(PTX, &[]);
    let err = kernel(&setup, "not_in_code").call(()).unwrap_err();
    assert!(
        err.message()
            .contains("kernel `not_in_code` is not in the module loaded on cuda:0")
            && err.message().contains("CUDA_ERROR_NOT_FOUND"),
        "{err}"
    );
    assert!(
        setup
            .module
            .get_function("absent", false)
            .unwrap()
            .is_none()
    );
}

#[test]
fn code_the_device_cannot_run_is_refused_with_the_jit_log() {
    for (code, expected) in [
        (
            PTX.replace(".version 7.0", ".version 99.0"),
            "CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222)",
        ),
        (
            PTX.replace("sm_52", "sm_999"),
            "CUDA_ERROR_NO_BINARY_FOR_GPU (209)",
        ),
    ] {
        let setup = setup(&code, &[]);
        let err = kernel(&setup, "faults").call(()).unwrap_err();
        assert!(
            err.message().contains("loading the ptx module on cuda:0")
                && err.message().contains(expected)
                && err.message().contains("JIT log:"),
            "{err}"
        );
        assert_eq!(setup.fake.live("modules"), 0);
    }
}

#[test]
fn tensors_the_kernel_cannot_use_are_refused() {
    let setup = setup(PTX, &[]);
    device_kit::testing::assert_argument_refusals(&kernel(&setup, "add_one"));
}

#[test]
fn module_kind_and_unknown_functions() {
    let setup = setup(PTX, &[]);
    assert_eq!(setup.module.kind(), "cuda");
    let state = DeviceModule::new(setup.fake.backend(), "ptx", functions(&[]), PTX.into()).unwrap();
    assert_eq!(state.format(), "ptx");
    assert_eq!(ModuleImpl::kind(&state), "cuda");
}
