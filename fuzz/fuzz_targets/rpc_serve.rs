//! libFuzzer driver of [`tvm_fuzz::rpc_serve`]: `cargo +nightly fuzz run --features libfuzzer rpc_serve`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_fuzz::rpc_serve(data));
