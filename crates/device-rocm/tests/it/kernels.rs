//! `hip` modules from files and bytes, launches with each launch tag HIP takes, the tags it
//! refuses, and what goes wrong.

use std::collections::BTreeMap;
use std::ffi::c_void;

use device_kit::driver::module::DeviceModule;
use device_kit::kernel::{FunctionInfo, function_map_from_json};
use device_kit::testing::FAKE_KERNELS_META;
use tvm_ffi::{Any, AnyView, ErrorKind, Function};
use tvm_runtime::Module;
use tvm_runtime::device::set_current_stream;

use super::*;

/// An HSACO stand-in the fake reads: each `.entry name(` is a kernel of the kernels library. It
/// ends with a NUL: the fake reads it as a C string (a real code object is an ELF image, whose
/// headers give its size).
const HSACO: &str = "amdgcn-amd-amdhsa--gfx90a\n.entry add_one(\n.entry scalars(\n\
    .entry record_launch(\n.entry launch_fails(\n.entry faults(\n\0";

/// The metadata, with kernels that run `record_launch` under other launch tags.
fn functions() -> BTreeMap<String, FunctionInfo> {
    let mut map = function_map_from_json(FAKE_KERNELS_META).unwrap();
    let probes: [(&str, &[&str]); 4] = [
        (
            "probe",
            &[
                "blockIdx.x",
                "blockIdx.z",
                "threadIdx.x",
                "threadIdx.y",
                "tirx.use_dyn_shared_memory",
            ],
        ),
        (
            "cooperative",
            &["blockIdx.x", "tirx.use_cooperative_launch"],
        ),
        ("clustered", &["clusterCtaIdx.x"]),
        ("dependent", &["tirx.use_programtic_dependent_launch"]),
    ];
    for (name, tags) in probes {
        let info = FunctionInfo {
            name: "record_launch".into(),
            arg_types: vec![DataType::handle()],
            launch_param_tags: tags.iter().map(|t| t.to_string()).collect(),
            arg_extra_tags: Vec::new(),
        };
        map.insert(name.to_owned(), info);
    }
    // `scalars` launched cooperatively: its arguments travel as addresses, not as a blob.
    let mut scalars = map["scalars"].clone();
    scalars.launch_param_tags = vec!["blockIdx.x".into(), "tirx.use_cooperative_launch".into()];
    map.insert("cooperative_scalars".to_owned(), scalars);
    map
}

struct Setup {
    fake: FakeDriver,
    api: RocmDeviceApi,
    module: Module,
}

fn setup(code: &str) -> Setup {
    let (fake, backend, api) = fake_api();
    let module = DeviceModule::new(backend, "hsaco", functions(), code.as_bytes().to_vec())
        .map(Module::new)
        .unwrap();
    Setup { fake, api, module }
}

impl Setup {
    fn kernel(&self, name: &str) -> Function {
        self.module.get_function_required(name).unwrap()
    }
}

fn ptr(p: *mut u8) -> Any {
    Any::from(p.cast::<c_void>())
}

#[test]
fn add_one_from_an_hsaco_file_and_its_metadata() {
    let (fake, _backend, api) = fake_api();
    let code = ("hsaco", HSACO.as_bytes());
    // Grid 3 x block 2 covers 6 of the 10 elements.
    device_kit::testing::assert_add_one_from_file(&api, &fake, code, FAKE_KERNELS_META, [3, 2]);
}

#[test]
fn modules_round_trip_through_their_serialized_form() {
    let (_fake, backend, _api) = fake_api();
    let code = ("hsaco", HSACO.as_bytes());
    device_kit::testing::assert_round_trip(backend, code, &functions(), "scalars", "ptx");
}

#[test]
fn grid_block_and_dynamic_shared_memory_reach_hip_on_the_current_stream() {
    let setup = setup(HSACO);
    let out = alloc(&setup.api, rocm(1), 16);
    let stream = setup.api.create_stream(rocm(1)).unwrap();
    let previous = set_current_stream(rocm(1), stream).unwrap();
    // The tensor argument (a DLTensor pointer on rocm:1) decides the device.
    let mut shape = [16i64];
    let mut tensor = f32_tensor(out, rocm(1), &mut shape, None);
    let raw = tvm_ffi::abi::TVMFFIAny {
        type_index: tvm_ffi::abi::kTVMFFIDLTensorPtr,
        small_str_len: 0,
        payload: tvm_ffi::abi::TVMFFIAnyPayload {
            v_ptr: (&mut tensor as *mut tvm_ffi::abi::DLTensor).cast(),
        },
    };
    // SAFETY: the descriptor outlives the call.
    let mut args = vec![unsafe { AnyView::from_raw(raw) }];
    let launch = [4i64, 3, 64, 2, 60 << 10].map(Any::from);
    args.extend(launch.iter().map(Any::as_view));
    let launched = setup.kernel("probe").call_packed(&args);
    set_current_stream(rocm(1), previous).unwrap();
    launched.unwrap();
    let mut dims = [0f32; 16];
    transfer(&setup.api, rocm(1), &mut dims, out, false, stream);
    let dims = dims.map(f32::to_bits);
    assert_eq!(&dims[..8], &[4, 1, 3, 64, 2, 1, 60 << 10, 0]);
    assert_eq!(
        dims[15], stream.0 as usize as u32,
        "queued on the current stream"
    );
    // More dynamic shared memory than the device has is HIP's error, with the launch.
    let err = setup
        .kernel("probe")
        .call((ptr(out), 1i64, 1i64, 1i64, 1i64, 65i64 << 10))
        .unwrap_err();
    assert!(
        err.message().contains("hipErrorInvalidValue")
            && err.message().contains("dynamic shared memory=66560"),
        "{err}"
    );
    // SAFETY: created above.
    unsafe { setup.api.free_stream(rocm(1), stream).unwrap() };
}

#[test]
fn cooperative_launches_go_through_hip_s_cooperative_entry_point() {
    let setup = setup(HSACO);
    let out = alloc(&setup.api, rocm(1), 16);
    let stream = setup.api.create_stream(rocm(1)).unwrap();
    let previous = set_current_stream(rocm(1), stream).unwrap();
    // The tensor argument (a DLTensor pointer on rocm:1) decides the device.
    let mut shape = [16i64];
    let mut tensor = f32_tensor(out, rocm(1), &mut shape, None);
    let raw = tvm_ffi::abi::TVMFFIAny {
        type_index: tvm_ffi::abi::kTVMFFIDLTensorPtr,
        small_str_len: 0,
        payload: tvm_ffi::abi::TVMFFIAnyPayload {
            v_ptr: (&mut tensor as *mut tvm_ffi::abi::DLTensor).cast(),
        },
    };
    let grid = Any::from(5i64);
    // SAFETY: the descriptor outlives the call.
    let args = [unsafe { AnyView::from_raw(raw) }, grid.as_view()];
    let launched = setup.kernel("cooperative").call_packed(&args);
    set_current_stream(rocm(1), previous).unwrap();
    launched.unwrap();
    let mut dims = [0f32; 16];
    transfer(&setup.api, rocm(1), &mut dims, out, false, stream);
    let dims = dims.map(f32::to_bits);
    assert_eq!(&dims[..8], &[5, 1, 1, 1, 1, 1, 0, 1], "cooperative, grid 5");
    assert_eq!(
        dims[15], stream.0 as usize as u32,
        "queued on the current stream"
    );
    // SAFETY: created above.
    unsafe { setup.api.free_stream(rocm(1), stream).unwrap() };

    // Scalars of each size reach the kernel through their addresses.
    let out = alloc(&setup.api, rocm(0), 10);
    setup
        .kernel("cooperative_scalars")
        .call((
            ptr(out),
            -7i64,
            4_000_000_000i64,
            0.5f64,
            2.25f64,
            -(1i64 << 40),
            2i64,
        ))
        .unwrap();
    let mut values = [0f32; 10];
    transfer(
        &setup.api,
        rocm(0),
        &mut values,
        out,
        false,
        StreamHandle::NULL,
    );
    let doubles: Vec<f64> = values
        .chunks(2)
        .map(|p| f64::from_bits(u64::from(p[0].to_bits()) | (u64::from(p[1].to_bits()) << 32)))
        .collect();
    assert_eq!(doubles, [-7.0, 4e9, 0.5, 2.25, -(2f64.powi(40))]);

    // A grid that cannot be resident at once is HIP's error, with the launch.
    let err = setup
        .kernel("cooperative")
        .call((ptr(out), 1000i64))
        .unwrap_err();
    assert!(
        err.message()
            .contains("ROCm launch of kernel `record_launch` on rocm:0 failed (grid=(1000, 1, 1)")
            && err
                .message()
                .contains("hipErrorCooperativeLaunchTooLarge (720)"),
        "{err}"
    );
}

#[test]
fn a_runtime_without_cooperative_launch_says_so_and_plain_launches_work() {
    let fake = build_fake(&["FAKE_NO_COOPERATIVE_LAUNCH"]);
    let backend = backend(&fake);
    let api = RocmDeviceApi::new(backend.clone());
    let module = Module::new(
        DeviceModule::new(backend, "hsaco", functions(), HSACO.as_bytes().to_vec()).unwrap(),
    );
    let out = alloc(&api, rocm(0), 16);
    let err = module
        .get_function_required("cooperative")
        .unwrap()
        .call((ptr(out), 2i64))
        .unwrap_err();
    assert!(
        err.is_kind(ErrorKind::RuntimeError)
            && err.message().contains(
                "a cooperative launch needs hipModuleLaunchCooperativeKernel, which this HIP \
                 runtime lacks"
            ),
        "{err}"
    );
    module
        .get_function_required("probe")
        .unwrap()
        .call((ptr(out), 1i64, 1i64, 1i64, 1i64, 0i64))
        .unwrap();
}

#[test]
fn cluster_and_programmatic_launches_are_refused_by_name() {
    let setup = setup(HSACO);
    let out = alloc(&setup.api, rocm(0), 16);
    let err = setup
        .kernel("clustered")
        .call((ptr(out), 2i64))
        .unwrap_err();
    assert!(
        err.is_kind(ErrorKind::ValueError)
            && err.message().contains(
                "kernel `record_launch` asks for thread block clusters (clusterCtaIdx / \
                 preferredClusterCtaIdx), which the ROCm backend does not support"
            ),
        "{err}"
    );
    let err = setup.kernel("dependent").call((ptr(out),)).unwrap_err();
    assert!(
        err.message()
            .contains("asks for programmatic dependent launch"),
        "{err}"
    );
}

#[test]
fn scalars_are_narrowed_and_packed_aligned_into_one_blob() {
    let setup = setup(HSACO);
    device_kit::testing::assert_scalars_packed(&setup.api, &setup.kernel("scalars"));
}

#[test]
fn launch_failures_carry_hip_s_error_the_kernel_and_its_dimensions() {
    let setup = setup(HSACO);
    let err = setup.kernel("launch_fails").call((5i64,)).unwrap_err();
    assert!(
        err.message()
            .contains("hipErrorLaunchFailure (719): unspecified launch failure")
            && err
                .message()
                .contains("ROCm launch of kernel `launch_fails` on rocm:0")
            && err.message().contains("grid=(5, 1, 1), block=(1, 1, 1)"),
        "{err}"
    );
    // A kernel that faults while running shows when its stream is synchronized.
    setup.kernel("faults").call(()).unwrap();
    let err = setup
        .api
        .sync_stream(rocm(0), StreamHandle::NULL)
        .unwrap_err();
    assert!(err.message().contains("hipErrorLaunchFailure"), "{err}");
    // The device keeps working.
    let device = alloc(&setup.api, rocm(0), 1);
    let mut one = [1f32];
    transfer(
        &setup.api,
        rocm(0),
        &mut one,
        device,
        true,
        StreamHandle::NULL,
    );
    setup
        .kernel("add_one")
        .call((ptr(device), 1i64, 1i64, 1i64))
        .unwrap();
    transfer(
        &setup.api,
        rocm(0),
        &mut one,
        device,
        false,
        StreamHandle::NULL,
    );
    assert_eq!(one, [2.0]);
}

#[test]
fn a_kernel_missing_from_the_code_and_code_for_another_gpu_are_errors() {
    let loaded = setup(HSACO);
    let err = loaded.kernel("not_in_code").call(()).unwrap_err();
    assert!(
        err.message().contains(
            "kernel `not_in_code` is not in the module loaded on rocm:0: hipErrorNotFound (500)"
        ),
        "{err}"
    );
    let other_gpu = setup(&HSACO.replace("gfx90a", "gfx999"));
    let err = other_gpu.kernel("faults").call(()).unwrap_err();
    assert!(
        err.message().contains("loading the hsaco module on rocm:0")
            && err.message().contains("hipErrorNoBinaryForGpu (209)"),
        "{err}"
    );
    assert_eq!(other_gpu.fake.live("modules"), 0);
}

#[test]
fn tensors_of_other_devices_are_refused() {
    let setup = setup(HSACO);
    device_kit::testing::assert_argument_refusals(&setup.kernel("add_one"));
}
