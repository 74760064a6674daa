//! Integration tests of the backend kit.

// This binary is a final artifact: it links the process state.
use tvm_ffi_capi as _;

mod kernel;
