#!/usr/bin/env bash
# Runs Apache TVM's workloads (tests/apache_tvm/workloads.py: kernels built with LLVM, a parallel
# loop, TVMScript, structural equality and hashing, JSON graphs, Relax on its VM, export and
# reload, time_evaluator, ...) on apache-tvm 0.27 twice, each case in a process of its own: on
# apache-tvm-ffi's libtvm_ffi.so, and on ours in its place. Prints one line per
# case and a table of both sides' outcomes (passed, failed, crashed, timeout) with the counts.
#
# Set-up (cached, git-ignored): the virtual environment .venv-apache-tvm (made from PyPI on first
# use, tests/python/apache_tvm_env.py) and a site directory under target/apache-tvm/ with a copy
# of the tvm_ffi package whose lib/libtvm_ffi.so is ours (tests/python/apache_tvm_sides.py).
# Each case's last result per side is kept in target/apache-tvm/results/<side>/<case>.json.
#
# Usage: bash scripts/apache-tvm-suite.sh [--lib PATH] [--json FILE] [CASE...]
#   --lib   our library (default: $TVM_TEST_LIBTVM_FFI, else tvm/lib/libtvm_ffi.so of the tvm
#           package in .venv, the dev wheel; target/debug/libtvm_ffi_shared.so after
#           `cargo build -p tvm-ffi-shared`)
#   --json  also write every result (with the end of each process's output) to FILE
#   CASE    cases to run (default: all; `python tests/apache_tvm/workloads.py --list`)
# Exits 0 when every case passes on ours, 1 otherwise, 2 without an Apache TVM environment.
set -euo pipefail
cd "$(dirname "$0")/.."

case ${1:-} in
-h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
python=${PYTHON:-.venv/bin/python}
if [[ ! -x $python ]]; then
    echo "apache-tvm-suite: no $python; set up the dev environment first (scripts/python-env.sh)" >&2
    exit 1
fi
exec "$python" tests/python/apache_tvm_sides.py "$@"
