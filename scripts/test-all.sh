#!/usr/bin/env bash
# Installs what the tests need and runs the whole test suite (Rust, C ABI, Python).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's start, with the time since the run began, so a slow step shows in the log.
step() {
    printf '\n[test-all %d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"
}

# Vulkan on the CPU for the device-vulkan tests (Mesa lavapipe), the validation layer the debug
# test runs enable, and the tools the tests compile and check GLSL shaders with; Chromium for
# the browser runtime's tests (test_rpc_browser.py: headless, WebGPU on SwiftShader).
apt_packages=()
for package in mesa-vulkan-drivers libvulkan1 vulkan-validationlayers glslang-tools spirv-tools \
    chromium; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
        apt_packages+=("$package")
done
if ((${#apt_packages[@]})) && command -v apt-get >/dev/null 2>&1; then
    sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
        "${apt_packages[@]}" >/dev/null
fi
# Where this script installs Chromium, the browser tests fail rather than skip without it.
if command -v apt-get >/dev/null 2>&1; then
    export TVM_REQUIRE_BROWSER=1
fi

for component in rustfmt clippy; do
    if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
        echo "test-all.sh: the Rust component '$component' is missing: rustup component add $component" >&2
        exit 1
    fi
done
step "rustfmt and clippy"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The extension as the cp39/cp310 wheels build it: for one interpreter, without the stable ABI.
cargo clippy -p tvm-python --no-default-features --all-targets --locked -- -D warnings
# (includes the bounded fuzz pass, fuzz/tests/corpus.rs; long runs: bash scripts/fuzz.sh)
step "cargo test"
cargo test --workspace --locked
# Line coverage of the core crates by those tests (LLVM source-based): below 90% fails the run.
step "Rust coverage"
bash scripts/coverage.sh
# The same tests under valgrind memcheck: invalid accesses and definite leaks fail the run.
step "memcheck"
bash scripts/memcheck.sh
# libtvm_ffi_testing.so: the testing.* functions the Python suite loads (tests/python/conftest.py).
cargo build --locked --quiet -p tvm-ffi-testing --lib
# The runtime library the wheel ships, built here with the dependencies `cargo test` already built
# and handed to the wheel build (tvm-python's build script would otherwise build it all again in a
# target directory of its own). The sdist check below still builds it the way `pip install` does.
cargo build --locked --quiet -p tvm-ffi-shared
runtime_library="$PWD/target/debug/libtvm_ffi_shared.so"

# ---- Python: build the wheel, install it into .venv, lint, run the pytest suites ----------------

step "the wheel and the Python tools"
# shellcheck source=scripts/python-env.sh
source scripts/python-env.sh
# (cmake: a C host is built with the package's CMake package, test_runtime_library.py; ninja:
# tvm.support.cpp builds through it when it is installed, test_support_cpp.py; websockets: the
# proxy's web side, test_rpc_proxy_web.py)
TVM_FFI_LIBRARY="$runtime_library" install_python_package numpy ml_dtypes pytest pytest-cov \
    pytest-xdist "coverage>=7.10" hypothesis ruff abi3audit auditwheel setuptools wheel mypy tqdm \
    mkdocs cmake ninja "websockets>=13"
"$venv/bin/abi3audit" --strict --report "$wheel"
echo

"$venv/bin/ruff" check python tests examples benches
# The stub of the extension against the extension itself, and the package type-checked.
"$py" -m mypy.stubtest tvm._native
(cd python && "../$py" -m mypy -p tvm)
# The user guide builds (its examples run as tests/python/test_guide.py).
"$venv/bin/mkdocs" build --strict --quiet
# The sdist builds and installs into a fresh environment, as `pip install tvm-<v>.tar.gz` does.
step "the sdist"
bash scripts/sdist-check.sh

# The wheels of CPython 3.9 to 3.13 (cp39, cp310, and the abi3 wheel above): each one's manylinux
# tag checked by auditwheel, installed into a venv of its version and run through the core tests
# (venvs cached as .venv-py3.X). The full suite runs below on .venv's version; the other versions
# here (all five when .venv's is none of them).
step "Python 3.9 to 3.13"
main_version=$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
other_versions=()
for version in 3.9 3.10 3.11 3.12 3.13; do
    [[ $version == "$main_version" ]] || other_versions+=("$version")
done
bash scripts/python-versions.sh "${other_versions[@]}"

# The runtime library in place of apache-tvm-ffi 0.1.15.post2's libtvm_ffi.so: its Python suite
# (against apache-tvm-ffi's results, recorded once and cached) and its Rust crates' tests, with no
# Python in their processes. Their venvs, sources and builds are cached under target/ and
# .venv-dropin. (Apache TVM's own workloads on our library run in pytest below.)
step "apache-tvm-ffi's suites on our library"
bash scripts/dropin-suite.sh --side ours
bash scripts/apache-rust-tests.sh --side ours

# pytest exits 5 when it collects no tests; with `set -e` that fails the script like any error.
# Under coverage, subprocesses included ([tool.coverage.*] in pyproject.toml): line and branch
# coverage of the `tvm` package below fail_under (90%) fails the run after pytest's summary.
step "pytest"
rm -rf target/python-coverage
# Two workers (pytest-xdist): many tests wait on subprocesses, servers and compilers.
"$py" -m pytest -n 2 --cov --cov-report=term tests/python
