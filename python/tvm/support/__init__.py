"""``tvm.support``: Python helpers that connect TVM to external command-line tools and host-side
processes: compilers and linkers, archivers, worker-process pools and build-info queries.

The rule for what lives here: host toolchains, external CLIs, processes and build-info helpers
that the compile, link and run paths depend on belong to ``tvm.support``; ``tvm.contrib`` is
reserved for optional vendor SDK integrations and experimental features.

Modules (each imported on first use, so ``import tvm`` does not pay for them):

========================  ===================================================================
``cc``                    host C/C++ compiler: shared libraries, executables, static archives
``cpp``                   C++/CUDA/HIP built against tvm's headers, cached, loaded as modules
``nvcc``                  CUDA compilation (nvcc or NVRTC), CUDA toolkit and GPU queries
``rocm``                  ROCm: ld.lld linking, device bitcode, GPU architecture
``ndk``                   Android NDK compiler (``$TVM_NDK_CC``)
``xcode``                 Xcode tools: dylibs, Metal libraries, Core ML models
``clang``                 clang to LLVM IR
``emcc``                  Emscripten: WebAssembly modules for the web runtime
``popen_pool``            worker processes with timeouts, recycling and crash reports
``stubgen``               ``.pyi`` stubs from recorded type schemas (libraries, globals, types)
``utils``                 temporary directories, file locks, ``which``
``tar``                   packing and safe unpacking of tar archives
``libinfo``               include directories, runtime library, version, build options
========================  ===================================================================
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

__all__ = [
    "cc",
    "clang",
    "cpp",
    "describe",
    "emcc",
    "libinfo",
    "ndk",
    "nvcc",
    "popen_pool",
    "rocm",
    "stubgen",
    "tar",
    "utils",
    "xcode",
]

_SUBMODULES = frozenset(__all__) - {"describe"}


def __getattr__(name: str) -> ModuleType:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _SUBMODULES)


def describe() -> None:
    """Prints the versions of TVM and Python, the platform, where the headers and the runtime
    library are, and the build options, for bug reports."""
    import platform

    from . import libinfo

    print(f"TVM version   = {libinfo.__version__}")
    print(f"Python        = {sys.version.split()[0]} ({platform.architecture()[0]})")
    print(f"Platform      = {platform.platform()}")
    print(f"Runtime       = {', '.join(libinfo.find_lib_path())}")
    try:
        includes = ", ".join(libinfo.find_include_path())
    except RuntimeError as err:
        includes = f"(not found: {err})"
    print(f"Include path  = {includes}")
    print("Build options:")
    for key, value in sorted(libinfo.libinfo().items()):
        print(f"  {key:<20} {value}")
