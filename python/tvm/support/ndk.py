"""The Android NDK compiler, named by the environment variable ``TVM_NDK_CC``.

``TVM_NDK_CC`` is the NDK's clang driver for the target, for example
``$NDK/toolchains/llvm/prebuilt/linux-x86_64/bin/aarch64-linux-android33-clang++``. The archiver
and ``llvm-nm`` are taken from the same directory.

Importing this module registers the global function ``s_tir.meta_schedule.builder.export_ndk``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from typing import Any

from . import cc as _cc
from . import tar as _tar
from . import utils

__all__ = ["create_shared", "create_staticlib", "get_global_symbol_section_map"]

_ENV = "TVM_NDK_CC"


def _ndk_cc() -> str:
    compiler = os.environ.get(_ENV)
    if not compiler:
        raise RuntimeError(
            f"Require environment variable {_ENV}: set it to the NDK's clang++ for the target, "
            "e.g. <ndk>/toolchains/llvm/prebuilt/linux-x86_64/bin/aarch64-linux-android33-clang++"
        )
    if shutil.which(compiler) is None:
        raise RuntimeError(
            f"{_ENV}={compiler!r} is not an executable compiler; point it at the NDK's clang++"
        )
    return compiler


def _ndk_tool(name: str) -> str:
    path = os.path.join(os.path.dirname(os.path.realpath(_ndk_cc())), name)
    if shutil.which(path) is None:
        raise RuntimeError(
            f"{name} was not found next to {_ENV} ({path}); {_ENV} must point into an NDK "
            "toolchain's bin directory"
        )
    return path


def _run(cmd: list[str], failure: str) -> None:
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    except OSError as err:
        raise RuntimeError(f"cannot run {cmd[0]}: {err}") from err
    if proc.returncode != 0:
        raise RuntimeError(f"{failure}:\n{proc.stdout.decode(errors='replace')}")


def create_shared(
    output: str, objects: str | Iterable[str], options: Iterable[str] | None = None
) -> None:
    """Builds the shared library ``output`` with ``$TVM_NDK_CC``; ``options`` replace the
    default ``-shared -fPIC -lm``."""
    compiler = _ndk_cc()
    files = [objects] if isinstance(objects, str) else list(objects)
    flags = list(options) if options else ["-shared", "-fPIC", "-lm"]
    _run([compiler, "-o", output, *files, *flags], "Compilation error")


create_shared.output_format = "so"  # type: ignore[attr-defined]


def _get_target_triple() -> str | None:
    compiler = os.environ.get(_ENV)
    return _cc.get_target_by_dump_machine(compiler)() if compiler else None


create_shared.get_target_triple = _get_target_triple  # type: ignore[attr-defined]


def create_staticlib(output: str, inputs: str | Iterable[str]) -> None:
    """Archives ``inputs`` (``.tar`` files contribute their contents) into ``output`` with the
    NDK's ``llvm-ar`` and ``llvm-ranlib``."""
    archiver = _ndk_tool("llvm-ar")
    ranlib = _ndk_tool("llvm-ranlib")
    items = [inputs] if isinstance(inputs, str) else list(inputs)
    with utils.tempdir() as temp:
        files = _tar.normalize_file_list_by_unpacking_tars(temp, items)
        _run([archiver, "qcs", output, *files], "Static library creation error")
        _run([ranlib, output], "Static library creation error (ranlib)")


create_staticlib.output_format = "a"  # type: ignore[attr-defined]


def get_global_symbol_section_map(path: str, *, nm: str | None = None) -> dict[str, str]:
    """As :func:`tvm.support.cc.get_global_symbol_section_map`, with the NDK's ``llvm-nm``
    unless ``nm`` is given."""
    return _cc.get_global_symbol_section_map(path, nm=nm or _ndk_tool("llvm-nm"))


#: Directories of exported libraries, alive (not removed) until the interpreter exits.
_EXPORT_DIRS: list[utils.TempDirectory] = []


def _export_ndk(mod: Any) -> str:
    """Exports ``mod`` as a shared library built with the NDK; returns its path."""
    directory = utils.tempdir()
    _EXPORT_DIRS.append(directory)
    path = directory.relpath("tmp_binary.so")
    mod.export_library(path, fcompile=create_shared)
    return path


def _register_global_functions() -> None:
    from ..ffi import register_func

    register_func("s_tir.meta_schedule.builder.export_ndk", _export_ndk, override=True)


_register_global_functions()
