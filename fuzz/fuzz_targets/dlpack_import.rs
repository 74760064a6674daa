//! libFuzzer driver of [`tvm_fuzz::dlpack_import`]: `cargo +nightly fuzz run --features libfuzzer dlpack_import`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_fuzz::dlpack_import(data));
