#!/usr/bin/env bash
# Installs what the tests need and runs the whole test suite (Rust, C ABI, Python).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
