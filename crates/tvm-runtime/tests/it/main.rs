//! Integration tests of the runtime.

// This binary is a final artifact: it links the process state (and the `testing.*` functions,
// registered when the binary loads).
use tvm_ffi_capi as _;
use tvm_ffi_testing as _;

mod backend;
mod device;
mod globals;
mod module;
mod parallel;
mod profiling;
