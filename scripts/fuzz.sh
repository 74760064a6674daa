#!/usr/bin/env bash
# Long fuzz runs of the targets in fuzz/ (the bounded pass is `cargo test -p tvm-fuzz`).
#
# Usage: bash scripts/fuzz.sh [BUDGET] [TARGET...]
#   BUDGET  `600s` (default) or `600`: seconds, shared equally by the targets;
#           `50000x`: inputs (libFuzzer runs per target; stable driver: mutations per seed).
#   TARGET  any of `cargo run -p tvm-fuzz -- list` (default: all).
#
# With a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`), each target runs under
# libFuzzer with AddressSanitizer and coverage guidance:
#   cargo +nightly fuzz run --features libfuzzer TARGET target/fuzz-corpus/TARGET fuzz/corpus/TARGET
# New inputs go to target/fuzz-corpus/ (the committed seeds in fuzz/corpus/ are only read) and
# crashes to target/fuzz-findings/. Without them (or with TVM_FUZZ_STABLE=1) the stable driver
# runs instead, in a debug-assertion build so that arithmetic overflow panics. Either way, shrink
# a failing input with `cargo run -p tvm-fuzz -- minimize TARGET FILE`, then commit it under
# fuzz/corpus/TARGET/.
set -euo pipefail
cd "$(dirname "$0")/.."

budget=${1:-600s}
shift || true
case $budget in
    *s) seconds=${budget%s} runs="" ;;
    *x) runs=${budget%x} seconds="" ;;
    *) seconds=$budget runs="" ;;
esac
if ! [[ ${seconds}${runs} =~ ^[0-9]+$ ]]; then
    echo "fuzz.sh: BUDGET must be like 600s, 600 or 50000x, got '$budget'" >&2
    exit 2
fi

if (($# > 0)); then
    targets=("$@")
else
    mapfile -t targets < <(cargo run --quiet --locked -p tvm-fuzz -- list)
fi

have_cargo_fuzz() {
    [[ ${TVM_FUZZ_STABLE:-0} != 1 ]] &&
        rustup toolchain list 2>/dev/null | grep -q '^nightly' &&
        cargo +nightly fuzz --version >/dev/null 2>&1
}

mkdir -p target/fuzz-findings
if have_cargo_fuzz; then
    echo "fuzz.sh: cargo fuzz (libFuzzer + AddressSanitizer) on ${#targets[@]} target(s)"
    failed=0
    for t in "${targets[@]}"; do
        mkdir -p "target/fuzz-corpus/$t"
        if [[ -n $seconds ]]; then
            limit=(-max_total_time=$((seconds / ${#targets[@]} > 0 ? seconds / ${#targets[@]} : 1)))
        else
            limit=(-runs="$runs")
        fi
        echo "== $t"
        if ! cargo +nightly fuzz run --features libfuzzer "$t" \
            "target/fuzz-corpus/$t" "fuzz/corpus/$t" -- \
            -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
            -artifact_prefix="target/fuzz-findings/$t-" "${limit[@]}"; then
            failed=1
        fi
    done
    exit $failed
fi

echo "fuzz.sh: no cargo-fuzz on nightly; running the stable driver (debug assertions on)"
if [[ -n $seconds ]]; then
    args=(--seconds "$seconds")
else
    args=(--mutations "$runs")
fi
# An optimized build that still checks arithmetic overflow and debug assertions, in a target
# directory of its own so that it leaves the ordinary release build alone.
CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true \
    cargo run --quiet --locked --release --target-dir target/fuzz-stable -p tvm-fuzz -- \
    run "${args[@]}" "${targets[@]}"
