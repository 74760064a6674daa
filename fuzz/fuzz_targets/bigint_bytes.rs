//! libFuzzer driver of [`tvm_fuzz::bigint_bytes`]: `cargo +nightly fuzz run --features libfuzzer bigint_bytes`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_fuzz::bigint_bytes(data));
