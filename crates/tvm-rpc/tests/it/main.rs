//! Integration tests of RPC: real servers on loopback sockets in this process.

// This binary is a final artifact: it links the process state.
use tvm_ffi_capi as _;
use tvm_ffi_testing as _;

mod async_calls;
mod auth;
mod codec;
mod deadlines;
mod example;
mod faults;
mod sessions;
