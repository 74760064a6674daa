//! Packed-call overhead and `Any` conversions (criterion).
//!
//! Run with `cargo bench -p tvm-ffi --bench call`.

// criterion's macros define undocumented public functions.
#![allow(missing_docs)]

// This binary is a final artifact: it links the process state.
use tvm_ffi_capi as _;

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use tvm_ffi::abi::{self, TVMFFIAny};
use tvm_ffi::{Any, AnyView, Function, String};

/// Packed-call overhead.
fn calls(c: &mut Criterion) {
    let nop = Function::from_packed(|_| Ok(Any::none()));
    let handle = nop.as_object().as_raw().cast();
    c.bench_function("TVMFFIFunctionCall no-op, 0 args", |b| {
        b.iter(|| {
            let mut result = TVMFFIAny::NONE;
            // SAFETY: a live function object, no arguments, a valid result slot.
            let rc = unsafe {
                abi::TVMFFIFunctionCall(black_box(handle), std::ptr::null_mut(), 0, &mut result)
            };
            black_box(rc)
        })
    });
    let args = [Any::from(1i64), Any::from(2i64), Any::from(3i64)];
    let views: Vec<AnyView<'_>> = args.iter().map(Any::as_view).collect();
    c.bench_function("Function::call_packed no-op, 3 int args", |b| {
        b.iter(|| black_box(nop.call_packed(black_box(&views))))
    });
    let add = Function::from_typed("add", |a: i64, b: i64| a + b);
    c.bench_function("typed add(i64, i64) via call()", |b| {
        b.iter(|| black_box(add.call((black_box(1i64), black_box(2i64)))))
    });
}

/// `Any` conversions.
fn conversions(c: &mut Criterion) {
    c.bench_function("Any from i64 and back", |b| {
        b.iter(|| black_box(Any::from(black_box(42i64)).try_as::<i64>()))
    });
    c.bench_function("Any from small str and back", |b| {
        b.iter(|| black_box(Any::from(black_box("short")).try_as::<String>()))
    });
    let long = "a string that is longer than seven bytes";
    c.bench_function("Any from heap str and back", |b| {
        b.iter(|| black_box(Any::from(black_box(long)).try_as::<String>()))
    });
    let obj = Any::from(String::new(long));
    c.bench_function("Any clone/drop of an object", |b| {
        b.iter(|| black_box(obj.clone()))
    });
}

/// Short runs: the whole suite finishes in seconds.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
}

criterion_group! { name = benches; config = config(); targets = calls, conversions }
criterion_main!(benches);
