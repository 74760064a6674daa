#!/usr/bin/env bash
# Runs the CUDA backend on a real GPU: the Rust tests of device-cuda (fake driver), then
# scripts/gpu_check.py against the machine's driver (NVRTC add-one and strided kernels, copies,
# streams, DLPack with torch/cupy when installed). Prints one SKIP line and exits 0 where the
# machine has no CUDA driver or no GPU.
# Usage: scripts/gpu-check.sh   (PYTHON=... picks the interpreter that has tvm installed)
set -euo pipefail
cd "$(dirname "$0")/.."

py=${PYTHON:-.venv/bin/python}
[[ -x $py ]] || py=$(command -v python3)

if ! "$py" -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' >/dev/null 2>&1; then
    echo "gpu-check: SKIP: no CUDA driver here (libcuda.so.1 does not load), so no GPU to check"
    exit 0
fi
if command -v nvidia-smi >/dev/null 2>&1 && ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu-check: SKIP: the CUDA driver is installed but nvidia-smi lists no GPU"
    exit 0
fi
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L

if command -v cargo >/dev/null 2>&1; then
    cargo test -q -p device-cuda
fi
if ! "$py" -c 'import tvm, numpy' >/dev/null 2>&1; then
    # shellcheck source=scripts/python-env.sh
    source scripts/python-env.sh
    install_python_package numpy
fi
exec "$py" scripts/gpu_check.py
