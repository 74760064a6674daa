//! `ffi.ContainerFindFirstNonCPUDevice`: the first non-CPU tensor inside nested containers.

use std::ffi::c_void;

use tvm_ffi::abi::{self, DLTensor};
use tvm_ffi::containers::devices::first_non_cpu_device;
use tvm_ffi::containers::map::{Dict, Map};
use tvm_ffi::{Any, Array, Device, Function, List, Tensor};

unsafe extern "C" fn release_nothing(_record: *mut c_void) {}

/// A one-element float32 tensor that claims to live on `device` (its data is static host
/// memory that is never read).
fn tensor_on(device_type: i32, device_id: i32) -> Any {
    static DATA: [f32; 1] = [0.0];
    static SHAPE: [i64; 1] = [1];
    let prototype = DLTensor {
        data: DATA.as_ptr().cast_mut().cast(),
        device: abi::DLDevice {
            device_type,
            device_id,
        },
        ndim: 1,
        dtype: abi::DLDataType {
            code: abi::kDLFloat,
            bits: 32,
            lanes: 1,
        },
        shape: SHAPE.as_ptr().cast_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    // SAFETY: the prototype describes static memory; there is nothing to release.
    let tensor = unsafe { Tensor::from_foreign(&prototype, true, &mut [], release_nothing) };
    Any::from(tensor.expect("a tensor"))
}

fn find(value: impl Into<Any>) -> Device {
    let f = Function::get_global("ffi.ContainerFindFirstNonCPUDevice").expect("registered");
    f.call((value.into(),)).unwrap().cast::<Device>().unwrap()
}

#[test]
fn defaults_to_cpu_zero() {
    assert_eq!(find(1i64), Device::new(abi::kDLCPU, 0));
    assert_eq!(find(()), Device::new(abi::kDLCPU, 0));
    assert_eq!(find(tensor_on(abi::kDLCPU, 3)), Device::new(abi::kDLCPU, 0));
    let cpu_only = Array::from_vec(vec![tensor_on(abi::kDLCPU, 0), Any::from("x")]);
    assert_eq!(find(cpu_only), Device::new(abi::kDLCPU, 0));
}

#[test]
fn a_tensor_itself_and_the_first_in_order() {
    assert_eq!(
        find(tensor_on(abi::kDLCUDA, 2)),
        Device::new(abi::kDLCUDA, 2)
    );
    let nested = Array::from_vec(vec![
        tensor_on(abi::kDLCPU, 0),
        Any::from(Array::from_vec(vec![tensor_on(abi::kDLROCM, 1)])),
        tensor_on(abi::kDLCUDA, 5),
    ]);
    assert_eq!(find(nested), Device::new(abi::kDLROCM, 1));
}

#[test]
fn map_and_dict_values_are_searched_not_keys() {
    let dict = Dict::new();
    dict.insert(tensor_on(abi::kDLCUDA, 1), 0i64);
    assert_eq!(find(dict.clone()), Device::new(abi::kDLCPU, 0));
    dict.insert("t", tensor_on(abi::kDLCUDA, 4));
    assert_eq!(find(dict.clone()), Device::new(abi::kDLCUDA, 4));

    let map = Any::from(dict).cast::<Map>().unwrap();
    let list: List = [Any::from(map)].into_iter().collect();
    assert_eq!(find(list), Device::new(abi::kDLCUDA, 4));
}

#[test]
fn cycles_and_deep_nesting_end() {
    // A list that contains itself, and a non-CPU tensor after it.
    let list = List::new();
    list.push(list.clone());
    assert_eq!(find(list.clone()), Device::new(abi::kDLCPU, 0));
    list.push(tensor_on(abi::kDLCUDA, 7));
    assert_eq!(
        first_non_cpu_device(&Any::from(list.clone()).as_view()),
        Some(Device::new(abi::kDLCUDA, 7))
    );
    list.clear();

    // 100,000 levels of nesting do not exhaust the stack.
    let mut value = tensor_on(abi::kDLCUDA, 9);
    for _ in 0..100_000 {
        value = Any::from(Array::from_vec(vec![value]));
    }
    assert_eq!(find(value.clone()), Device::new(abi::kDLCUDA, 9));
}
