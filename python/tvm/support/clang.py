"""clang: compiling C/C++ to LLVM IR text.

The compiler is the ``cc=`` argument, else the first of ``clang-<N>`` (highest N), ``clang``
and ``clang.exe`` on ``PATH``.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from collections.abc import Iterable

from . import utils

__all__ = ["create_llvm", "find_clang"]


def find_clang(required: bool = True) -> list[str]:
    """Usable clang programs, best first; with ``required`` none is a ``RuntimeError``."""
    versioned: dict[str, int] = {}
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        for path in glob.glob(os.path.join(directory or ".", "clang-[0-9]*")):
            match = re.fullmatch(r"clang-(\d+)(?:\.0)?", os.path.basename(path))
            if match and os.access(path, os.X_OK):
                versioned.setdefault(os.path.basename(path), int(match.group(1)))
    candidates = [*sorted(versioned, key=lambda name: -versioned[name]), "clang", "clang.exe"]
    valid = [name for name in candidates if shutil.which(name)]
    if not valid and required:
        raise RuntimeError(
            "cannot find clang: install clang (LLVM) and put it on PATH, or pass cc= with the "
            "compiler to use"
        )
    return valid


def create_llvm(
    inputs: str | Iterable[str],
    output: str | None = None,
    options: Iterable[str] | None = None,
    cc: str | None = None,
) -> str:
    """Compiles ``inputs`` with ``clang -S -emit-llvm`` and returns the LLVM IR text.

    Each input is a file path or C/C++ source text (written to ``inputN.cc``). The IR is also
    written to ``output`` if given.
    """
    compiler = cc or find_clang()[0]
    if shutil.which(compiler) is None:
        raise RuntimeError(
            f"clang {compiler!r} was not found: install it or pass cc= with another compiler"
        )
    items = [inputs] if isinstance(inputs, str) else list(inputs)
    with utils.tempdir() as temp:
        files = []
        for index, item in enumerate(items):
            if utils.is_source_path(item):
                files.append(item)
            else:
                path = temp.relpath(f"input{index}.cc")
                with open(path, "w") as source:
                    source.write(item)
                files.append(path)
        target = output or temp.relpath("output.ll")
        cmd = [compiler, "-S", "-emit-llvm", "-o", target, *(options or []), *files]
        try:
            proc = subprocess.run(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False
            )
        except OSError as err:
            raise RuntimeError(f"cannot run {compiler}: {err}") from err
        if proc.returncode != 0:
            raise RuntimeError(
                f"Compilation error:\n{proc.stdout.decode(errors='replace')}\n"
                f"Command line: {' '.join(cmd)}"
            )
        with open(target) as ir:
            return ir.read()
