//! Integration tests of the Vulkan backend on whatever Vulkan driver is installed (Mesa
//! lavapipe in CI). Each test prints why it is skipped and returns when no driver is installed.
//! In debug builds the validation layer is on, and every test ends by asserting that it said
//! nothing.

// This binary is a final artifact: it links the process state.
use tvm_ffi_capi as _;

mod common;
mod copies;
mod devices;
mod faults;
mod kernels;
