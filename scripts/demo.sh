#!/usr/bin/env bash
# Builds the runtime and runs the demo: functions, containers, errors and tensors through the C ABI.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --quiet --locked -p tvm-ffi --example demo
