//! The features built on reflection, on top of the core object model (Apache TVM FFI keeps the
//! same features under `include/tvm/ffi/extra`): structural equality, hashing and traversal,
//! JSON and JSON-graph serialization, repr, deep copy, recursive comparison, dataclasses, enums,
//! access paths, object types defined at run time, and breaking reference cycles.
//!
//! These modules use the core; the core never uses them. Their `ffi.*` global functions reach
//! the registry through [`reflection_globals::functions`] and [`dataclass::functions`], which the
//! state crate installs.

pub mod access_path;
pub mod bigint_text;
pub mod cycles;
pub mod dataclass;
pub mod deep_copy;
pub mod enums;
pub mod recursive_compare;
pub mod reflection_globals;
pub mod repr;
pub mod runtime_types;
pub mod serialization;
pub mod structural;
