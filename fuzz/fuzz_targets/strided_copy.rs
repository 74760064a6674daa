//! libFuzzer driver of [`tvm_fuzz::strided_copy`]: `cargo +nightly fuzz run --features libfuzzer strided_copy`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_fuzz::strided_copy(data));
