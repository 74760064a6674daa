"""Helpers of the GPU backend tests: fake vendor libraries built with gcc from the C sources of
``crates/device-kit/fake`` (one vendor library each over the shared host-memory GPU),
and fresh interpreters to run checks in (a backend opens its library once per process)."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
FAKE_DIR = REPO_ROOT / "crates" / "device-kit" / "fake"


def build_fake_library(out: Path, source: Path, name: str) -> Path:
    """Compiles the fake library ``source`` as ``out/name``, with the kernels library next to it
    built in; fails the test when gcc is missing."""
    compiler = os.environ.get("CC") or shutil.which("gcc")
    if compiler is None:
        pytest.fail(f"gcc is needed to build the fake library {source.name}")
    kernels = out / "libfake_kernels.so"
    library = out / name
    common = [compiler, "-shared", "-fPIC", "-O1", "-o"]
    subprocess.run([*common, str(kernels), str(FAKE_DIR / "kernels.c")], check=True)
    subprocess.run(
        [
            *common,
            str(library),
            f'-DFAKE_KERNELS_LIBRARY="{kernels}"',
            f"-I{FAKE_DIR}",
            str(source),
            "-ldl",
            "-lpthread",
        ],
        check=True,
    )
    return library


#: The metadata of ``add_one(x, n)``, the kernel of the modules the backend tests load.
ADD_ONE_META = (
    '{"func_info": {"add_one": {"name": "add_one", "arg_types": ["handle", "int32"], '
    '"launch_param_tags": ["blockIdx.x", "threadIdx.x"]}}}'
)


def build_fake_backend(out: Path, source: str, name: str, code_file: str, code: str) -> Path:
    """Builds the fake vendor library ``source`` (a file of the fake folder) as ``out/name``, and
    writes the module ``out/code_file`` holding ``code`` with the metadata of ``add_one`` next to
    it; returns the library."""
    library = build_fake_library(out, FAKE_DIR / source, name)
    (out / code_file).write_text(code)
    (out / code_file).with_suffix(".tvm_meta.json").write_text(ADD_ONE_META)
    return library


def run_python(code: str, env: dict[str, str]) -> None:
    """Runs ``code`` in a fresh interpreter with ``env`` added to the environment; fails with its
    output when it fails."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
