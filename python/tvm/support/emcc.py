"""Emscripten: linking WebAssembly modules for the TVM web runtime.

``create_tvmjs_wasm`` links objects with the runtime's own bitcode libraries
(``wasm_runtime.bc``, ``tvmjs_support.bc``, ``webgpu_runtime.bc``), which are looked up in
``<root>/web/dist/wasm`` and ``<root>/web/dist``, where ``<root>`` is ``$TVM_HOME`` or the source
tree this package belongs to.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

__all__ = ["create_tvmjs_wasm", "find_wasm_lib"]


def _roots() -> list[Path]:
    roots = []
    if os.environ.get("TVM_HOME"):
        roots.append(Path(os.environ["TVM_HOME"]))
    roots.append(Path(__file__).resolve().parents[3])  # python/tvm/support -> source root
    return roots


def find_wasm_lib(name: str, optional: bool = False) -> str | None:
    """The path of the web runtime library ``name`` (e.g. ``"wasm_runtime.bc"``); None if it
    is missing and ``optional``, else ``RuntimeError`` listing where it was looked for."""
    searched = []
    for root in _roots():
        for directory in (root / "web" / "dist" / "wasm", root / "web" / "dist"):
            searched.append(str(directory))
            candidate = directory / name
            if candidate.is_file():
                return str(candidate)
    if optional:
        return None
    raise RuntimeError(
        f"cannot find {name} in: {', '.join(searched)}. Build the web runtime (make -C web) "
        "or set TVM_HOME to a tree that has it"
    )


def create_tvmjs_wasm(
    output: str,
    objects: str | Iterable[str],
    options: Iterable[str] | None = None,
    cc: str = "emcc",
    libs: Iterable[str] | None = None,
) -> None:
    """Links ``objects`` into the standalone WebAssembly module ``output`` with Emscripten."""
    if shutil.which(cc) is None:
        raise RuntimeError(
            f"{cc!r} (Emscripten) was not found: install the Emscripten SDK and run "
            "'source <emsdk>/emsdk_env.sh' so that emcc is on PATH, or pass cc= with its path"
        )
    files = [objects] if isinstance(objects, str) else list(objects)
    cmd = [
        cc,
        "-O3",
        "-std=c++17",
        "--no-entry",
        "-s",
        "WASM_BIGINT=1",
        "-s",
        "ERROR_ON_UNDEFINED_SYMBOLS=0",
        "-s",
        "STANDALONE_WASM=1",
        "-s",
        "ALLOW_MEMORY_GROWTH=1",
        "-s",
        "TOTAL_MEMORY=160MB",
    ]
    if not any(os.path.basename(item) == "wasm_runtime.bc" for item in files):
        cmd.append(str(find_wasm_lib("wasm_runtime.bc")))
    cmd.append(str(find_wasm_lib("tvmjs_support.bc")))
    cmd.append(str(find_wasm_lib("webgpu_runtime.bc")))
    for lib in libs or []:
        if not os.path.isfile(lib):
            raise RuntimeError(f"library {lib} given in libs= does not exist")
        cmd.append(lib)
    cmd += files
    cmd += ["-o", output]
    cmd += list(options or [])
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    except OSError as err:
        raise RuntimeError(f"cannot run {cc}: {err}") from err
    if proc.returncode != 0:
        raise RuntimeError(f"Compilation error:\n{proc.stdout.decode(errors='replace')}")


create_tvmjs_wasm.object_format = "bc"  # type: ignore[attr-defined]
