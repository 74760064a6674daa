//! Integration tests of the WebGPU backend on whatever adapter wgpu finds (Mesa lavapipe through
//! Vulkan in CI). Each test prints why it is skipped and returns when no adapter is present; each
//! ends by asserting that wgpu reported no error outside the calls that captured theirs.

// This binary is a final artifact: it links the process state.
use tvm_ffi_capi as _;

mod common;

use common::{add_one_info, api, assert_quiet, device_tensor, info, load, shader, webgpu0};
use device_kit::buffer::BufferBackend;
use device_kit::kernel::FunctionInfo;
use tvm_ffi::{DataType, Device};
use tvm_runtime::async_functions::block_on;
use tvm_runtime::device::{TensorDeviceExt, empty_on};

#[test]
fn devices_have_names_and_missing_indices_say_what_is_present() {
    let Some(api) = api() else { return };
    let names = api.device_names().unwrap();
    assert!(!names.is_empty());
    let err = empty_on(&[4], DataType::float(32), Device::webgpu(99)).unwrap_err();
    assert!(
        err.message()
            .contains("no WebGPU device 99; present: [webgpu:0"),
        "{err}"
    );
    assert_quiet(&api);
}

#[test]
fn odd_sizes_round_trip_and_unsupported_dtypes_are_refused() {
    let Some(api) = api() else { return };
    for n in [1usize, 3, 7, 1000] {
        let values: Vec<f32> = (0..n).map(|i| i as f32 - 2.5).collect();
        assert_eq!(
            device_tensor(&values, DataType::float(32))
                .to_vec::<f32>()
                .unwrap(),
            values
        );
        let ints: Vec<i32> = (0..n as i32).map(|i| -i * 7).collect();
        assert_eq!(
            device_tensor(&ints, DataType::int(32))
                .to_vec::<i32>()
                .unwrap(),
            ints
        );
    }
    let err = empty_on(&[4], DataType::int(8), webgpu0()).unwrap_err();
    assert_eq!(err.kind(), "TypeError");
    assert!(err.message().contains("cannot hold int8"), "{err}");
    assert_quiet(&api);
}

#[test]
fn add_one_runs_and_sync_is_a_future() {
    let Some(api) = api() else { return };
    let module = load(&[(add_one_info(), shader("add_one"))]).unwrap();
    assert_eq!(module.kind(), "webgpu");
    let add_one = module.get_function_required("add_one").unwrap();
    let values: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
    let a = device_tensor(&values, DataType::float(32));
    let b = device_tensor(&vec![0f32; 1000], DataType::float(32));
    add_one.call((a, b.clone(), 1000i64, 16i64, 64i64)).unwrap();
    block_on(device_webgpu::sync_async(&api, webgpu0()).unwrap()).unwrap();
    let expected: Vec<f32> = values.iter().map(|v| v + 1.0).collect();
    assert_eq!(b.to_vec::<f32>().unwrap(), expected);
    let host = empty_on(&[1000], DataType::float(32), Device::cpu(0)).unwrap();
    block_on(device_webgpu::copy_to_host_async(&api, b, host.clone()).unwrap()).unwrap();
    assert_eq!(host.to_vec::<f32>().unwrap(), expected);
    assert_quiet(&api);
}

#[test]
fn bad_shaders_and_metadata_are_refused_naming_the_kernel() {
    let Some(api) = api() else { return };
    let err = load(&[(add_one_info(), "fn add_one( {".into())]).unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    assert!(
        err.message().contains("kernel `add_one`") && err.message().contains("WGSL"),
        "{err}"
    );
    let renamed = FunctionInfo {
        name: "add_two".into(),
        ..add_one_info()
    };
    let err = load(&[(renamed, shader("add_one"))]).unwrap_err();
    assert!(
        err.message()
            .contains("`add_two` is not a compute entry point"),
        "{err}"
    );
    let one_tensor = info(
        "add_one",
        vec![DataType::handle(), DataType::int(32)],
        &["blockIdx.x", "threadIdx.x"],
    );
    let err = load(&[(one_tensor, shader("add_one"))]).unwrap_err();
    assert!(err.message().contains("does not match the shader"), "{err}");
    // The device is still usable.
    let module = load(&[(add_one_info(), shader("add_one"))]).unwrap();
    let a = device_tensor(&[1f32, 2.0], DataType::float(32));
    let b = device_tensor(&[0f32, 0.0], DataType::float(32));
    let add_one = module.get_function_required("add_one").unwrap();
    let err = add_one
        .call((a.clone(), b.clone(), 2i64, 0i64, 64i64))
        .unwrap_err();
    assert!(err.message().contains("blockIdx.x is 0"), "{err}");
    add_one.call((a, b.clone(), 2i64, 1i64, 64i64)).unwrap();
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![2.0, 3.0]);
    assert_quiet(&api);
}

#[test]
fn set_raw_stream_refuses_what_sync_refuses() {
    let Some(api) = api() else { return };
    device_kit::testing::assert_default_stream_only(webgpu0(), "WebGPU");
    assert_quiet(&api);
}

/// A read-only view of `tensor`: its export flagged read-only, imported again.
fn read_only_view(tensor: &tvm_ffi::Tensor) -> tvm_ffi::Tensor {
    let managed = tensor.to_dlpack_versioned();
    // SAFETY: a fresh export, ours until the import takes it.
    unsafe {
        (*managed).flags |= tvm_ffi::abi::DLPACK_FLAG_BITMASK_READ_ONLY;
        tvm_ffi::Tensor::from_dlpack_versioned(managed, 0, false).unwrap()
    }
}

#[test]
fn a_read_only_tensor_is_refused_as_a_written_binding_and_as_a_copy_target() {
    let Some(api) = api() else { return };
    let module = load(&[(add_one_info(), shader("add_one"))]).unwrap();
    let add_one = module.get_function_required("add_one").unwrap();
    let a = device_tensor(&[1f32, 2.0, 3.0], DataType::float(32));
    let b = device_tensor(&[0f32; 3], DataType::float(32));
    let (a_read_only, b_read_only) = (read_only_view(&a), read_only_view(&b));
    assert!(b_read_only.is_read_only());
    let err = add_one
        .call((a.clone(), b_read_only.clone(), 3i64, 1i64, 64i64))
        .unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    assert!(
        err.message().contains("argument 1 is read-only") && err.message().contains("read_write"),
        "{err}"
    );
    let err = b_read_only.copy_from_slice(&[9f32; 3]).unwrap_err();
    assert!(
        err.message()
            .starts_with("assignment destination is read-only"),
        "{err}"
    );
    assert_eq!(b.to_vec::<f32>().unwrap(), [0.0; 3]);
    // Reading a read-only tensor is fine: as the kernel's input, and copied out.
    add_one
        .call((a_read_only.clone(), b, 3i64, 1i64, 64i64))
        .unwrap();
    assert_eq!(a_read_only.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    assert_quiet(&api);
}
