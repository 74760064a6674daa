//! `Map` insertion and lookup with int keys, from 1 to 1,000,000 entries (criterion).
//!
//! Run with `cargo bench -p tvm-ffi --bench map`. Building is reported per inserted element;
//! lookups cycle through existing keys, one lookup per iteration, so equal times across sizes
//! show constant-time lookup.

#![allow(missing_docs)] // `criterion_group!` generates undocumented functions.

// This binary is a final artifact: it links the process state.
use tvm_ffi_capi as _;

use std::hint::black_box;
use std::time::Duration;

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use tvm_ffi::containers::map::{Map, MapRead};

const SIZES: [u64; 7] = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000];

fn build(n: u64) -> Map {
    let mut map = Map::new();
    for i in 0..n as i64 {
        map.insert(i, i);
    }
    map
}

fn insert(c: &mut Criterion) {
    let mut group = c.benchmark_group("map_insert");
    group.warm_up_time(Duration::from_millis(200));
    group.measurement_time(Duration::from_millis(500));
    for n in SIZES {
        if n >= 100_000 {
            group.sample_size(10);
            group.sampling_mode(SamplingMode::Flat);
        }
        group.throughput(Throughput::Elements(n));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter(|| black_box(build(black_box(n))))
        });
    }
    group.finish();
}

fn lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("map_lookup");
    group.warm_up_time(Duration::from_millis(200));
    group.measurement_time(Duration::from_millis(500));
    for n in SIZES {
        if n >= 100_000 {
            group.sample_size(10);
        }
        let map = build(n);
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            let mut i = 0i64;
            b.iter(|| {
                i = (i + 1) % n as i64;
                black_box(map.get(black_box(&i)))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, insert, lookup);
criterion_main!(benches);
