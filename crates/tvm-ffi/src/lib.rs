//! TVM FFI core: values, objects, functions, errors, strings, containers and tensors behind the
//! stable C ABI of `cpp-abi/include/tvm/ffi/c_api.h` (the binary layout of Apache TVM FFI 0.1).
//!
//! The safe API in this crate is a client of the C ABI: process-wide state (the type table, the
//! global function registry, the per-thread error slot) is reached only through the exported
//! `TVMFFI*` functions, and objects are laid out exactly as the header describes so that C and
//! C++ code compiled against the header can read them inline. The `capi` feature compiles the
//! definitions of those functions into this crate; exactly one library per process may do so.
//!
//! Errors are reported as [`Error`] values (kind, message, backtrace, cause). No panic crosses an
//! `extern "C"` function: every exported function catches panics and reports an `InternalError`.

#![allow(non_upper_case_globals)]

pub mod abi;
pub mod any;
pub mod containers;
pub mod device;
pub mod dtype;
pub mod error;
pub mod function;
pub mod object;
pub mod reflection;
pub mod string;
pub mod tensor;
pub mod types;

#[cfg(feature = "capi")]
mod capi;

pub use any::{Any, AnyView, TryFromAnyView};
pub use containers::array::{Array, List};
pub use containers::map::{Dict, Map};
pub use containers::shape::Shape;
pub use device::Device;
pub use dtype::DataType;
pub use error::{Error, ErrorKind, Result};
pub use function::Function;
pub use object::{Object, ObjectCore, ObjectRef, WeakRef};
pub use string::{Bytes, String};
pub use tensor::Tensor;
