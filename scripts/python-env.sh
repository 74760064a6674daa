# Shared by demo.sh and test-all.sh (sourced): installs the system packages the Python side
# needs, makes the project's virtual environment .venv with the given pip packages, builds the
# wheel with the fast dev profile (or $TVM_WHEEL_PROFILE) into target/wheels (or $TVM_WHEEL_DIR)
# and installs it. Sets $venv, $py and $wheel.
# Usage: install_python_package PIP_PACKAGE...

install_python_package() {
    # System tools the Python tests use: gcc and readelf (binutils) build and inspect C kernels, and
    # python3 (3.9 or later) with venv/ensurepip makes the virtual environment.
    apt_packages=()
    command -v gcc >/dev/null 2>&1 || apt_packages+=(gcc libc6-dev)
    command -v readelf >/dev/null 2>&1 || apt_packages+=(binutils)
    # pkg-config builds a C host against the package's tvm_ffi.pc (test_runtime_library.py).
    command -v pkg-config >/dev/null 2>&1 || apt_packages+=(pkgconf)
    command -v python3 >/dev/null 2>&1 || apt_packages+=(python3)
    if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
        apt_packages+=(python3-venv)
    fi
    # Python's C headers: test_dlpack_exchange.py builds a CPython extension with gcc.
    if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import os, sysconfig; os.stat(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' >/dev/null 2>&1; then
        apt_packages+=(python3-dev)
    fi
    if ((${#apt_packages[@]})); then
        sudo=""
        [[ $(id -u) -eq 0 ]] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
            "${apt_packages[@]}" >/dev/null
    fi
    if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))'; then
        echo "python-env.sh: python3 is $(python3 --version 2>&1); the tvm package needs 3.9 or later" >&2
        exit 1
    fi

    # A virtual environment of the project, recreated when it is missing or broken.
    echo "python-env.sh: the virtual environment .venv and its packages (pip: maturin $*)" >&2
    venv=.venv
    if ! "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 9))' >/dev/null 2>&1; then
        python3 -m venv --clear "$venv"
    fi
    py="$venv/bin/python"
    "$py" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$py" -m pip install --quiet --disable-pip-version-check \
        "maturin>=1.9,<2" "$@"

    echo "python-env.sh: building the tvm wheel (Rust; a first build takes 5 to 10 minutes on" \
        "2 cores, later ones seconds; cargo's progress follows)" >&2
    build_wheel "$py" "${TVM_WHEEL_DIR:-target/wheels}"
    echo "python-env.sh: installing $(basename "$wheel") into .venv" >&2
    "$py" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
}

# Builds the wheel for the interpreter PYTHON into OUT_DIR (emptied of earlier tvm wheels first)
# and sets $wheel; the cargo profile is $TVM_WHEEL_PROFILE, else the fast `dev` profile. 3.11 and later get the abi3 wheel (cp311-abi3, for
# every later version too); 3.9 and 3.10 a wheel of their own version (crates/tvm-python's `abi3`
# feature off). maturin builds the extension module with other PyO3 settings than the workspace's
# cargo commands, so it gets target directories of its own: sharing target/ would rebuild pyo3 and
# tvm-python on every switch. The version-specific builds share one (only pyo3 and tvm-python
# differ between them). The runtime library comes from $TVM_FFI_LIBRARY when set.
# Usage: build_wheel PYTHON OUT_DIR
build_wheel() {
    local python=$1 out_dir=$2 profile=${TVM_WHEEL_PROFILE:-dev}
    local target_dir=target/maturin
    [[ $profile == dev ]] || target_dir=target/maturin-$profile
    local options=(--locked --profile "$profile" --out "$out_dir" --interpreter "$python")
    if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
        options+=(--no-default-features)
        target_dir=$target_dir-versioned
    fi
    mkdir -p "$out_dir"
    rm -f "$out_dir"/tvm-*.whl
    # The wheel ships python/tvm/lib/libtvm_ffi.so as it finds it. tvm-python's build script puts
    # the library there only when it runs, not when cargo finds the extension up to date (another
    # build may have put another library there since), so a given library is put there here.
    if [[ -n ${TVM_FFI_LIBRARY:-} ]] && ! cmp -s "$TVM_FFI_LIBRARY" python/tvm/lib/libtvm_ffi.so; then
        mkdir -p python/tvm/lib
        cp "$TVM_FFI_LIBRARY" python/tvm/lib/libtvm_ffi.so
    fi
    "$venv/bin/maturin" build "${options[@]}" --target-dir "$target_dir"
    local wheels=("$out_dir"/tvm-*.whl)
    if ((${#wheels[@]} != 1)) || [[ ! -f ${wheels[0]} ]]; then
        echo "python-env.sh: expected one wheel in $out_dir, found: ${wheels[*]}" >&2
        exit 1
    fi
    wheel=${wheels[0]}
}
