//! The time evaluator (`runtime.RPCTimeEvaluator`): what it calls, how often, what it returns,
//! and its refusals.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tvm_ffi::abi::{kDLCPU, kDLExtDev};
use tvm_ffi::{Any, AnyView, Bytes, Function, Tensor};
use tvm_runtime::profiling::{TimerConfig, time_evaluator};

/// A global function that counts its calls, registered under `name`.
fn counting_global(name: &str) -> Arc<AtomicUsize> {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    Function::from_packed(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(Any::none())
    })
    .register_global(name, true)
    .unwrap();
    calls
}

/// `runtime.RPCTimeEvaluator` with the given arguments after the module and name.
fn evaluator(
    module: Any,
    name: &str,
    rest: [i64; 9],
    preprocess: &str,
) -> tvm_ffi::Result<Function> {
    let make = Function::get_global("runtime.RPCTimeEvaluator").unwrap();
    let mut values = vec![module, Any::from(name)];
    values.extend(rest.iter().map(|v| Any::from(*v)));
    values.push(Any::from(preprocess));
    let views: Vec<AnyView<'_>> = values.iter().map(AnyView::from).collect();
    make.call_packed(&views)?.cast()
}

/// (device type, id, number, repeat, min_repeat_ms, limit_zero, cooldown, repeats_to_cooldown,
/// cache_flush_bytes) with the defaults but for `number` and `repeat`.
fn cpu_args(number: i64, repeat: i64) -> [i64; 9] {
    [i64::from(kDLCPU), 0, number, repeat, 0, 100, 0, 1, 0]
}

fn seconds(result: Any) -> Vec<f64> {
    let bytes = Bytes::try_from_view(&AnyView::from(&result)).expect("the evaluator returns bytes");
    bytes
        .as_bytes()
        .chunks_exact(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn one_warm_up_call_then_number_calls_per_repeat() {
    tvm_runtime::init();
    let calls = counting_global("profiling.count_plain");
    let timer = evaluator(Any::none(), "profiling.count_plain", cpu_args(4, 3), "").unwrap();
    let result = seconds(timer.call(()).unwrap());
    assert_eq!(result.len(), 3);
    assert!(
        result.iter().all(|s| *s >= 0.0 && s.is_finite()),
        "{result:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1 + 3 * 4);
}

#[test]
fn short_measurements_grow_until_min_repeat_ms() {
    tvm_runtime::init();
    let calls = counting_global("profiling.count_min_ms");
    let mut args = cpu_args(1, 1);
    args[4] = 3; // min_repeat_ms
    let timer = evaluator(Any::none(), "profiling.count_min_ms", args, "").unwrap();
    let per_call = seconds(timer.call(()).unwrap())[0];
    let calls = calls.load(Ordering::SeqCst);
    assert!(
        calls > 2,
        "one call of a no-op cannot last 3 ms ({calls} calls)"
    );
    assert!(per_call > 0.0 && per_call < 3e-3, "{per_call}");
}

#[test]
fn the_preprocessor_runs_before_each_measurement_with_the_arguments() {
    tvm_runtime::init();
    let _ = counting_global("profiling.count_measured");
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&seen);
    Function::from_packed(move |args| {
        assert_eq!(args.len(), 1);
        counter.fetch_add(args[0].cast::<i64>()? as usize, Ordering::SeqCst);
        Ok(Any::none())
    })
    .register_global("profiling.preprocess", true)
    .unwrap();
    let timer = evaluator(
        Any::none(),
        "profiling.count_measured",
        cpu_args(2, 5),
        "profiling.preprocess",
    )
    .unwrap();
    timer.call((10i64,)).unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 5 * 10);
}

#[test]
fn cache_flushes_run_on_the_timed_device() {
    super::device::setup();
    let _ = counting_global("profiling.count_flushed");
    for device_type in [kDLCPU, kDLExtDev] {
        let mut args = cpu_args(1, 2);
        args[0] = i64::from(device_type);
        args[8] = 4096; // cache_flush_bytes
        let timer = evaluator(Any::none(), "profiling.count_flushed", args, "").unwrap();
        assert_eq!(seconds(timer.call(()).unwrap()).len(), 2);
    }
    assert_eq!(
        tvm_runtime::device::test_device_stats()
            .unwrap()
            .live_allocations,
        0,
        "the flush buffers are freed with the measurement"
    );
    let input = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let flush = Function::get_global("cache_flush_cpu_non_first_arg").unwrap();
    flush.call((input.clone(), input.clone(), 7i64)).unwrap();
    assert_eq!(input.as_slice::<f32>().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn functions_of_a_module_are_timed_through_the_module() {
    tvm_runtime::init();
    struct Counting(Arc<AtomicUsize>);
    impl tvm_runtime::ModuleImpl for Counting {
        fn kind(&self) -> &str {
            "counting"
        }
        fn get_function(
            &self,
            _: &tvm_runtime::Module,
            name: &str,
        ) -> tvm_ffi::Result<Option<Function>> {
            let calls = Arc::clone(&self.0);
            Ok((name == "tick").then(|| {
                Function::from_packed(move |_| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    Ok(Any::none())
                })
            }))
        }
    }
    let calls = Arc::new(AtomicUsize::new(0));
    let module = tvm_runtime::Module::new(Counting(Arc::clone(&calls)));
    let as_any = || Any::from(module.as_object().clone());
    evaluator(as_any(), "tick", cpu_args(3, 1), "")
        .unwrap()
        .call(())
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    let err = evaluator(as_any(), "tock", cpu_args(3, 1), "").unwrap_err();
    assert_eq!(err.kind(), "AttributeError");
    assert!(
        err.message().contains("\"tock\"") && err.message().contains("module"),
        "{err}"
    );
}

#[test]
fn bad_arguments_are_refused_naming_them() {
    tvm_runtime::init();
    let _ = counting_global("profiling.count_refused");
    let refused = |args: [i64; 9], preprocess: &str| {
        evaluator(Any::none(), "profiling.count_refused", args, preprocess).unwrap_err()
    };
    let mut zero_repeat = cpu_args(1, 1);
    zero_repeat[3] = 0;
    let err = refused(zero_repeat, "");
    assert_eq!(err.kind(), "ValueError");
    assert!(err.message().contains("repeat must be at least 1"), "{err}");
    let mut negative = cpu_args(1, 1);
    negative[2] = -5;
    let err = refused(negative, "");
    assert!(
        err.message().contains("number") && err.message().contains("-5"),
        "{err}"
    );
    let mut remote = cpu_args(1, 1);
    remote[0] = 128 + i64::from(kDLCPU);
    let err = refused(remote, "");
    assert!(err.message().contains("RPC session"), "{err}");
    let err = refused(cpu_args(1, 1), "profiling.no_such_preprocessor");
    assert!(
        err.message().contains("profiling.no_such_preprocessor"),
        "{err}"
    );
    let err = evaluator(
        Any::none(),
        "profiling.no_such_function",
        cpu_args(1, 1),
        "",
    )
    .unwrap_err();
    assert!(err.message().contains("global registry"), "{err}");
    let make = Function::get_global("runtime.RPCTimeEvaluator").unwrap();
    let err = make.call(("too", "few")).unwrap_err();
    assert_eq!(err.kind(), "TypeError");
    assert!(err.message().contains("12 arguments"), "{err}");
    let err = time_evaluator(
        Function::get_global("profiling.count_refused").unwrap(),
        tvm_ffi::Device::new(kDLCPU, 0),
        TimerConfig {
            repeats_to_cooldown: 0,
            ..TimerConfig::default()
        },
        None,
    )
    .unwrap_err();
    assert!(err.message().contains("repeats_to_cooldown"), "{err}");
}
