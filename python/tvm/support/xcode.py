"""Xcode command-line tools (macOS): dynamic libraries, Metal libraries and Core ML models.

Everything goes through ``xcrun``, which picks the tools of the active developer directory
(``xcode-select -p``). Without the tools the error says how to install them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from typing import Any

from . import utils

__all__ = ["compile_coreml", "compile_metal", "create_dylib", "xcrun"]


def _require_xcrun() -> str:
    found = shutil.which("xcrun")
    if found is None:
        where = "" if sys.platform == "darwin" else " (they exist on macOS only)"
        raise RuntimeError(
            f"xcrun was not found: the Xcode command-line tools are needed{where}. Install them "
            "with 'xcode-select --install' and make sure xcrun is on PATH"
        )
    return found


def xcrun(cmd: list[str]) -> str:
    """Runs ``xcrun *cmd`` and returns its output, stripped; ``RuntimeError`` on failure."""
    tool = _require_xcrun()
    proc = subprocess.run(
        [tool, *cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False
    )
    output = proc.stdout.decode(errors="replace").strip()
    if proc.returncode != 0:
        raise RuntimeError(f"xcrun {' '.join(cmd)} failed:\n{output}")
    return output


def _min_version_flag(sdk: str, min_os_version: str | None) -> list[str]:
    if sdk in ("iphoneos", "iphonesimulator"):
        return [f"-mios-version-min={min_os_version or '13.0'}"]
    if sdk == "macosx" and min_os_version:
        return [f"-mmacosx-version-min={min_os_version}"]
    return []


def create_dylib(
    output: str,
    objects: str | Iterable[str],
    arch: str,
    sdk: str = "macosx",
    min_os_version: str | None = None,
) -> None:
    """Links ``objects`` into the dynamic library ``output`` for ``arch`` and ``sdk``."""
    clang = xcrun(["-sdk", sdk, "-find", "clang"])
    sdk_path = xcrun(["-sdk", sdk, "--show-sdk-path"])
    files = [objects] if isinstance(objects, str) else list(objects)
    cmd = [clang, "-dynamiclib", "-arch", arch, "-isysroot", sdk_path]
    cmd += _min_version_flag(sdk, min_os_version)
    cmd += ["-o", output, *files]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"Compilation error:\n{proc.stdout.decode(errors='replace')}")


create_dylib.output_format = "dylib"  # type: ignore[attr-defined]


def compile_metal(
    code: str,
    path_target: str | None = None,
    sdk: str = "macosx",
    min_os_version: str | None = None,
) -> bytearray | None:
    """Compiles Metal Shading Language source into a metallib and returns its bytes.

    A compilation failure is written to stderr and gives None (the caller falls back to
    source); missing Xcode tools are a ``RuntimeError``.
    """
    _require_xcrun()
    language = "ios-metal2.3" if sdk in ("iphoneos", "iphonesimulator") else "macos-metal2.3"
    with utils.tempdir() as temp:
        source = temp.relpath("my_lib.metal")
        air = temp.relpath("my_lib.air")
        target = path_target or temp.relpath("my_lib.metallib")
        with open(source, "w") as out:
            out.write(code)
        steps = [
            [
                *("xcrun", "-sdk", sdk, "metal", f"-std={language}", "-O3", "-c", source),
                *("-o", air, *_min_version_flag(sdk, min_os_version)),
            ],
            ["xcrun", "-sdk", sdk, "metallib", air, "-o", target],
        ]
        for cmd in steps:
            proc = subprocess.run(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False
            )
            if proc.returncode != 0:
                sys.stderr.write(
                    f"Metal compilation error ({' '.join(cmd[:4])}):\n"
                    f"{proc.stdout.decode(errors='replace')}\n"
                )
                return None
        with open(target, "rb") as result:
            return bytearray(result.read())


def compile_coreml(model: Any, model_name: str = "main", out_dir: str = ".") -> str:
    """Saves the Core ML ``model`` (a coremltools model) and compiles it with
    ``coremlcompiler``; returns the path of ``<out_dir>/<model_name>.mlmodelc``."""
    mlmodel_path = os.path.join(out_dir, f"{model_name}.mlmodel")
    mlmodelc_path = os.path.join(out_dir, f"{model_name}.mlmodelc")
    model.save(mlmodel_path)
    xcrun(["coremlcompiler", "compile", mlmodel_path, out_dir])
    return mlmodelc_path
