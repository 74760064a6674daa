#!/usr/bin/env bash
# The cost of raising a native error through the C ABI (TVMFFIErrorSetRaisedFromCStr, then
# TVMFFIErrorMoveFromRaised, then TVMFFIObjectDecRef), with the example program
# benches/c/src/bin/error_cost.rs (release build):
#
#   1. instructions per raise+fetch+release, under valgrind's callgrind: the totals of runs with
#      N=20000 and N=10000 pairs, difference / 10000 (start-up and first-use costs cancel out);
#      with nobody reading the backtrace, then reading each one; the same for the safe API's
#      `Error::new` and drop (--rust);
#   2. wall time per pair, and the growth of the resident set at the first error.
#
# Usage: bash scripts/error-cost.sh [--no-valgrind]
set -euo pipefail
cd "$(dirname "$0")/.."

use_valgrind=1
case "${1:-}" in
    --no-valgrind) use_valgrind=0 ;;
    "") ;;
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "error-cost.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

cargo build --release --locked -p c-abi-bench --bin error_cost
bin="$(pwd)/target/release/error_cost"

echo "== backtrace of a raised error (read after the loop)"
"$bin" 1 --print

echo "== wall time and resident set"
"$bin" 100000 --report
"$bin" 2000 --read --report
"$bin" 100000 --rust --report

if ((use_valgrind)) && command -v valgrind >/dev/null; then
    out="$(mktemp -d)"
    trap 'rm -rf "$out"' EXIT
    total() {
        # Prints the instruction count of one run: total <pairs> [--read]
        valgrind --tool=callgrind --callgrind-out-file="$out/cg.out" "$bin" "$@" 2>&1 \
            | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
    }
    for mode in "" "--read" "--rust" "--rust --read"; do
        # shellcheck disable=SC2086 # $mode is zero or more words
        small=$(total 10000 $mode)
        # shellcheck disable=SC2086
        large=$(total 20000 $mode)
        echo "== instructions per raise+fetch+release ${mode:-(C ABI, backtrace not read)}:" \
            "($large - $small) / 10000 = $(((large - small) / 10000))"
    done
elif ((use_valgrind)); then
    echo "valgrind not found: no instruction counts" >&2
fi
