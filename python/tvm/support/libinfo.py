"""What a native build against this ``tvm`` needs: the C header directories, the runtime
library, the version, and the build options.

* :func:`find_include_path` lists the directories to pass as ``-I``: they hold
  ``tvm/ffi/c_api.h`` (the stable C ABI), the C++ helpers and ``dlpack/dlpack.h``.
* :func:`find_lib_path` gives the runtime library ``tvm/lib/libtvm_ffi.so``, the one file that
  defines the ``TVMFFI*`` C functions and the C++ half of the ABI; C and C++ hosts link it with
  no Python in the process.
* :func:`find_pkgconfig_dir` and :func:`find_cmake_dir` give the directories of the
  ``tvm_ffi.pc`` pkg-config file and of the CMake package ``tvm_ffi`` (target
  ``tvm_ffi::tvm_ffi``), both inside the package.
* ``__version__`` is the version of ``tvm``.
* Calling the module itself, ``tvm.support.libinfo()``, returns the build-option dictionary of
  :func:`libinfo`.

As a command, like ``pkg-config`` and ``python3-config``::

    python -m tvm.support.libinfo --cflags     # -I flags for the headers
    python -m tvm.support.libinfo --libs       # link flags for the runtime library (hosts;
                                               # kernels may resolve TVMFFI* at load time)
    python -m tvm.support.libinfo --includedir # the header directory
    python -m tvm.support.libinfo --libdir     # the directory of libtvm_ffi.so
    python -m tvm.support.libinfo --pkgconfigdir  # for PKG_CONFIG_PATH (pkg-config tvm_ffi)
    python -m tvm.support.libinfo --cmakedir   # for CMAKE_PREFIX_PATH (find_package(tvm_ffi))
    python -m tvm.support.libinfo --version
    gcc -shared -fPIC $(python -m tvm.support.libinfo --cflags) kernel.c -o libkernel.so
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

from .. import _native, base

__all__ = [
    "__version__",
    "device_drivers",
    "find_cmake_dir",
    "find_include_path",
    "find_lib_path",
    "find_pkgconfig_dir",
    "libinfo",
    "link_flags",
    "main",
]

__version__: str = _native.__version__

#: Environment variable: extra include directories (``os.pathsep``-separated), searched first.
INCLUDE_PATH_ENV = "TVM_INCLUDE_PATH"

_PACKAGE_DIR = Path(base.__file__).resolve().parent
_MARKER = Path("tvm") / "ffi" / "c_api.h"


def _include_candidates() -> list[tuple[Path, bool]]:
    """Candidate directories, each with whether it must contain the C header to count."""
    candidates: list[tuple[Path, bool]] = []
    for entry in os.environ.get(INCLUDE_PATH_ENV, "").split(os.pathsep):
        if entry.strip():
            candidates.append((Path(entry).expanduser(), False))
    # The headers ship inside the package (tvm/include), in a wheel and in a source checkout.
    candidates.append((_PACKAGE_DIR / "include", True))
    return candidates


def find_include_path() -> list[str]:
    """The include directories for code compiled against the C ABI (``-I`` each).

    Directories named by ``$TVM_INCLUDE_PATH`` come first, then ``include`` inside the
    package, which counts only if it holds ``tvm/ffi/c_api.h``. ``RuntimeError`` if nothing is
    found.
    """
    found: list[str] = []
    tried: list[str] = []
    for directory, needs_header in _include_candidates():
        tried.append(str(directory))
        if not directory.is_dir() or (needs_header and not (directory / _MARKER).is_file()):
            continue
        text = str(directory.resolve())
        if text not in found:
            found.append(text)
    if not found:
        raise RuntimeError(
            f"cannot find the TVM C headers ({_MARKER.as_posix()}); looked in: "
            f"{', '.join(tried)}. Set {INCLUDE_PATH_ENV} to the directory that holds them"
        )
    return found


def find_lib_path() -> list[str]:
    """The runtime library, as a one-element list: the ``libtvm_ffi.so`` that ``import tvm``
    loaded (link against it, or let the dynamic loader resolve ``libtvm_ffi.so`` to it)."""
    handle = base._LOADED_LIBS.get(base._NATIVE_LIB_NAME)
    if handle is not None and handle._name:
        return [os.path.abspath(handle._name)]
    return [str(base._native_library_path())]


def _existing_dir(path: Path, what: str) -> str:
    if not path.is_dir():
        raise RuntimeError(f"the {what} directory of tvm is missing: {path}")
    return str(path.resolve())


def find_pkgconfig_dir() -> str:
    """The directory of ``tvm_ffi.pc``: add it to ``PKG_CONFIG_PATH`` for ``pkg-config tvm_ffi``."""
    return _existing_dir(Path(find_lib_path()[0]).parent / "pkgconfig", "pkg-config")


def find_cmake_dir() -> str:
    """The directory of the CMake package ``tvm_ffi``: pass it as ``tvm_ffi_DIR`` or add it to
    ``CMAKE_PREFIX_PATH``, then ``find_package(tvm_ffi CONFIG)`` gives ``tvm_ffi::tvm_ffi``."""
    return _existing_dir(Path(find_lib_path()[0]).parent / "cmake" / "tvm_ffi", "CMake package")


#: Build options and the device backend of this library that turns each on.
_BACKEND_OPTIONS = {"USE_CUDA": "cuda", "USE_ROCM": "rocm", "USE_VULKAN": "vulkan"}
#: Build options of Apache TVM that no part of this runtime provides.
_ALWAYS_OFF = (
    "USE_LLVM",
    "USE_NCCL",
    "USE_NVTX",
    "USE_NVSHMEM",
    "USE_HEXAGON",
    "USE_CUDNN",
    "USE_CUTLASS",
    "USE_OPENCL",
    "USE_METAL",
    "USE_CLML",
    "USE_NNAPI_RUNTIME",
    "USE_NNAPI_CODEGEN",
)


def libinfo() -> dict[str, str]:
    """Build options as ``"ON"``/``"OFF"`` strings, as this library was built: ``USE_CUDA``,
    ``USE_ROCM`` and ``USE_VULKAN`` are ON when the device backend is compiled in (it loads its
    driver only when used, so ON says nothing about the machine having one); options of the
    original that this runtime has no part for (LLVM, NCCL, NVTX, ...) are OFF. A missing key
    means OFF."""
    compiled = set(getattr(_native, "_device_backends", ()))
    info = {key: "ON" if name in compiled else "OFF" for key, name in _BACKEND_OPTIONS.items()}
    info.update({key: "OFF" for key in _ALWAYS_OFF})
    return dict(sorted(info.items()))


def device_drivers() -> dict[str, bool]:
    """For each device backend compiled in, whether its driver was found on this machine (a
    device of it exists). Opens the drivers, which :func:`libinfo` does not."""
    from .. import runtime

    compiled = getattr(_native, "_device_backends", ())
    return {name: bool(runtime.device(name, 0).exist) for name in sorted(compiled)}


def link_flags() -> list[str]:
    """Flags that link native code against the runtime library: ``-L``, an rpath to its
    directory, ``-ltvm_ffi`` (what ``--libs`` prints)."""
    library = Path(find_lib_path()[0])
    directory = str(library.parent)
    return [f"-L{directory}", f"-Wl,-rpath,{directory}", "-ltvm_ffi"]


def main(argv: list[str] | None = None) -> int:
    """The command line: prints the flags asked for on one line (see the module docs)."""
    import argparse
    import shlex

    parser = argparse.ArgumentParser(
        prog="python -m tvm.support.libinfo",
        description="Compile and link flags for native code built against this tvm.",
    )
    parser.add_argument("--cflags", action="store_true", help="-I flags for the C/C++ headers")
    parser.add_argument("--libs", action="store_true", help="flags to link the runtime library")
    parser.add_argument("--includedir", action="store_true", help="the header directory")
    parser.add_argument("--libdir", action="store_true", help="the runtime library's directory")
    parser.add_argument("--pkgconfigdir", action="store_true", help="the directory of tvm_ffi.pc")
    parser.add_argument(
        "--cmakedir", action="store_true", help="the directory of the CMake package tvm_ffi"
    )
    parser.add_argument("--version", action="store_true", help="the version of tvm")
    args = parser.parse_args(argv)
    words: list[str] = []
    if args.version:
        words.append(__version__)
    if args.includedir:
        words.append(find_include_path()[0])
    if args.cflags:
        words += [f"-I{directory}" for directory in find_include_path()]
    if args.libdir:
        words.append(str(Path(find_lib_path()[0]).parent))
    if args.pkgconfigdir:
        words.append(find_pkgconfig_dir())
    if args.cmakedir:
        words.append(find_cmake_dir())
    if args.libs:
        words += link_flags()
    if not words:
        print(f"tvm {__version__}")
        print(f"headers: {' '.join(find_include_path())}")
        print(f"runtime library: {find_lib_path()[0]}")
        print(f"build options: {libinfo()}")
        drivers = device_drivers()
        found = ", ".join(
            f"{name} {'found' if ok else 'not found'}" for name, ok in drivers.items()
        )
        print(f"device drivers: {found or 'no device backend compiled in'}")
        return 0
    print(" ".join(shlex.quote(word) for word in words))
    return 0


class _CallableModule(types.ModuleType):
    """Lets ``tvm.support.libinfo()`` keep working as the build-option query."""

    def __call__(self) -> dict[str, str]:
        return libinfo()


sys.modules[__name__].__class__ = _CallableModule


if __name__ == "__main__":
    sys.exit(main())
