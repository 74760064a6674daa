#!/usr/bin/env bash
# Runs every Rust test binary of the workspace (unit and integration tests, the C ABI and C++
# layer tests included) under valgrind memcheck: any invalid read or write, use of uninitialised
# memory or definite leak fails the run. Usage: bash scripts/memcheck.sh [CARGO_TEST_ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v valgrind >/dev/null 2>&1; then
    sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends valgrind >/dev/null
fi

# The test executables cargo builds, each with its package's directory, from its JSON messages
# (several packages have a test target named `it`: the name alone does not say whose it is).
# Largest first: the big suites start at once, and the small ones fill in beside them. The unit
# test binary of a proc-macro crate is left out: it links the compiler's libstd dynamically (only
# `cargo test` knows where that is), and its code runs inside the compiler, not in programs.
mapfile -t binaries < <(
    cargo test --workspace --locked --no-run --message-format=json "$@" 2>/dev/null |
        python3 -c '
import json, os, sys
found = []
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
        continue
    if msg["profile"]["test"] and "proc-macro" not in msg["target"]["kind"]:
        found.append((msg["executable"], os.path.dirname(msg["manifest_path"])))
for executable, package_dir in sorted(found, key=lambda f: -os.path.getsize(f[0])):
    print(executable + "\t" + package_dir)
'
)
if ((${#binaries[@]} == 0)); then
    echo "memcheck.sh: cargo built no test executables" >&2
    exit 1
fi

suppressions="$PWD/scripts/memcheck.supp"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# One binary under memcheck: its verdict as one line, its log after it when it failed.
check() {
    local binary=${1%%$'\t'*} package_dir=${1#*$'\t'} start=$SECONDS name
    name=$(basename "$binary")
    # Run from the package's directory, as cargo test does (tests find files relative to it).
    if (cd "$package_dir" && TVM_UNDER_VALGRIND=1 valgrind --quiet --error-exitcode=99 \
        --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite \
        --suppressions="$suppressions" \
        "$binary" --test-threads=2 -q >"$logs/$name.log" 2>&1); then
        echo "memcheck: $name clean ($((SECONDS - start)) s)"
    else
        echo "memcheck: $name FAILED ($((SECONDS - start)) s); its log:"
        cat "$logs/$name.log"
        return 1
    fi
}

# Valgrind runs a program's threads one at a time, so binaries run side by side, one per core
# (MEMCHECK_JOBS overrides); each verdict is printed whole as its binary ends.
jobs=${MEMCHECK_JOBS:-$(nproc)}
declare -A verdict_of=()
failed=0
# Waits for the next binary to end and prints its verdict.
collect() {
    local pid status=0
    wait -n -p pid || status=$?
    cat "${verdict_of[$pid]}"
    unset "verdict_of[$pid]"
    ((status == 0)) || failed=1
}
for entry in "${binaries[@]}"; do
    ((${#verdict_of[@]} < jobs)) || collect
    verdict="$logs/$(basename "${entry%%$'\t'*}").verdict"
    check "$entry" >"$verdict" 2>&1 &
    verdict_of[$!]=$verdict
done
while ((${#verdict_of[@]} > 0)); do
    collect
done
exit $failed
