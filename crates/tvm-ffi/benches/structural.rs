//! Structural hash, structural equality and JSON-graph serialization of the 100,000-value graph
//! the Python table times against the reference (`shash_100k` and its neighbours in
//! `benches/python/bench_ffi.py`): 20,000 arrays `[i, "node-<i>", [float(i)]]` in one array.
//!
//! Run with `cargo bench -p tvm-ffi --bench structural`; under callgrind, one iteration per
//! row: `valgrind --tool=callgrind <bench binary> --bench --profile-time 1 <row>`.

#![allow(missing_docs)] // `criterion_group!` generates undocumented functions.

// This binary is a final artifact: it links the process state.
use tvm_ffi_capi as _;

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use tvm_ffi::extra::serialization::{from_json_graph_string, to_json_graph_string};
use tvm_ffi::extra::structural::{structural_equal, structural_hash};
use tvm_ffi::{Any, AnyView, Array};

/// The graph: 20,000 nodes of an int, a heap string and a one-float array (100,000 values).
fn graph() -> Any {
    let nodes = (0..20_000i64)
        .map(|i| {
            let text = tvm_ffi::String::new(&format!("node-{i:08}"));
            let floats = Array::from_vec(vec![Any::from(i as f64)]);
            Array::from_vec(vec![Any::from(i), Any::from(text), Any::from(floats)]).into()
        })
        .collect();
    Array::from_vec(nodes).into()
}

fn structural(c: &mut Criterion) {
    let (g, copy) = (graph(), graph());
    let text = to_json_graph_string(g.as_view(), AnyView::none()).unwrap();
    let mut group = c.benchmark_group("structural_100k");
    group.warm_up_time(Duration::from_millis(300));
    group.measurement_time(Duration::from_secs(2));
    group.bench_function("hash", |b| {
        b.iter(|| structural_hash(black_box(g.as_view()), false, false).unwrap())
    });
    group.bench_function("equal", |b| {
        b.iter(|| structural_equal(black_box(g.as_view()), copy.as_view(), false, false).unwrap())
    });
    group.bench_function("to_json", |b| {
        b.iter(|| to_json_graph_string(black_box(g.as_view()), AnyView::none()).unwrap())
    });
    group.bench_function("from_json", |b| {
        b.iter(|| from_json_graph_string(black_box(&text)).unwrap())
    });
    group.finish();
}

criterion_group!(benches, structural);
criterion_main!(benches);
