//! Fuzz targets for the TVM FFI and runtime: one function per target, `fn(&[u8])`, which must
//! never panic, crash, hang or leak for any input. A failed check is a panic.
//!
//! Drivers:
//! - `tests/corpus.rs` (stable, part of `cargo test`): every seed under `fuzz/corpus/<target>/`
//!   plus `TVM_FUZZ_MUTATIONS` deterministic mutations per seed ([`driver`]);
//! - the `tvm-fuzz` binary (stable): the same for a number of mutations or seconds, and
//!   minimization of a failing input (`scripts/fuzz.sh` runs it when cargo-fuzz is missing);
//! - `fuzz_targets/*.rs` (libFuzzer, feature `libfuzzer`): coverage-guided runs with
//!   `cargo +nightly fuzz run --features libfuzzer TARGET`.

// The process state: every driver of these targets is a final artifact.
use tvm_ffi_capi as _;

mod containers;
mod copy;
mod dlpack;
pub mod driver;
pub mod input;
mod rpc;
mod text;

pub use containers::containers;
pub use copy::strided_copy;
pub use dlpack::dlpack_import;
pub use rpc::{rpc_message, rpc_serve};
pub use text::{bigint_bytes, device_parse, dtype_parse, strings};

/// A fuzz target: any bytes in, a panic on a failed check.
pub type Target = fn(&[u8]);

/// Every target by name, in the order the drivers run them.
pub const TARGETS: &[(&str, Target)] = &[
    ("dtype_parse", dtype_parse),
    ("device_parse", device_parse),
    ("strings", strings),
    ("bigint_bytes", bigint_bytes),
    ("dlpack_import", dlpack_import),
    ("strided_copy", strided_copy),
    ("containers", containers),
    ("rpc_message", rpc_message),
    ("rpc_serve", rpc_serve),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// The seed corpus directory committed with this crate (`fuzz/corpus`).
pub fn corpus_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}
