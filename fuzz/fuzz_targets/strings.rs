//! libFuzzer driver of [`tvm_fuzz::strings`]: `cargo +nightly fuzz run --features libfuzzer strings`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_fuzz::strings(data));
