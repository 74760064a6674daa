//! libFuzzer driver of [`tvm_fuzz::device_parse`]: `cargo +nightly fuzz run --features libfuzzer device_parse`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_fuzz::device_parse(data));
