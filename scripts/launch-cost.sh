#!/usr/bin/env bash
# Kernel launch overhead: instructions per launch through a packed call of a `cuda` module
# against a bare cuLaunchKernel, and of a `hip` module against a bare hipModuleLaunchKernel,
# counted with callgrind on the fake drivers of crates/device-kit/fake (or the CUDA driver in
# $TVM_CUDA_DRIVER; the ROCm row always uses the fake, whose code object is text). Per launch =
# (instructions of a run of 20,000 launches - those of a run of 10,000) / 10,000, so start-up
# and module loading cancel out.
# Prints one table with the ratio of each backend (target: at most 1.2x).
# Needs valgrind and gcc. Usage: scripts/launch-cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."

command -v valgrind >/dev/null || { echo "launch-cost: valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fakes=crates/device-kit/fake
gcc -shared -fPIC -O2 -o "$work/libfake_kernels.so" "$fakes/kernels.c"
fake() { # fake <source> <library>: a fake driver over the kernels library above
    gcc -shared -fPIC -O2 -I"$fakes" -DFAKE_KERNELS_LIBRARY="\"$work/libfake_kernels.so\"" \
        -o "$work/$2" "$1" -ldl -lpthread
    echo "$work/$2"
}
cuda_driver=${TVM_CUDA_DRIVER:-}
[[ -n $cuda_driver ]] || cuda_driver=$(fake "$fakes/libcuda_fake.c" libcuda_fake.so)
hip_runtime=$(fake "$fakes/libhip_fake.c" libamdhip64_fake.so)
cargo build -q --release -p device-bench --bin cuda_launch_cost --bin rocm_launch_cost

# Instructions of one run: callgrind's total ("summary:" line of its output file).
instructions() { # instructions <program> <driver> <mode> <launches>
    local out="$work/callgrind.$(basename "$1").$3.$4"
    valgrind --tool=callgrind --callgrind-out-file="$out" "$1" "$2" "$3" "$4" >/dev/null 2>&1
    awk '/^summary:/ { print $2 }' "$out"
}

per_launch() { # per_launch <program> <driver> <mode>
    local small large
    small=$(instructions "$1" "$2" "$3" 10000)
    large=$(instructions "$1" "$2" "$3" 20000)
    echo $(((large - small) / 10000))
}

row() { # row <backend> <program> <driver> <bare entry point>
    local bare packed ratio
    bare=$(per_launch "target/release/$2" "$3" bare)
    packed=$(per_launch "target/release/$2" "$3" packed)
    ratio=$(awk -v p="$packed" -v b="$bare" 'BEGIN { printf "%.2f", p / b }')
    printf '%-6s %-22s %-24s %8s %8s %7s\n' "$1" "$(basename "$3")" "$4" "$bare" "$packed" "${ratio}x"
}

printf '%-6s %-22s %-24s %8s %8s %7s\n' backend driver "bare call" bare packed ratio
row cuda cuda_launch_cost "$cuda_driver" cuLaunchKernel
row rocm rocm_launch_cost "$hip_runtime" hipModuleLaunchKernel
echo "(instructions per launch; packed = a packed call of a cuda / hip module; target <= 1.2x)"
