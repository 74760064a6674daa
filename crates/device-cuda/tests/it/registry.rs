//! The backend registered for `cuda` and `cuda_host`: tensors, copies through the registry, and
//! the module loaders (files and embedded bytes).

use std::sync::OnceLock;

use device_kit::driver::module::serialize;
use device_kit::kernel::function_map_from_json;
use device_kit::testing::ADD_ONE_META;
use tvm_ffi::{Bytes, DataType, Function, Tensor};
use tvm_runtime::device::{TensorDeviceExt, device_exists};

use super::*;

const PTX: &str = ".version 7.0\n.target sm_52\n.visible .entry add_one(.param .u64 x) { ret; }\n";

/// Registers a fake driver as the process's CUDA backend (once).
fn registered() -> &'static Fake {
    static FAKE: OnceLock<Fake> = OnceLock::new();
    FAKE.get_or_init(|| {
        tvm_runtime::init();
        let fake = build_fake(&[]);
        device_cuda::register_backend(fake.backend()).unwrap();
        fake
    })
}

#[test]
fn tensors_copy_through_the_registry_and_kernels_take_them() {
    let fake = registered();
    assert!(device_exists(cuda(1)) && !device_exists(cuda(2)));
    assert!(device_exists(Device::new(3, 0)));
    let host = Tensor::from_slice(&[1f32, 2.0, 3.0], &[3]).unwrap();
    let on_device = host.copy_to(cuda(1)).unwrap();
    assert_eq!(on_device.device(), cuda(1));
    let path = fake.dir.join("registered.ptx");
    std::fs::write(&path, PTX).unwrap();
    std::fs::write(fake.dir.join("registered.tvm_meta.json"), ADD_ONE_META).unwrap();
    let module = tvm_runtime::load_module(&path).unwrap();
    let add_one = module.get_function_required("add_one").unwrap();
    add_one.call((on_device.clone(), 3i64, 1i64, 3i64)).unwrap();
    let back = on_device.copy_to(cpu()).unwrap();
    assert_eq!(back.as_slice::<f32>().unwrap(), &[2.0, 3.0, 4.0]);
    // The tensor decides the device: the same kernel runs on cuda:0 for a tensor there.
    let zeros = Tensor::from_slice(&[0f32; 3], &[3])
        .unwrap()
        .copy_to(cuda(0))
        .unwrap();
    add_one.call((zeros.clone(), 3i64, 1i64, 3i64)).unwrap();
    let back = zeros.copy_to(cpu()).unwrap();
    assert_eq!(back.as_slice::<f32>().unwrap(), &[1.0; 3]);
    assert_eq!(fake.live("modules"), 2, "loaded once per device");
    let empty = Tensor::empty(&[2], DataType::float(32), Device::new(3, 0)).unwrap();
    assert_eq!(empty.device(), Device::new(3, 0));
}

#[test]
fn embedded_modules_load_through_the_bytes_loader() {
    registered();
    let loader = Function::get_global("ffi.Module.load_from_bytes.cuda").unwrap();
    let bytes = serialize(
        "ptx",
        &function_map_from_json(ADD_ONE_META).unwrap(),
        PTX.as_bytes(),
    );
    let module: tvm_runtime::Module = loader.call((Bytes::from(bytes),)).unwrap().cast().unwrap();
    assert_eq!(module.kind(), "cuda");
    assert!(module.implements_function("add_one").unwrap());
}

#[test]
fn nvrtc_compile_is_registered_and_names_the_missing_library() {
    registered();
    let compile = Function::get_global("tvm.support.nvrtc_compile").unwrap();
    let options = tvm_ffi::Array::from_iter([tvm_ffi::Any::from("--gpu-architecture=compute_90")]);
    match compile.call(("extern \"C\" __global__ void k() {}", options)) {
        // A machine with NVRTC compiles the kernel to PTX.
        Ok(ptx) => {
            let ptx: Bytes = ptx.cast().unwrap();
            assert!(String::from_utf8_lossy(ptx.as_bytes()).contains(".entry k"));
        }
        Err(err) => assert!(
            err.message().contains("NVRTC not found") && err.message().contains("libnvrtc.so"),
            "{err}"
        ),
    }
}
