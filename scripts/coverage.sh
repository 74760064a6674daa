#!/usr/bin/env bash
# Line coverage of the core crates (tvm-ffi-sys, tvm-ffi, tvm-ffi-capi, tvm-runtime) by the
# workspace's Rust tests, with LLVM source-based coverage (-C instrument-coverage). Fails when
# the combined figure of those crates is below the threshold (90% unless COVERAGE_MIN says
# otherwise); prints each crate's figure and its least-covered files too.
#
# Not counted: test code (tests/, `#[cfg(test)]` items in src/), benches, examples, fuzz/, the
# C ABI test crate, tvm-ffi-testing and the PyO3 glue tvm-python (the Python suite covers it).
#
# Tools: llvm-profdata and llvm-cov of an LLVM whose profile formats match rustc's (the rustup
# component llvm-tools is not used: it is not always reachable). Debian's llvm-19 reads the
# profiles of rustc 1.95 (LLVM 22); it is installed with apt when missing. LLVM_PROFDATA and
# LLVM_COV override the choice.
#
# Usage: bash scripts/coverage.sh            (build dir: target/coverage, report: target/coverage/report)
#        COVERAGE_MIN=85 bash scripts/coverage.sh
set -euo pipefail
cd "$(dirname "$0")/.."

min=${COVERAGE_MIN:-90}
llvm_version=19

if [[ -z ${LLVM_PROFDATA:-} || -z ${LLVM_COV:-} ]]; then
    llvm_bin=/usr/lib/llvm-$llvm_version/bin
    if [[ ! -x $llvm_bin/llvm-profdata || ! -x $llvm_bin/llvm-cov ]]; then
        sudo=""
        [[ $(id -u) -eq 0 ]] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
            "llvm-$llvm_version" >/dev/null
    fi
    LLVM_PROFDATA=$llvm_bin/llvm-profdata
    LLVM_COV=$llvm_bin/llvm-cov
fi

# An instrumented build of its own, so that the everyday target/ keeps its artifacts.
target_dir=$PWD/target/coverage
profile_dir=$target_dir/profiles
report_dir=$target_dir/report
rm -rf "$profile_dir" "$report_dir"
mkdir -p "$profile_dir" "$report_dir"

export CARGO_TARGET_DIR=$target_dir
export RUSTFLAGS="${RUSTFLAGS:-} -C instrument-coverage"
# One file per process and per instrumented module: tests start subprocesses (the embedding
# example) and load shared libraries.
export LLVM_PROFILE_FILE=$profile_dir/%p-%8m.profraw

# wgpu and naga are left out of the instrumented build (minutes on 2 cores; the WebGPU tests
# exercise wgpu far more than the core): the packages that pull them in are excluded from the
# workspace run (the WebGPU backend, the device benchmarks) or built without the `webgpu`
# feature (the runtime library, whose tests run as a second set).
excluded=(--exclude device-webgpu --exclude device-bench --exclude tvm-ffi-shared)
library=(-p tvm-ffi-shared --no-default-features --features vulkan,cuda,rocm)

# Builds one set and lists every executable it runs (test binaries and the examples that tests
# start as subprocesses), for llvm-cov's mapping.
test_executables() {
    cargo test "$@" --locked --no-run --message-format=json 2>/dev/null |
        python3 -c '
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
        print(msg["executable"])
'
}
mapfile -t objects < <(test_executables --workspace "${excluded[@]}"; test_executables "${library[@]}")
if ((${#objects[@]} == 0)); then
    echo "coverage.sh: cargo built no test executables" >&2
    exit 1
fi
# Doctests are not instrumented (that needs nightly rustdoc flags); `cargo test` runs them.
cargo test --workspace "${excluded[@]}" --locked --lib --bins --tests --quiet
cargo test "${library[@]}" --locked --lib --bins --tests --quiet

shopt -s nullglob
profiles=("$profile_dir"/*.profraw)
if ((${#profiles[@]} == 0)); then
    echo "coverage.sh: the tests wrote no profiles" >&2
    exit 1
fi
"$LLVM_PROFDATA" merge --sparse --output "$profile_dir/merged.profdata" "${profiles[@]}"

object_args=()
for object in "${objects[@]:1}"; do
    object_args+=(--object "$object")
done
"$LLVM_COV" export --format=lcov --instr-profile "$profile_dir/merged.profdata" \
    --ignore-filename-regex='/(\.cargo|rustc)/' "${objects[0]}" "${object_args[@]}" \
    >"$report_dir/lcov.info"

python3 - "$PWD" "$report_dir" "$min" <<'EOF'
import os, re, sys

root, report_dir, minimum = sys.argv[1], sys.argv[2], float(sys.argv[3])
lcov = os.path.join(report_dir, "lcov.info")
core = ["tvm-ffi-sys", "tvm-ffi", "tvm-ffi-capi", "tvm-runtime"]


def test_only_lines(path):
    """Line numbers of `#[cfg(test)]` items: from the attribute to the item's closing brace
    at the item's indentation (or to its `;`)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    skip, i = set(), 0
    while i < len(lines):
        if lines[i].strip() != "#[cfg(test)]":
            i += 1
            continue
        start, j = i, i + 1
        while j < len(lines) and lines[j].strip().startswith("#["):
            j += 1
        if j == len(lines):
            break
        indent = lines[j][: len(lines[j]) - len(lines[j].lstrip())]
        end = j
        if not lines[j].rstrip().endswith(";"):
            while end < len(lines) and lines[end].rstrip() != indent + "}":
                end += 1
        skip.update(range(start + 1, end + 2))
        i = end + 1
    return skip


# Line hits per source file; a line reached through several binaries counts once.
hits = {}
path = None
with open(lcov, encoding="utf-8") as f:
    for line in f:
        if line.startswith("SF:"):
            path = os.path.relpath(line[3:].strip(), root)
            hits.setdefault(path, {})
        elif line.startswith("DA:"):
            number, count = line[3:].split(",")[:2]
            number = int(number)
            hits[path][number] = hits[path].get(number, 0) + int(count)

per_crate, per_file, missed = {}, [], []
for path, lines in sorted(hits.items()):
    m = re.fullmatch(r"crates/([^/]+)/src/.*\.rs", path)
    if not m or m.group(1) not in core:
        continue
    skip = test_only_lines(os.path.join(root, path))
    counted = {n: c for n, c in lines.items() if n not in skip}
    covered = sum(1 for c in counted.values() if c > 0)
    total = len(counted)
    if total == 0:
        continue
    crate = per_crate.setdefault(m.group(1), [0, 0])
    crate[0] += covered
    crate[1] += total
    per_file.append((covered / total, path, covered, total))
    missed.append((path, sorted(n for n, c in counted.items() if c == 0)))


def pct(covered, total):
    return 100.0 * covered / total if total else 100.0


print("\nLine coverage of the core crates (test code, benches, examples excluded):")
for name in core:
    covered, total = per_crate.get(name, [0, 0])
    print(f"  {name:<14} {pct(covered, total):6.2f}%  ({covered}/{total} lines)")
covered = sum(c for c, _ in per_crate.values())
total = sum(t for _, t in per_crate.values())
print(f"  {'combined':<14} {pct(covered, total):6.2f}%  ({covered}/{total} lines)")
print("\nLeast-covered files:")
for ratio, path, c, t in sorted(per_file)[:10]:
    print(f"  {100 * ratio:6.2f}%  {t - c:4d} missed  {path}")
with open(os.path.join(report_dir, "missed-lines.txt"), "w", encoding="utf-8") as out:
    for path, numbers in missed:
        if numbers:
            out.write(f"{path}: {' '.join(map(str, numbers))}\n")
if pct(covered, total) < minimum:
    print(f"\ncoverage.sh: combined line coverage {pct(covered, total):.2f}% is below {minimum}%")
    sys.exit(1)
EOF
echo "reports: $report_dir/lcov.info, $report_dir/missed-lines.txt (uncovered lines per file)"
