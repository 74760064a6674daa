//! Bad input: each is an error of the right kind naming the kernel and the value, and the
//! device runs the next kernel normally.

use tvm_ffi::{DataType, Error, Function, Tensor};
use tvm_runtime::device::empty_on;

use crate::common::{api, assert_quiet, shader_words, vulkan0};
use crate::kernels::{add_one_info, check_add_one, input_and_output, load_module};
use device_vulkan::{SpirvShader, module_to_bytes};

fn load(bytes: &[u8]) -> Result<tvm_runtime::Module, Error> {
    let loader = Function::get_global("ffi.Module.load_from_bytes.vulkan").expect("registered");
    loader.call((tvm_ffi::Bytes::from(bytes),))?.cast()
}

fn assert_error(result: Result<tvm_ffi::Any, Error>, kind: &str, needles: &[&str]) {
    let err = result.expect_err("an error");
    assert_eq!(err.kind(), kind, "{}", err.message());
    for needle in needles {
        assert!(
            err.message().contains(needle),
            "{needle:?} not in: {}",
            err.message()
        );
    }
}

#[test]
fn bad_launches_are_refused_and_the_device_stays_usable() {
    let Some(api) = api() else { return };
    let Some(module) = load_module() else { return };
    let add_one = module.get_function_required("add_one").unwrap();
    let (a, b) = input_and_output(&[1.0; 64]);
    let on_cpu = Tensor::from_slice(&[0f32; 64], &[64]).unwrap();
    let call = |args: (Tensor, Tensor, i64, i64, i64)| add_one.call(args);
    assert_error(
        call((on_cpu, b.clone(), 64, 1, 64)),
        "ValueError",
        &["add_one", "argument 0", "cpu:0"],
    );
    assert_error(
        call((a.clone(), b.clone(), 64, 0, 64)),
        "ValueError",
        &["add_one", "blockIdx.x is 0"],
    );
    assert_error(
        call((a.clone(), b.clone(), 64, 1 << 40, 64)),
        "ValueError",
        &["add_one", "blockIdx.x is 1099511627776"],
    );
    assert_error(
        call((a.clone(), b.clone(), 64, 1, 32)),
        "ValueError",
        &["add_one", "threadIdx.x=32", "[64, 1, 1]"],
    );
    assert_error(
        add_one.call((a.clone(), b.clone(), 64i64)),
        "TypeError",
        &["add_one", "got 3"],
    );
    assert_error(
        add_one.call((a.clone(), "b", 64i64, 1i64, 64i64)),
        "TypeError",
        &["add_one", "argument 1"],
    );
    assert_error(
        add_one.call((a.clone(), b.clone(), 1i64 << 40, 1i64, 64i64)),
        "ValueError",
        &["add_one", "argument 2", "int32"],
    );
    // A tensor whose data is not a live Vulkan buffer.
    let fake = std::ptr::dangling_mut::<std::ffi::c_void>();
    assert_error(
        add_one.call((fake, b.clone(), 64i64, 1i64, 64i64)),
        "ValueError",
        &["add_one", "argument 0", "not a live Vulkan buffer"],
    );
    check_add_one(&module);
    assert_quiet(&api);
}

#[test]
fn modules_that_do_not_match_their_shaders_are_refused() {
    let Some(api) = api() else { return };
    let Some(words) = shader_words("add_one") else {
        return;
    };
    let shader = SpirvShader { flag: 0, words };
    let mut wrong_name = add_one_info();
    wrong_name.name = "add_two".into();
    let err = load(&module_to_bytes(&[(wrong_name, shader.clone())])).unwrap_err();
    assert!(
        err.message().contains("add_two") && err.message().contains("add_one"),
        "{err}"
    );
    let mut scalar_first = add_one_info();
    scalar_first.arg_types = vec![DataType::int(32), DataType::handle(), DataType::handle()];
    let err = load(&module_to_bytes(&[(scalar_first, shader.clone())])).unwrap_err();
    assert!(err.message().contains("tensors must come first"), "{err}");
    let mut unknown_tag = add_one_info();
    unknown_tag.launch_param_tags.push("warpIdx.x".into());
    let err = load(&module_to_bytes(&[(unknown_tag, shader.clone())])).unwrap_err();
    assert!(err.message().contains("warpIdx.x"), "{err}");
    let mut half = add_one_info();
    half.arg_types[2] = DataType::float(16);
    let err = load(&module_to_bytes(&[(half, shader.clone())])).unwrap_err();
    assert!(err.message().contains("float16"), "{err}");
    let garbage = SpirvShader {
        flag: 0,
        words: vec![1, 2, 3, 4, 5, 6],
    };
    let err = load(&module_to_bytes(&[(add_one_info(), garbage)])).unwrap_err();
    assert!(
        err.message().contains("add_one") && err.message().contains("magic"),
        "{err}"
    );
    let bytes = module_to_bytes(&[(add_one_info(), shader)]);
    let err = load(&bytes[..bytes.len() - 3]).unwrap_err();
    assert!(err.message().contains("malformed vulkan module"), "{err}");
    let err = load(b"\x04\0\0\0\0\0\0\0cuda").unwrap_err();
    assert!(err.message().contains("'cuda'"), "{err}");
    assert_quiet(&api);
}

#[test]
fn a_tensor_larger_than_a_binding_allows_is_refused_by_name() {
    let Some(api) = api() else { return };
    let Some(module) = load_module() else { return };
    let add_one = module.get_function_required("add_one").unwrap();
    // 129 MiB: above lavapipe's 128 MiB storage-binding limit (skip on devices without one).
    let n = (129usize << 20) / 4;
    let big = match empty_on(&[n as i64], DataType::float(32), vulkan0()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("skipped: cannot allocate 129 MiB ({e})");
            return;
        }
    };
    let limit_text = "one storage binding";
    let (a, _) = input_and_output(&[0.0; 4]);
    let result = add_one.call((a, big, 4i64, 1i64, 64i64));
    match result {
        Err(err) => assert!(
            err.message().contains("add_one") && err.message().contains(limit_text),
            "{err}"
        ),
        Ok(_) => eprintln!("skipped: this device binds more than 129 MiB"),
    }
    assert_quiet(&api);
}
