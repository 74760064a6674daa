//! Integration tests of the core, one module per area.

// This binary is a final artifact: it links the process state (and the `testing.*` functions,
// registered when the binary loads).
use tvm_ffi_capi as _;
use tvm_ffi_testing as _;

mod alloc_failure;
mod any;
mod containers;
mod convert;
mod cycles;
mod dataclass;
mod devices;
mod dtype;
mod enums;
mod error;
mod function;
mod map;
mod map_build;
mod object;
mod object_markers;
mod opaque;
mod runtime_types;
mod sequences;
mod shared_graphs;
mod string;
mod string_values;
mod structural;
mod tensor;
mod tensor_capi;
mod threads;
mod traversal;
mod traversal_engines;
mod types;
mod value_comparisons;
