//! A lost device, in a test binary of its own (its loss would fail the other tests' calls):
//! calls on it are errors naming what was attempted and the loss, its tensors can still be
//! freed, and the next use of its index gets a new device that works.

// This binary is a final artifact: it links the process state.
use tvm_ffi_capi as _;

mod common;

use common::{add_one_info, api, assert_quiet, device_tensor, load, shader, webgpu0};
use tvm_ffi::DataType;
use tvm_runtime::device::TensorDeviceExt;

#[test]
fn a_lost_device_fails_clearly_and_its_index_gets_a_working_device() {
    let Some(api) = api() else { return };
    let module = load(&[(add_one_info(), shader("add_one"))]).unwrap();
    let add_one = module.get_function_required("add_one").unwrap();
    let values: Vec<f32> = (0..100).map(|i| i as f32).collect();
    let a = device_tensor(&values, DataType::float(32));
    let b = device_tensor(&[0f32; 100], DataType::float(32));
    add_one
        .call((a.clone(), b.clone(), 100i64, 2i64, 64i64))
        .unwrap();

    assert!(api.release_device(webgpu0()).unwrap());
    assert!(!api.release_device(webgpu0()).unwrap(), "released once");
    let err = add_one
        .call((a.clone(), b.clone(), 100i64, 2i64, 64i64))
        .unwrap_err();
    assert_eq!(err.kind(), "RuntimeError", "{err}");
    assert!(
        err.message().contains("kernel `add_one` on webgpu:0")
            && err.message().contains("was lost"),
        "{err}"
    );
    let err = b.to_vec::<f32>().unwrap_err();
    assert!(err.message().contains("was lost"), "{err}");
    drop((a, b));

    // The index works again, on a new device, with the same module.
    let a = device_tensor(&values, DataType::float(32));
    let b = device_tensor(&[0f32; 100], DataType::float(32));
    add_one.call((a, b.clone(), 100i64, 2i64, 64i64)).unwrap();
    let expected: Vec<f32> = values.iter().map(|v| v + 1.0).collect();
    assert_eq!(b.to_vec::<f32>().unwrap(), expected);
    assert_quiet(&api);
}
