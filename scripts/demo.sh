#!/usr/bin/env bash
# Installs the tvm package into .venv (building the wheel) and runs the demo: native functions,
# Python callbacks, containers, zero-copy tensors and errors across the boundary.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/python-env.sh
source scripts/python-env.sh
install_python_package numpy >/dev/null
echo "demo.sh: running examples/demo.py" >&2
"$py" examples/demo.py
