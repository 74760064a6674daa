#!/usr/bin/env bash
# Builds the source distribution, installs it into a fresh virtual environment the way pip does
# for a user (an isolated build with maturin from PyPI), and imports the package there: the
# sdist must hold everything a build needs (the workspace, Cargo.lock, the headers).
#
# The dev profile keeps the build short (the sdist's own default is the `dist` profile), and the
# build shares the dev wheel's Cargo target directories (target/maturin for the extension,
# target/libtvm_ffi for the runtime library it builds), so that the dependencies (wgpu, PyO3,
# ...) are not built again. Cargo names path crates relative to their
# workspace, so the workspace's own crates are cleaned from it before the build (the unpacked
# sdist's files carry the archive's times, which can predate the checkout's artifacts) and after
# it (so that the checkout's next build does not take the sdist's artifacts as its own).
#
# Usage: bash scripts/sdist-check.sh [PYTHON]   (default: python3)
set -euo pipefail
cd "$(dirname "$0")/.."

python=${1:-python3}
work=target/sdist-check
rm -rf "$work/dist" "$work/venv"
mkdir -p "$work/dist"

maturin=.venv/bin/maturin
[[ -x $maturin ]] || maturin=maturin
"$maturin" sdist --out "$work/dist"
sdists=("$work"/dist/tvm-*.tar.gz)
if ((${#sdists[@]} != 1)); then
    echo "sdist-check: expected one sdist in $work/dist, found: ${sdists[*]}" >&2
    exit 1
fi

target_dir=$PWD/target/maturin
library_target_dir=$PWD/target/libtvm_ffi
mapfile -t members < <(cargo metadata --no-deps --format-version 1 --locked |
    python3 -c 'import json, sys; print("\n".join(p["name"] for p in json.load(sys.stdin)["packages"]))')
clean_members() {
    for member in "${members[@]}"; do
        for dir in "$target_dir" "$library_target_dir"; do
            cargo clean --quiet --locked --target-dir "$dir" --profile dev -p "$member" \
                2>/dev/null || true
        done
    done
}
clean_members
trap clean_members EXIT

"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
CARGO_TARGET_DIR=$target_dir TVM_FFI_LIBRARY_TARGET_DIR=$library_target_dir \
    MATURIN_PEP517_ARGS="--profile dev" \
    "$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "${sdists[0]}"

# Outside the source tree, so that only the installed package can be imported.
(cd "$work" && venv/bin/python - <<'PY'
import os

import tvm
from tvm.support import libinfo

assert tvm.ffi.get_global_func("ffi.Map") is not None
assert tvm.ffi.Array([1, 2, 3])[2] == 3
header = os.path.join(libinfo.find_include_path()[0], "tvm", "ffi", "c_api.h")
assert os.path.isfile(header), header
# The runtime library the sdist's build made, inside the installed package.
(library,) = libinfo.find_lib_path()
assert library == os.path.join(os.path.dirname(tvm.__file__), "lib", "libtvm_ffi.so"), library
print(f"sdist-check: {os.path.basename(tvm.__file__)} from {os.path.dirname(tvm.__file__)} imports; headers at {header}; runtime library {library}")
PY
)
