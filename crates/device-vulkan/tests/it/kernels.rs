//! Kernels compiled from GLSL at test time, loaded from the serialized form and from a `.spv`
//! file with its metadata, launched through the packed-function convention.

use tvm_ffi::{Any, DataType, Function, Tensor};
use tvm_runtime::Module;
use tvm_runtime::device::{TensorDeviceExt, empty_on};

use crate::common::{api, assert_quiet, compile_shader, shader_words, vulkan0};
use device_kit::kernel::FunctionInfo;
use device_vulkan::{SpirvShader, module_to_bytes};

/// The metadata of `add_one(a, b, n)`.
pub fn add_one_info() -> FunctionInfo {
    FunctionInfo {
        name: "add_one".into(),
        arg_types: vec![DataType::handle(), DataType::handle(), DataType::int(32)],
        launch_param_tags: vec!["blockIdx.x".into(), "threadIdx.x".into()],
        arg_extra_tags: vec![],
    }
}

/// The serialized `vulkan` module of `add_one` and `scale_2d`.
pub fn module_bytes() -> Option<Vec<u8>> {
    let scale = FunctionInfo {
        name: "scale_2d".into(),
        arg_types: vec![
            DataType::handle(),
            DataType::handle(),
            DataType::int(32),
            DataType::int(32),
            DataType::int(64),
            DataType::float(32),
        ],
        launch_param_tags: ["blockIdx.x", "blockIdx.y", "threadIdx.x", "threadIdx.y"]
            .map(String::from)
            .to_vec(),
        arg_extra_tags: vec![],
    };
    let shader = |name| shader_words(name).map(|words| SpirvShader { flag: 0, words });
    Some(module_to_bytes(&[
        (add_one_info(), shader("add_one")?),
        (scale, shader("scale_2d")?),
    ]))
}

/// The module loaded through `ffi.Module.load_from_bytes.vulkan`, as an embedding library's.
pub fn load_module() -> Option<Module> {
    let bytes = module_bytes()?;
    let loader = Function::get_global("ffi.Module.load_from_bytes.vulkan").expect("registered");
    Some(
        loader
            .call((tvm_ffi::Bytes::from(&bytes[..]),))
            .unwrap()
            .cast()
            .unwrap(),
    )
}

/// Device tensors of `values` and of as many zeros.
pub fn input_and_output(values: &[f32]) -> (Tensor, Tensor) {
    let n = values.len() as i64;
    let a = empty_on(&[n], DataType::float(32), vulkan0()).unwrap();
    a.copy_from_slice(values).unwrap();
    let b = empty_on(&[n], DataType::float(32), vulkan0()).unwrap();
    b.copy_from_slice(&vec![0f32; values.len()]).unwrap();
    (a, b)
}

/// Runs `add_one` of `module` on 1000 values and checks the result.
pub fn check_add_one(module: &Module) {
    let add_one = module.get_function_required("add_one").unwrap();
    let values: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
    let (a, b) = input_and_output(&values);
    let blocks = values.len().div_ceil(64) as i64;
    add_one
        .call((a.clone(), b.clone(), values.len() as i64, blocks, 64i64))
        .unwrap();
    let out = b.to_vec::<f32>().unwrap();
    let expected: Vec<f32> = values.iter().map(|v| v + 1.0).collect();
    assert_eq!(out, expected);
}

#[test]
fn add_one_runs_from_the_serialized_module() {
    let Some(api) = api() else { return };
    let Some(module) = load_module() else { return };
    assert_eq!(module.kind(), "vulkan");
    check_add_one(&module);
    assert_quiet(&api);
}

#[test]
fn add_one_runs_from_a_spv_file_and_its_metadata() {
    let Some(api) = api() else { return };
    let Some(spv) = compile_shader("add_one") else {
        return;
    };
    let meta = spv.with_extension("tvm_meta.json");
    std::fs::write(
        &meta,
        r#"{"tvm_version": "0.1.0", "func_info": {"add_one": {"name": "add_one",
            "arg_types": ["handle", "handle", "int32"],
            "launch_param_tags": ["blockIdx.x", "threadIdx.x"]}}}"#,
    )
    .unwrap();
    let module = tvm_runtime::load_module(&spv).unwrap();
    check_add_one(&module);
    assert_quiet(&api);
}

#[test]
fn a_strided_2d_kernel_reads_rows_with_a_stride() {
    let Some(api) = api() else { return };
    let Some(module) = load_module() else { return };
    let scale = module.get_function_required("scale_2d").unwrap();
    let (rows, cols, stride) = (13usize, 10usize, 16usize);
    let source: Vec<f32> = (0..rows * stride).map(|i| i as f32).collect();
    let src = empty_on(&[(rows * stride) as i64], DataType::float(32), vulkan0()).unwrap();
    src.copy_from_slice(&source).unwrap();
    let dst = empty_on(&[rows as i64, cols as i64], DataType::float(32), vulkan0()).unwrap();
    let grid = |n: usize| n.div_ceil(8) as i64;
    let args: Vec<Any> = vec![
        src.into(),
        dst.clone().into(),
        Any::from(rows as i64),
        Any::from(cols as i64),
        Any::from(stride as i64),
        Any::from(2.0f64),
        Any::from(grid(cols)),
        Any::from(grid(rows)),
        Any::from(8i64),
        Any::from(8i64),
    ];
    scale
        .call_packed(&args.iter().map(Any::as_view).collect::<Vec<_>>())
        .unwrap();
    let out = dst.to_vec::<f32>().unwrap();
    for r in 0..rows {
        for c in 0..cols {
            assert_eq!(
                out[r * cols + c],
                2.0 * source[r * stride + c],
                "({r}, {c})"
            );
        }
    }
    assert_quiet(&api);
}

#[test]
fn launches_beyond_one_batch_run_in_order() {
    let Some(api) = api() else { return };
    let Some(module) = load_module() else { return };
    let add_one = module.get_function_required("add_one").unwrap();
    let (a, b) = input_and_output(&[0.0; 100]);
    // 300 launches alternate a → b and b → a, more than one batch holds: each sees the last.
    for i in 0..300 {
        let (x, y) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        add_one
            .call((x.clone(), y.clone(), 100i64, 2i64, 64i64))
            .unwrap();
    }
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![300.0f32; 100]);
    assert_quiet(&api);
}

/// `scale_ubo` (scalars in a uniform buffer, shader flag 1) as a serialized module.
fn ubo_module() -> Option<Module> {
    let info = FunctionInfo {
        name: "scale_ubo".into(),
        arg_types: vec![
            DataType::handle(),
            DataType::handle(),
            DataType::int(32),
            DataType::float(32),
            DataType::int(32),
        ],
        launch_param_tags: vec!["blockIdx.x".into(), "threadIdx.x".into()],
        arg_extra_tags: vec![],
    };
    let shader = SpirvShader {
        flag: 1,
        words: shader_words("scale_ubo")?,
    };
    let bytes = module_to_bytes(&[(info, shader)]);
    let api = api()?;
    Some(device_vulkan::module_from_bytes(api.backend().clone(), &bytes).unwrap())
}

#[test]
fn scalars_in_a_uniform_buffer_reach_each_launch() {
    let Some(api) = api() else { return };
    let Some(module) = ubo_module() else { return };
    let scale = module.get_function_required("scale_ubo").unwrap();
    let values: Vec<f32> = (0..200).map(|i| i as f32).collect();
    let (a, b) = input_and_output(&values);
    // Launches of one batch with different scalars: each keeps its own params block.
    let outputs: Vec<Tensor> = (0..3)
        .map(|_| empty_on(&[200], DataType::float(32), vulkan0()).unwrap())
        .collect();
    for (k, out) in outputs.iter().enumerate() {
        scale
            .call((
                a.clone(),
                out.clone(),
                200i64,
                k as f64 + 0.5,
                -(k as i64),
                4i64,
                64i64,
            ))
            .unwrap();
    }
    scale
        .call((a.clone(), b.clone(), 150i64, 2.0f64, 7i64, 3i64, 64i64))
        .unwrap();
    for (k, out) in outputs.iter().enumerate() {
        let expected: Vec<f32> = values
            .iter()
            .map(|v| v * (k as f32 + 0.5) - k as f32)
            .collect();
        assert_eq!(out.to_vec::<f32>().unwrap(), expected, "launch {k}");
    }
    let out = b.to_vec::<f32>().unwrap();
    assert_eq!(out[149], 149.0 * 2.0 + 7.0);
    assert_eq!(out[150], 0.0, "n bounds the kernel");
    assert_quiet(&api);
}
