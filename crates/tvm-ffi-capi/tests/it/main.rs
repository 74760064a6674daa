//! Integration tests of the exported C functions, in one binary. (`first_error_memory.rs` has a
//! binary of its own: it measures the first error the process raises.)

// This binary is a final artifact: it links the process state.
use tvm_ffi_capi as _;

mod alloc_failure;
mod env_allocator;
mod init_once;
mod panic_boundary;
