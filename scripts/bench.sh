#!/usr/bin/env bash
# Benchmarks: the C ABI table (instructions per operation under callgrind, benches/c), the Rust
# criterion benchmarks of the core, then the Python side-by-side tables of `tvm` (this repository,
# `dist` profile build) against the reference `apache-tvm-ffi==0.1.15.post2` and against static
# nanobind bindings (an extension bench_ffi.py builds with g++ from the `nanobind` package), with
# the memory per held object, then the backend API of compiled kernels and RPC on loopback: `tvm`
# against `apache-tvm==0.27.0.post1` (and a raw socket for RPC).
#
# Usage: bash scripts/bench.sh [--quick] [--c-only | --python-only] [-- BENCH_FFI_ARGS...]
#   --quick        short runs: criterion's --quick, one round of tiny iteration counts in Python,
#                  and two RPC rounds of 64 MiB transfers only
#   --c-only       the C ABI table alone (needs valgrind and a C compiler)
#   --python-only  the dist wheel and the Python tables alone (no C ABI, criterion or RPC)
#   -- ...         anything after `--` goes to benches/python/bench_ffi.py (e.g. `-- --rounds 11`)
#
# Prepares its own virtual environments, .venv-bench and .venv-bench-apache-tvm, so the reference
# packages never land in the test environment (.venv). Exits non-zero on errors only: rows that
# miss their target are marked in the tables, not failures. docs/benchmarks*.md say how to read them.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
c_only=0
python_only=0
bench_args=()
while (($#)); do
    case "$1" in
        --quick) quick=1 ;;
        --c-only) c_only=1 ;;
        --python-only) python_only=1 ;;
        --) shift; bench_args+=("$@"); break ;;
        -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

if ((c_only && python_only)); then
    echo "bench.sh: --c-only and --python-only exclude each other" >&2
    exit 2
fi

start=$SECONDS
phase() { printf '\n==== %s (%ds elapsed)\n' "$1" $((SECONDS - start)); }

# What is measured: the working tree as it is now, committed or not.
echo "source: $(git describe --always --dirty 2>/dev/null || echo 'not a git checkout'), $(date -u '+%Y-%m-%d %H:%M UTC')"

# ---- the benchmark environment -----------------------------------------------------------------
phase "virtual environment .venv-bench"
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "bench.sh: python3 is $(python3 --version 2>&1); the benchmarks measure the abi3 wheel, which needs 3.11 or later" >&2
    exit 1
fi
venv=.venv-bench
if ! "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then
    python3 -m venv --clear "$venv"
fi
py="$venv/bin/python"
"$py" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$py" -m pip install --quiet --disable-pip-version-check \
    "maturin>=1.9,<2" numpy "apache-tvm-ffi==0.1.15.post2" nanobind

# ---- C ABI: instructions per operation ---------------------------------------------------------
if ((!python_only)); then
    phase "C ABI: tvm vs tvm_ffi under callgrind (benches/c/bench_c_abi.py)"
    # Our libtvm_ffi.so: every TVMFFI* export of tvm-ffi-capi plus the testing.* functions, built
    # with the profile of the wheel.
    cargo build --locked --profile dist --quiet -p c-abi-bench
    mkdir -p target/bench
    "$py" benches/c/bench_c_abi.py --ours-lib target/dist/libtvm_ffi_c_abi_bench.so \
        --json target/bench/bench_c_abi.json
    if ((c_only)); then
        phase "done"
        echo "JSON results: target/bench/bench_c_abi.json"
        exit 0
    fi
fi

# apache-tvm 0.27 for the RPC rows, in an environment of its own: its import name is `tvm` too.
# Its RPC needs cloudpickle, tornado and psutil, which it does not declare.
phase "virtual environment .venv-bench-apache-tvm"
apache_venv=.venv-bench-apache-tvm
apache_py="$apache_venv/bin/python"
apache_reqs=("apache-tvm==0.27.0.post1" cloudpickle tornado psutil numpy)
apache_ready='import importlib.metadata as m, sys
sys.exit(m.version("apache-tvm") != "0.27.0.post1" or not all(
    m.version(p) for p in ("cloudpickle", "tornado", "psutil", "numpy")))'
if ((!python_only)) && ! "$apache_py" -c "$apache_ready" >/dev/null 2>&1; then
    if ! "$apache_py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then
        python3 -m venv --clear "$apache_venv"
    fi
    "$apache_py" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$apache_py" -m pip install --quiet --disable-pip-version-check "${apache_reqs[@]}"
fi

# The current tree as the wheel `pip install .` builds (the `dist` profile: fat LTO, one codegen
# unit). Its own target directory: the dev wheel (target/maturin) and the cargo commands (target/)
# keep their builds, so switching between them rebuilds nothing.
phase "dist wheel of tvm (maturin build --profile dist)"
rm -f target/wheels-bench/tvm-*.whl
"$venv/bin/maturin" build --profile dist --locked --out target/wheels-bench \
    --target-dir target/maturin-release --interpreter "$py"
wheels=(target/wheels-bench/tvm-*.whl)
if ((${#wheels[@]} != 1)) || [[ ! -f ${wheels[0]} ]]; then
    echo "bench.sh: expected one tvm wheel in target/wheels-bench, found: ${wheels[*]}" >&2
    exit 1
fi
"$py" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "${wheels[0]}"

# ---- Rust: criterion ---------------------------------------------------------------------------
if ((!python_only)); then
    phase "Rust criterion benchmarks (cargo bench -p tvm-ffi --bench call --bench map)"
    criterion_args=()
    ((quick)) && criterion_args+=(--quick)
    cargo bench --locked -p tvm-ffi --bench call --bench map -- "${criterion_args[@]}"
fi

# ---- Python: side by side ----------------------------------------------------------------------
phase "Python: tvm vs tvm_ffi vs nanobind, interleaved (benches/python/bench_ffi.py)"
python_args=(--json target/bench/bench_ffi.json)
((quick)) && python_args+=(--quick)
mkdir -p target/bench
# The testing.* functions the rows call, optimized like the runtime they call into.
cargo build --locked --release --quiet -p tvm-ffi-testing --lib
TVM_FFI_TESTING_LIB="$PWD/target/release/libtvm_ffi_testing.so" \
    "$py" benches/python/bench_ffi.py "${python_args[@]}" "${bench_args[@]}"

phase "Python: from_dlpack through DLPack's C exchange API (benches/python/bench_exchange.py)"
exchange_args=(--json target/bench/bench_exchange.json)
((quick)) && exchange_args+=(--number 2000 --repeat 2)
"$py" benches/python/bench_exchange.py "${exchange_args[@]}"

# ---- Python: RPC -------------------------------------------------------------------------------
if ((python_only)); then
    phase "done"
    echo "JSON results: target/bench/bench_ffi.json, target/bench/bench_exchange.json"
    exit 0
fi
phase "Backend API: tvm vs apache-tvm on kernels Apache TVM compiled (benches/backend/bench_backend.py)"
backend_args=(--ours "$py" --apache "$apache_py" --json target/bench/bench_backend.json)
((quick)) && backend_args+=(--quick)
"$py" benches/backend/bench_backend.py "${backend_args[@]}"

phase "Python RPC: tvm vs apache-tvm vs raw socket (benches/python/bench_rpc.py)"
rpc_args=(--ours "$py" --apache "$apache_py" --json target/bench/bench_rpc.json)
((quick)) && rpc_args+=(--quick)
"$py" benches/python/bench_rpc.py "${rpc_args[@]}"

# Needs Chromium (scripts/test-all.sh installs it) and the websockets package.
phase "WebGPU: the browser runtime vs the native backend (benches/python/bench_browser.py)"
if command -v chromium >/dev/null 2>&1 && "$py" -c "import websockets" 2>/dev/null; then
    browser_args=(--json target/bench/bench_browser.json)
    ((quick)) && browser_args+=(--rounds 2)
    "$py" benches/python/bench_browser.py "${browser_args[@]}"
else
    echo "skipped: no chromium on PATH, or no websockets in $py"
fi

phase "done"
echo "JSON results: target/bench/bench_c_abi.json, target/bench/bench_ffi.json, target/bench/bench_exchange.json, target/bench/bench_rpc.json, target/bench/bench_browser.json; criterion reports: target/criterion/"
