//! Our side of the C ABI benchmark (`benches/c/abi_ops.c`): a shared library that exports every
//! `TVMFFI*` function of `tvm-ffi-capi`, with the `testing.*` functions and `bench.typed_nop`
//! (a typed Rust no-op of three `i64` arguments) registered when it is loaded.

use tvm_ffi::Function;
use tvm_ffi_capi as _;

/// Registers the functions the harness looks up.
fn register() {
    tvm_ffi_testing::register();
    let typed_nop = Function::from_typed("bench.typed_nop", |_a: i64, _b: i64, _c: i64| {});
    let _ = typed_nop.register_global("bench.typed_nop", false);
}

/// Registers everything when the library is loaded.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static REGISTER_AT_LOAD: extern "C" fn() = {
    extern "C" fn register_at_load() {
        // Nothing may unwind out of a loader callback.
        tvm_ffi::boundary::ffi_boundary("the load-time registration of c-abi-bench", register);
    }
    register_at_load
};
