#!/usr/bin/env bash
# Builds and checks what a release uploads (docs/release.md): the cp311-abi3, cp310 and cp39 wheels
# with the distribution profile, each checked on the CPython versions it serves
# (scripts/python-versions.sh: manylinux tag against auditwheel, install, import, core tests), and
# the sdist (scripts/sdist-check.sh). Everything lands in target/release/.
# Usage: bash scripts/release-wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS=0
step() {
    printf '\n[release %d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"
}

step "libtvm_ffi.so (profile dist)"
cargo build --locked --profile dist -p tvm-ffi-shared
export TVM_FFI_LIBRARY=$PWD/target/dist/libtvm_ffi_shared.so
export TVM_WHEEL_PROFILE=dist
release=target/release
export TVM_WHEEL_DIR=$release

step "the abi3 wheel"
rm -rf "$release" "$release"-cp*
# shellcheck source=scripts/python-env.sh
source scripts/python-env.sh
install_python_package auditwheel

step "every Python version (the cp39 and cp310 wheels are built there)"
bash scripts/python-versions.sh
mv "$release"-cp39/tvm-*.whl "$release"-cp310/tvm-*.whl "$release/"
rmdir "$release"-cp39 "$release"-cp310

# Every wheel carries the library built above, byte for byte (the wheels pick it up from
# python/tvm/lib, which any other build in this checkout also writes).
for wheel_file in "$release"/tvm-*.whl; do
    unzip -p "$wheel_file" tvm/lib/libtvm_ffi.so | cmp -s - "$TVM_FFI_LIBRARY" || {
        echo "release-wheels.sh: $wheel_file holds another libtvm_ffi.so than $TVM_FFI_LIBRARY" >&2
        echo "(was something else building in this checkout meanwhile?)" >&2
        exit 1
    }
done

step "the sdist"
"$venv/bin/maturin" sdist --out "$release"
bash scripts/sdist-check.sh

step "done"
ls -l "$release"
