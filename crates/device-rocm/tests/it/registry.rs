//! The backend registered for `rocm` and `rocm_host`: tensors, copies through the registry, and
//! the module loaders (files and embedded bytes under each key).

use std::sync::OnceLock;

use device_kit::driver::module::serialize;
use device_kit::kernel::function_map_from_json;
use device_kit::testing::ADD_ONE_META;
use tvm_ffi::{Bytes, DataType, Function, Tensor};
use tvm_runtime::device::{TensorDeviceExt, device_exists};

use super::*;

// NUL-terminated: the fake reads its stand-in code object as a C string.
const HSACO: &str = "amdgcn-amd-amdhsa--gfx90a\n.entry add_one(\n\0";

/// Registers a fake HIP runtime as the process's ROCm backend (once).
fn registered() -> &'static FakeDriver {
    static FAKE: OnceLock<FakeDriver> = OnceLock::new();
    FAKE.get_or_init(|| {
        tvm_runtime::init();
        let fake = build_fake(&[]);
        device_rocm::register_backend(backend(&fake)).unwrap();
        fake
    })
}

#[test]
fn tensors_copy_through_the_registry_and_kernels_take_them() {
    let fake = registered();
    assert!(device_exists(rocm(1)) && !device_exists(rocm(2)));
    assert!(device_exists(Device::new(tvm_ffi::abi::kDLROCMHost, 0)));
    let path = fake.dir.join("registered.hsaco");
    std::fs::write(&path, HSACO).unwrap();
    std::fs::write(fake.dir.join("registered.tvm_meta.json"), ADD_ONE_META).unwrap();
    let module = tvm_runtime::load_module(&path).unwrap();
    assert_eq!(module.kind(), "hip");
    let add_one = module.get_function_required("add_one").unwrap();
    let on_device = Tensor::from_slice(&[1f32, 2.0, 3.0], &[3])
        .unwrap()
        .copy_to(rocm(1))
        .unwrap();
    assert_eq!(on_device.device(), rocm(1));
    add_one.call((on_device.clone(), 3i64, 1i64, 3i64)).unwrap();
    let back = on_device.copy_to(cpu()).unwrap();
    assert_eq!(back.as_slice::<f32>().unwrap(), &[2.0, 3.0, 4.0]);
    let pinned = Tensor::empty(&[2], DataType::float(32), Device::new(11, 0)).unwrap();
    assert_eq!(pinned.device(), Device::new(11, 0));
}

#[test]
fn embedded_modules_load_under_each_key() {
    registered();
    let bytes = serialize(
        "hsaco",
        &function_map_from_json(ADD_ONE_META).unwrap(),
        HSACO.as_bytes(),
    );
    for key in ["hip", "hsaco", "rocm"] {
        let loader = Function::get_global(&format!("ffi.Module.load_from_bytes.{key}")).unwrap();
        let module: tvm_runtime::Module = loader
            .call((Bytes::from(bytes.clone()),))
            .unwrap()
            .cast()
            .unwrap();
        assert_eq!(module.kind(), "hip");
        assert!(module.implements_function("add_one").unwrap());
    }
}
