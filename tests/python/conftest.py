"""Shared fixtures of the Python test suite."""

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The C header directory: kernels in the tests see the ABI exactly as a kernel author does.
C_INCLUDE_DIR = REPO_ROOT / "cpp-abi" / "include"

CompileC = Callable[..., Path]


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
