#!/usr/bin/env bash
# Kernel launch overhead: instructions per launch through a packed call of a `cuda` module
# against a bare cuLaunchKernel, counted with callgrind on the fake CUDA driver of
# crates/device-cuda/tests/fake (or the driver in $TVM_CUDA_DRIVER). Per launch = (instructions
# of a run of 20,000 launches - those of a run of 10,000) / 10,000, so start-up and module
# loading cancel out. Prints one table with the ratio (issue 13's target: at most 1.2x).
# Needs valgrind and gcc. Usage: scripts/launch-cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."

command -v valgrind >/dev/null || { echo "launch-cost: valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

driver=${TVM_CUDA_DRIVER:-}
if [[ -z $driver ]]; then
    shared=crates/device-common/fake
    gcc -shared -fPIC -O2 -o "$work/libfake_kernels.so" "$shared/kernels.c"
    gcc -shared -fPIC -O2 -I"$shared" -DFAKE_KERNELS_LIBRARY="\"$work/libfake_kernels.so\"" \
        -o "$work/libcuda_fake.so" crates/device-cuda/tests/fake/libcuda_fake.c -ldl -lpthread
    driver=$work/libcuda_fake.so
fi
cargo build -q --release --example launch_cost -p device-cuda
program=target/release/examples/launch_cost

# Instructions of one run: callgrind's total ("summary:" line of its output file).
instructions() {
    local out="$work/callgrind.$1.$2"
    valgrind --tool=callgrind --callgrind-out-file="$out" "$program" "$driver" "$1" "$2" \
        >/dev/null 2>&1
    awk '/^summary:/ { print $2 }' "$out"
}

per_launch() {
    local small large
    small=$(instructions "$1" 10000)
    large=$(instructions "$1" 20000)
    echo $(((large - small) / 10000))
}

bare=$(per_launch bare)
packed=$(per_launch packed)
ratio=$(awk -v p="$packed" -v b="$bare" 'BEGIN { printf "%.2f", p / b }')
printf '%-40s %14s\n' "launch (driver: $(basename "$driver"))" "instr/launch"
printf '%-40s %14s\n' "bare cuLaunchKernel" "$bare"
printf '%-40s %14s\n' "packed call of a cuda module" "$packed"
printf '%-40s %14s\n' "ratio packed / bare (target <= 1.2)" "${ratio}x"
