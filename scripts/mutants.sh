#!/usr/bin/env bash
# Mutation testing of the core: cargo-mutants changes one operator, constant or return value at a
# time in the named files of crates/tvm-ffi and runs the crate's tests; a mutant that no test
# notices ("missed") is a hole in the tests. Slow (one rebuild per mutant): a session's worth,
# not a CI step. Prints the missed mutants; the full report is in target/mutants/mutants.out.
# Usage: bash scripts/mutants.sh [FILE...]   (default: the modules below)
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo-mutants >/dev/null 2>&1 || cargo install --locked cargo-mutants

files=("$@")
if ((${#files[@]} == 0)); then
    files=(
        crates/tvm-ffi/src/dtype.rs
        crates/tvm-ffi/src/device.rs
        crates/tvm-ffi/src/tensor/mod.rs
        crates/tvm-ffi/src/containers/array.rs
        crates/tvm-ffi/src/containers/sync.rs
    )
fi
args=()
for file in "${files[@]}"; do
    args+=(--file "$file")
done

# The integration tests link the process state and the testing library; run the crate's tests
# only (the other crates' suites would multiply the time by five).
status=0
cargo mutants --package tvm-ffi --output target/mutants "${args[@]}" -- --locked || status=$?
echo
echo "missed mutants (not caught by any test):"
cat target/mutants/mutants.out/missed.txt 2>/dev/null || echo "(none recorded)"
# cargo-mutants exits 2 when mutants were missed, 3 on timeouts: report, do not fail.
exit $((status == 2 || status == 3 ? 0 : status))
