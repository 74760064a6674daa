//! `libtvm_ffi.so`: the runtime as one shared library with no Python in it.
//!
//! It holds the process state (the `tvm-ffi-capi` crate: type table, global registry, error
//! slot, environment) and defines every `TVMFFI*` C function, the runtime (modules, library
//! loading, the system library), the device registry with the compiled-in backends, RPC, and the
//! C++ half of the ABI that C++ clients of the FFI link. That C++ code is compiled by
//! `tvm-ffi-capi` (its `cxx/` folder), so every artifact that holds the process state holds it
//! too; `build.rs` exports its symbols. Everything registers when the library is loaded
//! ([`register`]), so C, C++ and Rust hosts, our Python package and Apache TVM FFI's all get a
//! complete runtime from the one file.
//!
//! The Python extension `tvm._native` links this library by SONAME and holds no state of its
//! own. A Rust program may link it too (`-ltvm_ffi`), or embed the same state statically
//! instead by depending on `tvm-ffi-capi` and the crates it uses.

// The process state's symbols: this library is the one that defines them.
use tvm_ffi_capi as _;

pub mod register;

pub use register::{compiled_device_backends, register_all};
