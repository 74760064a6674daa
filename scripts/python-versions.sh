#!/usr/bin/env bash
# The package on every CPython it supports (3.9 to 3.13): for each version, the wheel pip would
# pick there (the cp39 and cp310 wheels, the cp311-abi3 wheel from 3.11 on) is installed into a
# venv of that version, `import tvm` works there, and the core test files pass. Also checks every
# wheel's manylinux tag against the symbol versions of the ELF files inside (auditwheel show).
#
# Wheels are built by python-env.sh's `build_wheel` into $TVM_WHEEL_DIR-cp39 and -cp310 (default
# target/wheels-cp39, ...); the abi3 wheel is the one in $TVM_WHEEL_DIR. test-all.sh calls this
# after the main venv exists, with $TVM_FFI_LIBRARY set. The full suite runs on the main venv's
# version (3.11 in CI); here each other version runs the files below.
# Usage: bash scripts/python-versions.sh [VERSION...]   (default: 3.9 3.10 3.11 3.12 3.13)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/python-env.sh
source scripts/python-env.sh

venv=${venv:-.venv}
abi3_wheel=${wheel:-}
wheel_dir=${TVM_WHEEL_DIR:-target/wheels}
if [[ -z $abi3_wheel ]]; then
    abi3_wheels=("$wheel_dir"/tvm-*-cp311-abi3-*.whl)
    abi3_wheel=${abi3_wheels[0]}
fi
if [[ ! -f $abi3_wheel || ! -x $venv/bin/maturin || ! -x $venv/bin/auditwheel ]]; then
    echo "python-versions.sh: run after python-env.sh's install_python_package (scripts/test-all.sh):" \
        "it needs $venv with maturin and auditwheel, and the abi3 wheel in $wheel_dir" >&2
    exit 1
fi

# The files that exercise the extension's conversions, calls, objects, containers, tensors,
# errors, dataclasses, modules and threads, and RPC's Python side (asyncio), without device drivers.
core_tests=(
    tests/python/test_convert.py tests/python/test_fast_call.py tests/python/test_function.py
    tests/python/test_object.py tests/python/test_containers.py tests/python/test_tensor.py
    tests/python/test_device_dtype.py tests/python/test_error.py tests/python/test_dataclasses.py
    tests/python/test_dataclass_enums.py tests/python/test_dlpack_exchange.py
    tests/python/test_module.py tests/python/test_str_args.py tests/python/test_import.py
    tests/python/test_structural.py tests/python/test_shared_graphs.py tests/python/test_deep_input.py
    tests/python/test_threads.py tests/python/test_rpc.py tests/python/test_rpc_sessions.py
)
# What those files import (test_dlpack_exchange.py builds a CPython extension: Python.h of each
# version, which pyenv's builds have), and mypy, which checks the package against the standard
# library of the first version (3.9 by default).
test_packages=(numpy ml_dtypes pytest pytest-xdist hypothesis setuptools)

# The interpreter of a version: pythonX.Y on PATH, else pyenv's newest build of it.
find_python() {
    local version=$1 candidate
    if command -v "python$version" >/dev/null 2>&1 &&
        "python$version" -c "import sys; sys.exit(f'{sys.version_info[0]}.{sys.version_info[1]}' != '$version')" 2>/dev/null; then
        command -v "python$version"
        return
    fi
    local root
    root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
    for candidate in $(ls -d "$root/versions/$version".* 2>/dev/null | sort -V -r); do
        if [[ -x $candidate/bin/python$version ]]; then
            echo "$candidate/bin/python$version"
            return
        fi
    done
    return 1
}

# The manylinux tag in a wheel's name must be one auditwheel finds the wheel consistent with:
# no ELF file inside (the extension, libtvm_ffi.so) needs a newer glibc or libstdc++ than it says.
check_tag() {
    local wheel_file=$1 report tag needed
    tag=$(basename "$wheel_file" .whl | awk -F- '{print $NF}')
    if [[ $tag != manylinux_* ]]; then
        echo "python-versions.sh: $wheel_file is not tagged manylinux ($tag)" >&2
        return 1
    fi
    report=$("$venv/bin/auditwheel" show "$wheel_file")
    needed=$(grep -o 'platform tag: "[a-z0-9_]*"' <<<"$report" | head -1 | cut -d'"' -f2)
    local tag_glibc=${tag#manylinux_} needed_glibc=${needed#manylinux_}
    tag_glibc=${tag_glibc%_x86_64}
    needed_glibc=${needed_glibc%_x86_64}
    if [[ -z $needed ]] || ! printf '%s\n%s\n' "${needed_glibc/_/.}" "${tag_glibc/_/.}" | sort -V -C; then
        echo "python-versions.sh: $wheel_file is tagged $tag, but auditwheel finds it needs ${needed:-?}:" >&2
        echo "$report" >&2
        return 1
    fi
    echo "  $(basename "$wheel_file"): tag $tag; auditwheel: consistent with $needed"
}

versions=("$@")
((${#versions[@]})) || versions=(3.9 3.10 3.11 3.12 3.13)
summary=()
missing=()
for version in "${versions[@]}"; do
    if ! python=$(find_python "$version"); then
        missing+=("$version")
        continue
    fi
    tag=cp${version/./}
    version_venv=.venv-py$version
    echo "[python-versions] $version: $python"
    if ! "$version_venv/bin/python" -c "import sys; sys.exit(f'{sys.version_info[0]}.{sys.version_info[1]}' != '$version')" >/dev/null 2>&1; then
        "$python" -m venv --clear "$version_venv"
    fi
    packages=("${test_packages[@]}")
    # (websockets: the proxy's web side, which mypy follows)
    [[ $version != "${versions[0]}" ]] || packages+=(mypy "websockets>=13")
    "$version_venv/bin/python" -m pip install --quiet --disable-pip-version-check "${packages[@]}"
    if [[ $version == 3.9 || $version == 3.10 ]]; then
        build_wheel "$version_venv/bin/python" "$wheel_dir-$tag"
        version_wheel=$wheel
    else
        version_wheel=$abi3_wheel
    fi
    check_tag "$version_wheel"
    "$version_venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall \
        --no-deps "$version_wheel"
    # Outside the checkout: the installed package is imported, not python/tvm.
    (cd / && "$OLDPWD/$version_venv/bin/python" -c 'import tvm, tvm.ffi, tvm.runtime, tvm.rpc, tvm.support.cpp; print("  import tvm:", tvm.__file__)')
    if [[ $version == "${versions[0]}" ]]; then
        (cd python && "../$version_venv/bin/python" -m mypy -p tvm)
    fi
    log=target/python-versions-$version.log
    if ! "$version_venv/bin/python" -m pytest -n 2 -q -p no:cacheprovider "${core_tests[@]}" >"$log" 2>&1; then
        cat "$log"
        echo "python-versions.sh: the core tests failed on Python $version" >&2
        exit 1
    fi
    cat "$log"
    result=$(tail -1 "$log")
    summary+=("Python $("$python" -c 'import platform; print(platform.python_version())') ($(basename "$version_wheel")): $result")
done

echo
echo "[python-versions] summary"
for line in "${summary[@]}"; do
    echo "  $line"
done
if ((${#missing[@]})); then
    echo "python-versions.sh: no interpreter found for Python ${missing[*]} (python3.X on PATH or pyenv's versions)" >&2
    exit 1
fi
