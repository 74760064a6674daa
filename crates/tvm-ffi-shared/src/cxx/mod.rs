//! The C++ half of the ABI that this library exports (`ModuleObj`'s vtable and typeinfo,
//! `Module::LoadFromFile`, structural equality and hash, JSON, ...) is compiled by
//! `tvm-ffi-capi` (its `cxx/` folder), so that every artifact holding the process state holds it
//! too; `build.rs` exports its symbols. The C++ code reaches the runtime through global
//! functions, and the runtime reaches C++ modules through `ffi.CxxModuleBridge`
//! (`tvm-runtime`'s `module_cxx`), so there is no Rust code here.
