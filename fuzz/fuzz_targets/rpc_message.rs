//! libFuzzer driver of [`tvm_fuzz::rpc_message`]: `cargo +nightly fuzz run --features libfuzzer rpc_message`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_fuzz::rpc_message(data));
