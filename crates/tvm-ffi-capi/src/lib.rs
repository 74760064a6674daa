//! The process state of the TVM FFI and the exported `TVMFFI*` C functions of
//! `python/tvm/include/tvm/ffi/c_api.h`: the type table, the global function registry, the
//! per-thread error slot and the environment (streams, allocators, context symbols).
//!
//! Exactly one library per process may define these symbols, so only a final artifact links this
//! crate: the Python extension, an embedding executable, a test binary. Library crates (the
//! runtime, device backends, RPC) use the safe API of `tvm-ffi`, which reaches the state through
//! the C functions declared in `tvm-ffi-sys`. A program embedding the runtime opts in with one
//! line, `use tvm_ffi_capi as _;`.
//!
//! Every function runs its whole body through the one panic boundary of the runtime,
//! [`tvm_ffi::boundary::ffi_boundary`]: a panic is reported as an `InternalError` naming the
//! function, with the failure value of its return type (`-1`, NULL, ...), and never unwinds
//! into C.
//!
//! This file is the entry point of the process state: `global_registry` creates the registry
//! on first use and installs the built-in functions there (`globals`), with the type attributes
//! of the core's own types. No two files of the crate import each other: the registry itself
//! (`registry`) knows no built-in, and the built-ins reach the registry through the accessor
//! they are given.
#![allow(non_snake_case, non_upper_case_globals)]

use std::sync::OnceLock;

use registry::{Overwrite, Registry};

mod args;
mod backtrace;
mod bigint;
mod c_api_shim;
mod env;
mod error;
mod function;
mod globals;
mod init_once;
mod late_symbols;
mod object;
mod registry;
mod shared_state;
mod string;
mod tensor;
mod types;
mod unwind;

pub use backtrace::{FrameFilter, register_frame_filter, register_frame_filter_text};

/// The global function registry of the process, created on first use with the built-in
/// functions (`ffi.*`) and the type attributes of the core's own types (the `BigInt` map-key
/// hooks, the `__ffi_convert__` entries).
pub(crate) fn global_registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let registry = Registry::new();
        for (name, function) in globals::builtin_functions(global_registry) {
            registry
                .insert(
                    name,
                    function,
                    String::new(),
                    String::new(),
                    Overwrite::Refuse,
                )
                .expect("builtin names are unique");
        }
        // Type attributes of the core's own types, registered with its functions.
        bigint::register_key_hooks().expect("the BigInt map-key hooks register");
        tvm_ffi::convert::register_core_converters()
            .expect("the __ffi_convert__ entries of the core types register");
        registry
    })
}
