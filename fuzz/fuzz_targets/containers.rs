//! libFuzzer driver of [`tvm_fuzz::containers`]: `cargo +nightly fuzz run --features libfuzzer containers`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_fuzz::containers(data));
