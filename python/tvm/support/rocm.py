"""ROCm: linking GPU code objects with ld.lld, device bitcode libraries, GPU architecture.

The ROCm installation is ``$ROCM_PATH``, else the directory above ``bin/hipcc`` on ``PATH``,
else ``/opt/rocm``. ``ld.lld`` is looked up on ``PATH`` (also as ``ld.lld-<N>``) and in
``<rocm>/llvm/bin``. Missing tools are a ``RuntimeError`` saying what to install or set.

Importing this module registers the global functions ``tvm_callback_rocm_link``,
``tvm_callback_rocm_bitcode_path`` and ``tvm_callback_rocm_get_arch``.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import warnings

from . import utils
from .nvcc import parse_compute_version  # the same "major.minor" form

__all__ = [
    "callback_rocm_bitcode_path",
    "callback_rocm_link",
    "find_lld",
    "find_rocm_path",
    "get_rocm_arch",
    "have_matrixcore",
    "parse_compute_version",
    "rocm_link",
]

_DEFAULT_ARCH = "gfx900"


def find_rocm_path() -> str:
    """The ROCm root: ``$ROCM_PATH``, the directory above ``hipcc`` on ``PATH``, or
    ``/opt/rocm``; ``RuntimeError`` if none exists."""
    if os.environ.get("ROCM_PATH"):
        return os.environ["ROCM_PATH"]
    hipcc = shutil.which("hipcc")
    if hipcc:
        return os.path.realpath(os.path.join(hipcc, "..", ".."))
    if os.path.isdir("/opt/rocm"):
        return "/opt/rocm"
    raise RuntimeError(
        "Cannot find the ROCm path: ROCM_PATH is not set, hipcc is not on PATH and /opt/rocm "
        "does not exist. Install ROCm or set ROCM_PATH to its root"
    )


def _versioned_on_path(stem: str) -> list[str]:
    """``stem-<N>`` executables on PATH, highest N first."""
    found: dict[str, int] = {}
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        for path in glob.glob(os.path.join(directory or ".", f"{stem}-[0-9]*")):
            match = re.fullmatch(rf"{re.escape(stem)}-(\d+)(?:\.0)?", os.path.basename(path))
            if match and os.access(path, os.X_OK):
                found.setdefault(os.path.basename(path), int(match.group(1)))
    return sorted(found, key=lambda name: -found[name])


def find_lld(required: bool = True) -> list[str]:
    """Names or paths of usable ``ld.lld`` programs, best first (``ld.lld-<N>``, ``ld.lld``,
    then ROCm's own). With ``required``, none found is a ``RuntimeError``."""
    candidates = [*_versioned_on_path("ld.lld"), "ld.lld"]
    roots = []
    if os.environ.get("ROCM_PATH"):
        roots.append(os.environ["ROCM_PATH"])
    roots.append("/opt/rocm")
    candidates += [os.path.join(root, "llvm", "bin", "ld.lld") for root in roots]
    valid = [name for name in dict.fromkeys(candidates) if shutil.which(name)]
    if not valid and required:
        raise RuntimeError(
            "cannot find ld.lld: install LLVM's lld (or ROCm, which ships it in "
            "<rocm>/llvm/bin) and put it on PATH, set ROCM_PATH, or pass lld= to rocm_link"
        )
    return valid


def rocm_link(in_file: str, out_file: str, lld: str | None = None) -> None:
    """Links the object ``in_file`` into the HSA code object ``out_file`` with ``ld.lld``."""
    linker = lld or find_lld()[0]
    cmd = [linker, "--no-undefined", "-shared", in_file, "-o", out_file]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    except OSError as err:
        raise RuntimeError(f"cannot run {linker}: {err}; install ld.lld or pass lld=") from err
    if proc.returncode != 0:
        raise RuntimeError(
            f"Linking error using ld.lld:\n{proc.stdout.decode(errors='replace')}\n"
            f"Command line: {' '.join(cmd)}"
        )


def callback_rocm_link(obj_bin: bytes) -> bytearray:
    """Links an object file given as bytes and returns the code object's bytes (global
    ``tvm_callback_rocm_link``)."""
    with utils.tempdir() as temp:
        obj = temp.relpath("rocm_kernel.o")
        code_object = temp.relpath("rocm_kernel.co")
        with open(obj, "wb") as out:
            out.write(bytes(obj_bin))
        rocm_link(obj, code_object)
        with open(code_object, "rb") as result:
            return bytearray(result.read())


_BITCODE_NAMES = (
    "oclc_daz_opt_on",
    "ocml",
    "ockl",
    "oclc_unsafe_math_off",
    "oclc_finite_only_off",
    "oclc_correctly_rounded_sqrt_on",
    "oclc_wavefrontsize64_on",
    "oclc_abi_version_500",
)


def callback_rocm_bitcode_path(rocdl_dir: str | None = None) -> list[str]:
    """The device bitcode libraries to link (global ``tvm_callback_rocm_bitcode_path``): the
    ocml/ockl/oclc control files plus every ``oclc_isa_version_*`` file present. A missing
    required file is a ``RuntimeError`` naming it."""
    if rocdl_dir is None:
        root = find_rocm_path()
        for candidate in (
            os.path.join(root, "amdgcn", "bitcode"),
            os.path.join(root, "lib", "llvm", "lib", "clang", "amdgcn", "bitcode"),
            os.path.join(root, "lib"),
        ):
            if os.path.isdir(candidate):
                rocdl_dir = candidate
                break
        else:
            rocdl_dir = os.path.join(root, "amdgcn", "bitcode")
    paths = []
    for name in _BITCODE_NAMES:
        path = os.path.join(rocdl_dir, f"{name}.bc")
        if not os.path.isfile(path):
            if name == "oclc_abi_version_500":
                continue  # older ROCm releases do not have it
            raise RuntimeError(
                f"ROCm device bitcode {path} does not exist; point rocdl_dir (or ROCM_PATH) at a "
                "complete ROCm installation"
            )
        paths.append(path)
    paths += sorted(glob.glob(os.path.join(rocdl_dir, "oclc_isa_version_*.bc")))
    return paths


def _arch_to_version(arch: str) -> str:
    """``"gfx90a"`` -> ``"9.0"``, ``"gfx1100"`` -> ``"11.0"`` (major, then minor digit)."""
    match = re.fullmatch(r"gfx(\d+)([0-9a-f])([0-9a-f])", arch)
    if match is None:
        raise RuntimeError(f"cannot read a version from the ROCm architecture {arch!r}")
    return f"{int(match.group(1))}.{int(match.group(2), 16)}"


def have_matrixcore(compute_version: str | None = None) -> bool:
    """Whether the GPU has matrix cores (major version 8 and later). Without
    ``compute_version`` the first GPU that ``rocminfo`` reports decides (``RuntimeError`` if
    there is no ROCm)."""
    if compute_version is None:
        arch = _detect_arch()
        if arch is None:
            raise RuntimeError(
                "No ROCm runtime found: pass compute_version, or install ROCm (rocminfo) and "
                "set ROCM_PATH"
            )
        compute_version = _arch_to_version(arch)
    major, _ = parse_compute_version(compute_version)
    return major >= 8


def _rocminfo(rocm_path: str | None) -> str | None:
    candidates = []
    if rocm_path is not None:
        candidates.append(os.path.join(rocm_path, "bin", "rocminfo"))
    else:
        try:
            candidates.append(os.path.join(find_rocm_path(), "bin", "rocminfo"))
        except RuntimeError:
            pass
    candidates.append("rocminfo")
    for candidate in candidates:
        if shutil.which(candidate):
            return candidate
    return None


def _detect_arch(rocm_path: str | None = None) -> str | None:
    tool = _rocminfo(rocm_path)
    if tool is None:
        return None
    try:
        out = subprocess.run([tool], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"Name:\s+(gfx[0-9a-f]+)", out.stdout)
    return match.group(1) if match else None


def get_rocm_arch(rocm_path: str | None = None) -> str:
    """The architecture of the first AMD GPU ("gfx90a"), read from ``rocminfo`` (global
    ``tvm_callback_rocm_get_arch``); ``"gfx900"`` with a warning if it cannot be found."""
    arch = _detect_arch(rocm_path)
    if arch is None:
        warnings.warn(
            f"cannot detect the ROCm GPU architecture (rocminfo missing or no GPU); using "
            f"{_DEFAULT_ARCH}",
            stacklevel=2,
        )
        return _DEFAULT_ARCH
    return arch


def _register_global_functions() -> None:
    from ..ffi import register_func

    register_func("tvm_callback_rocm_link", callback_rocm_link, override=True)
    register_func("tvm_callback_rocm_bitcode_path", callback_rocm_bitcode_path, override=True)
    register_func("tvm_callback_rocm_get_arch", get_rocm_arch, override=True)


_register_global_functions()
