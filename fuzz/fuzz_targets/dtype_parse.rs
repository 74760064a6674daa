//! libFuzzer driver of [`tvm_fuzz::dtype_parse`]: `cargo +nightly fuzz run --features libfuzzer dtype_parse`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_fuzz::dtype_parse(data));
