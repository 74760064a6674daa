//! Set-up shared by the WebGPU test binaries: the registered backend (skipping where no adapter
//! is present), the test shaders and their metadata, device tensors.

#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use device_kit::buffer::BufferBackend;
use device_kit::kernel::FunctionInfo;
use device_webgpu::{WebGpuDeviceApi, module_to_bytes};
use tvm_ffi::{DataType, Device, Function, Tensor};
use tvm_runtime::Module;
use tvm_runtime::device::{TensorDeviceExt, empty_on};

/// The registered backend, if an adapter is present (prints why not otherwise).
pub fn api() -> Option<Arc<WebGpuDeviceApi>> {
    static API: OnceLock<Arc<WebGpuDeviceApi>> = OnceLock::new();
    let api = API.get_or_init(|| {
        tvm_runtime::init();
        Arc::new(WebGpuDeviceApi::new(
            device_webgpu::register().expect("registered once"),
        ))
    });
    match api.device_names() {
        Ok(_) => Some(Arc::clone(api)),
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

pub fn assert_quiet(api: &WebGpuDeviceApi) {
    let errors = api.uncaptured_errors();
    assert!(errors.is_empty(), "uncaptured wgpu errors: {errors:#?}");
}

pub fn webgpu0() -> Device {
    Device::webgpu(0)
}

pub fn shader(name: &str) -> String {
    let path = format!("{}/tests/shaders/{name}.wgsl", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).expect("shader file")
}

pub fn info(name: &str, args: Vec<DataType>, tags: &[&str]) -> FunctionInfo {
    FunctionInfo {
        name: name.into(),
        arg_types: args,
        launch_param_tags: tags.iter().map(|t| t.to_string()).collect(),
        arg_extra_tags: vec![],
    }
}

pub fn add_one_info() -> FunctionInfo {
    let h = DataType::handle();
    info(
        "add_one",
        vec![h, h, DataType::int(32)],
        &["blockIdx.x", "threadIdx.x"],
    )
}

pub fn load(kernels: &[(FunctionInfo, String)]) -> tvm_ffi::Result<Module> {
    let loader = Function::get_global("ffi.Module.load_from_bytes.webgpu").expect("registered");
    let bytes = module_to_bytes(kernels);
    loader.call((tvm_ffi::Bytes::from(&bytes[..]),))?.cast()
}

pub fn device_tensor<T: tvm_ffi::tensor::Element>(values: &[T], dtype: DataType) -> Tensor {
    let t = empty_on(&[values.len() as i64], dtype, webgpu0()).unwrap();
    t.copy_from_slice(values).unwrap();
    t
}
