"""Shared fixtures of the Python test suite."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

# The Vulkan tests run with the validation layer on (read when Vulkan is first used).
os.environ.setdefault("TVM_VULKAN_VALIDATION", "1")

import tvm.base

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The C header directory: kernels in the tests see the ABI exactly as a kernel author does.
C_INCLUDE_DIR = REPO_ROOT / "cpp-abi" / "include"


def _cargo_build(package: str) -> None:
    """``cargo build -p package --lib`` in the repository (a no-op when it is up to date)."""
    cargo = shutil.which("cargo")
    if cargo is None:
        raise RuntimeError(f"cargo is needed to build the crate {package}")
    subprocess.run([cargo, "build", "--quiet", "-p", package, "--lib"], cwd=REPO_ROOT, check=True)


def _testing_library() -> Path:
    """``libtvm_ffi_testing.so``: the ``testing.*`` functions, apart from the runtime.

    ``TVM_FFI_TESTING_LIB`` names a prebuilt file; otherwise cargo builds the crate
    ``tvm-ffi-testing`` (a no-op when it is up to date, as after ``scripts/test-all.sh``).
    """
    prebuilt = os.environ.get("TVM_FFI_TESTING_LIB")
    if prebuilt:
        return Path(prebuilt)
    _cargo_build("tvm-ffi-testing")
    return REPO_ROOT / "target" / "debug" / "libtvm_ffi_testing.so"


# Loaded before any test module is imported (test modules bind classes to its types), and named
# in the environment so that child processes (worker pools, subprocess tests) load the same file.
os.environ["TVM_FFI_TESTING_LIB"] = str(_testing_library())
tvm.base.load_backend_libs(os.environ["TVM_FFI_TESTING_LIB"])

CompileC = Callable[..., Path]


@pytest.fixture(scope="session")
def rust_kernels() -> Path:
    """``librust_kernels.so``: the kernels of ``examples/rust-kernels``, exported from Rust with
    ``export_typed_func!`` (built by cargo)."""
    _cargo_build("rust-kernels")
    return REPO_ROOT / "target" / "debug" / "librust_kernels.so"


@pytest.fixture
def compile_c(tmp_path: Path) -> CompileC:
    """Compiles C source into a shared library with gcc against ``cpp-abi/include``.

    ``compile_c(source, name="libkernel.so", extra_flags=(), out_dir=tmp_path)`` writes the
    source next to the output and returns the library's path. Undefined ``TVMFFI*`` references
    are left for the dynamic loader unless ``extra_flags`` links something. A compiler error
    fails the test with gcc's message.
    """
    compiler = os.environ.get("CC") or shutil.which("gcc")
    if compiler is None:
        pytest.fail("gcc is needed to build the C kernels of the tests (scripts/test-all.sh)")

    def compile_c(
        source: str,
        name: str = "libkernel.so",
        extra_flags: Sequence[str] = (),
        out_dir: Path | None = None,
    ) -> Path:
        directory = out_dir if out_dir is not None else tmp_path
        directory.mkdir(parents=True, exist_ok=True)
        output = directory / name
        source_file = directory / f"{output.stem}.c"
        source_file.write_text(source)
        command = [
            compiler,
            "-shared",
            "-fPIC",
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            f"-I{C_INCLUDE_DIR}",
            "-o",
            str(output),
            str(source_file),
            *extra_flags,
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            pytest.fail(f"{' '.join(command)} failed:\n{result.stdout}{result.stderr}")
        return output

    return compile_c


@pytest.fixture
def bare_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """PATH with no tools on it (an empty directory, returned, where tests put stand-ins), and no
    variables pointing at toolkits."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    for name in ("CUDA_PATH", "CUDA_HOME", "ROCM_PATH", "TVM_NDK_CC", "TVM_HOME", "NVSHMEM_HOME"):
        monkeypatch.delenv(name, raising=False)
    return empty


def _is_coverage_data(path: Path) -> bool:
    """Whether ``path`` is a readable coverage data file (an SQLite database with its schema)."""
    import sqlite3

    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return db.execute("select count(*) from coverage_schema").fetchone() is not None
    except sqlite3.Error:
        return False


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Drops the coverage data files of processes that were killed while they wrote them (tests
    kill workers, servers and hung jobs on purpose): their data is lost either way, and coverage
    would warn about each when it combines the rest."""
    folder = Path(session.config.rootpath, "target", "python-coverage")
    if os.environ.get("PYTEST_XDIST_WORKER") or not folder.is_dir():
        return
    for data_file in folder.glob(".coverage.*"):
        if not _is_coverage_data(data_file):
            data_file.unlink(missing_ok=True)
