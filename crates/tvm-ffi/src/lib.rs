//! TVM FFI core: values, objects, functions, errors, strings, containers and tensors behind the
//! stable C ABI of `python/tvm/include/tvm/ffi/c_api.h` (the binary layout of Apache TVM FFI 0.1).
//!
//! The safe API in this crate is a client of the C ABI: process-wide state (the type table, the
//! global function registry, the per-thread error slot) is reached only through the exported
//! `TVMFFI*` functions, and objects are laid out exactly as the header describes so that C and
//! C++ code compiled against the header can read them inline. This crate defines none of those
//! functions: the `tvm-ffi-capi` crate does, and only a final artifact (the Python extension, an
//! embedding executable) links it, so exactly one library per process owns the state.
//!
//! Errors are reported as [`Error`] values (kind, message, backtrace, cause). No panic crosses an
//! `extern "C"` function: every callback handed to C goes through one panic boundary,
//! [`boundary::ffi_boundary`].
//!
//! The crate has two halves, as Apache TVM FFI's headers have `tvm/ffi` and `tvm/ffi/extra`:
//!
//! - the core: values (`any`, `string`, `containers`, `tensor`, `device`, `dtype`), objects and
//!   the type table (`object`, `types`, `type_attr`, `reflection`), functions (`function`),
//!   errors and the panic boundary (`error`, `boundary`), functions exported from a `cdylib`
//!   (`export`), and what they share (`stack`, `thread`, `convert`, `opaque`);
//! - [`extra`]: the features built on reflection (structural equality and hashing,
//!   serialization, repr, deep copy, recursive comparison, dataclasses, enums, access paths,
//!   types defined at run time, cycle breaking) and the `ffi.*` globals that expose them.
//!
//! The line runs one way: `extra` uses the core, and no core module names `extra`. `extra` is a
//! module rather than a crate of its own: it uses crate-private parts of the core (the bytes of
//! a string view, in-place writes to unshared arrays and maps, views of raw object pointers)
//! that a crate boundary would make public, and the state crate registers its globals, so every final artifact links
//! it anyway; a second crate would add a compile unit on the same critical path and save no
//! build time.

#![allow(non_upper_case_globals)]

/// The raw C ABI (the `tvm-ffi-sys` crate).
pub use tvm_ffi_sys as abi;
pub mod any;
pub mod boundary;
pub mod containers;
pub mod convert;
pub mod device;
pub mod dtype;
pub mod error;
pub mod export;
pub mod extra;
pub mod function;
pub mod object;
pub mod opaque;
pub mod reflection;
mod spare_block;
pub mod stack;
pub mod string;
pub mod tensor;
pub mod thread;
pub mod type_attr;
pub mod types;

// Unit tests run in a binary of their own, which links the process state.
#[cfg(test)]
use tvm_ffi_capi as _;

pub use any::{Any, AnyView, TryFromAnyView};
pub use containers::array::{Array, List};
pub use containers::map::{Dict, Map, MapRead};
pub use containers::shape::Shape;
pub use containers::sync::{ReentrantGuard, ReentrantLock};
pub use containers::typed::{ArrayOf, MapOf};
pub use device::Device;
pub use dtype::DataType;
pub use error::{Error, ErrorKind, Result};
pub use function::Function;
pub use object::{Object, ObjectCore, ObjectRef, WeakRef};
pub use opaque::{Opaque, OpaqueObj};
pub use string::{ByteSeq, Bytes, String};
pub use tensor::Tensor;
/// `#[derive(Object)]` and `#[derive(ObjectRef)]` (feature `derive`; macros, beside the types
/// of the same names).
#[cfg(feature = "derive")]
pub use tvm_ffi_derive::{Object, ObjectRef};
