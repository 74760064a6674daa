"""The compilers of a build: C++ and C for host code, nvcc (CUDA) or hipcc (HIP) for device code,
each with the flags every build gives it, and ninja when it is installed."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

#: What ``backend=`` (or ``$TVM_FFI_GPU_BACKEND``) may name.
GPU_BACKENDS = ("cuda", "hip")
#: Flags of every host compilation (``-fPIC``: the objects go into a shared library).
HOST_FLAGS = ("-std=c++17", "-fPIC", "-O2")
#: Flags of every C compilation (``build`` of ``.c`` files).
C_FLAGS = ("-fPIC", "-O2")


@dataclass(frozen=True)
class Compiler:
    """A compiler and what a build passes it: ``flags`` to compile, ``link_flags`` to link
    objects it made into the shared library."""

    path: str
    flags: tuple[str, ...]
    link_flags: tuple[str, ...] = field(default=())
    #: Whether it writes make-style dependency files (``-MMD -MF``), which ninja reads to see
    #: included headers change (gcc, clang and hipcc do; nvcc is not asked to).
    depfiles: bool = True


def _first_on_path(variable: str, candidates: tuple[str, ...], what: str) -> list[str]:
    """The compiler's command words: ``$variable`` split like a shell does (``ccache g++``), else
    the first of ``candidates`` on ``PATH``."""
    value = os.environ.get(variable, "").strip()
    if value:
        return shlex.split(value)
    for name in candidates:
        found = shutil.which(name)
        if found:
            return [found]
    raise RuntimeError(
        f"no {what} was found: ${variable} is not set and none of {', '.join(candidates)} is on "
        f"PATH. Install one (Debian: apt-get install g++) or set ${variable}"
    )


def cxx() -> Compiler:
    """The C++ compiler: ``$CXX``, else the first of g++, clang++, c++ on ``PATH``."""
    program, *prefix = _first_on_path("CXX", ("g++", "clang++", "c++"), "C++ compiler")
    return Compiler(program, (*prefix, *HOST_FLAGS))


def c() -> Compiler:
    """The C compiler: ``$CC``, else the first of gcc, clang, cc on ``PATH``."""
    program, *prefix = _first_on_path("CC", ("gcc", "clang", "cc"), "C compiler")
    return Compiler(program, (*prefix, *C_FLAGS))


def _hipcc() -> str | None:
    found = shutil.which("hipcc")
    if found:
        return found
    root = os.environ.get("ROCM_PATH") or "/opt/rocm"
    candidate = os.path.join(root, "bin", "hipcc")
    return candidate if os.path.isfile(candidate) else None


def _nvcc() -> str | None:
    from .. import nvcc

    try:
        return nvcc._find_nvcc()
    except RuntimeError:
        return None


def gpu_backend(requested: str | None) -> str:
    """The backend that compiles device sources: ``requested``, else ``$TVM_FFI_GPU_BACKEND``,
    else ``cuda`` when nvcc is found, else ``hip`` when hipcc is."""
    backend = requested or os.environ.get("TVM_FFI_GPU_BACKEND")
    if backend is not None:
        if backend not in GPU_BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(GPU_BACKENDS)}, got {backend!r}")
        return backend
    if _nvcc() is not None:
        return "cuda"
    if _hipcc() is not None:
        return "hip"
    raise RuntimeError(
        "cuda_sources need nvcc (the CUDA toolkit) or hipcc (ROCm), and neither was found: "
        "nvcc is not on PATH nor under $CUDA_PATH, $CUDA_HOME or /usr/local/cuda; hipcc is not "
        "on PATH nor under $ROCM_PATH or /opt/rocm"
    )


def _arch_list(variable: str) -> list[str]:
    return [arch.strip() for arch in os.environ.get(variable, "").replace(",", ";").split(";")]


def _cuda_arch_flags() -> list[str]:
    """``-gencode`` flags for ``$TVM_FFI_CUDA_ARCH_LIST`` ("8.0;9.0+PTX"); none when it is unset
    (nvcc's default architecture)."""
    flags = []
    for arch in filter(None, _arch_list("TVM_FFI_CUDA_ARCH_LIST")):
        digits = arch.removesuffix("+PTX").replace(".", "")
        if not digits.isdigit():
            raise ValueError(f"TVM_FFI_CUDA_ARCH_LIST holds {arch!r}, not an arch such as 8.0")
        flags.append(f"-gencode=arch=compute_{digits},code=sm_{digits}")
        if arch.endswith("+PTX"):
            flags.append(f"-gencode=arch=compute_{digits},code=compute_{digits}")
    return flags


def gpu_compiler(backend: str) -> Compiler:
    """nvcc or hipcc with the flags of a device compilation and the runtime library to link."""
    if backend == "cuda":
        from .. import nvcc

        nvcc_path = nvcc._find_nvcc()  # its error says where nvcc was looked for
        root = Path(nvcc_path).resolve().parent.parent
        flags = ("-std=c++17", "-O2", "-Xcompiler", "-fPIC", *_cuda_arch_flags())
        return Compiler(nvcc_path, flags, (f"-L{root / 'lib64'}", "-lcudart"), depfiles=False)
    path = _hipcc()
    if path is None:
        raise RuntimeError(
            "backend 'hip' needs hipcc, which is not on PATH nor under $ROCM_PATH or /opt/rocm"
        )
    root = Path(path).resolve().parent.parent
    archs = [
        f"--offload-arch={arch}" for arch in filter(None, _arch_list("TVM_FFI_ROCM_ARCH_LIST"))
    ]
    flags = ("-std=c++17", "-O2", "-fPIC", *archs)
    return Compiler(path, flags, (f"-L{root / 'lib'}", "-lamdhip64"))


@cache
def version_of(path: str) -> str:
    """The first line ``path --version`` prints (part of the cache key: another compiler
    builds again); empty when it prints nothing."""
    try:
        proc = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise RuntimeError(f"cannot run the compiler {path!r} --version: {err}") from None
    lines = (proc.stdout or proc.stderr).splitlines()
    return lines[0] if lines else ""


def ninja() -> str | None:
    """ninja, on ``PATH`` or beside this interpreter (``pip install ninja`` into a virtual
    environment puts it there); None when it is not installed."""
    found = shutil.which("ninja")
    if found:
        return found
    beside = Path(sys.executable).parent / "ninja"
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None
