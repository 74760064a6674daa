"""CUDA: compiling kernels with nvcc or NVRTC, finding the toolkit, and compute capabilities.

``compile_cuda`` turns CUDA source into PTX, cubin or fatbin, with the ``nvcc`` program or the
NVRTC library (through the ``cuda-python`` package, ``cuda.bindings.nvrtc``). The toolkit is
found through ``$CUDA_PATH`` (or ``$CUDA_HOME``), then ``nvcc`` on ``PATH``, then
``/usr/local/cuda``. Without a toolkit, or without ``cuda-python`` for NVRTC, the error names
what is missing and how to provide it.

Environment variables read here: ``TVM_CUDA_COMPILE_MODE`` (``nvrtc``, the default, or ``nvcc``:
the backend of the ``tvm_callback_cuda_compile`` global function), ``TVM_KERNEL_DUMP`` (a
directory: keep the source and intermediate files there, compile to fatbin with line info),
``TVM_KERNEL_DEBUG=1`` (device debug info), ``TVM_CUDA_NVCC_NO_FAST_MATH`` (no
``--use_fast_math``), ``TVM_CUDA_PTXAS_REG_LEVEL`` (ptxas register usage level, default 10),
``TVM_CUDA_NVRTC_EXTRA_OPTS`` (more NVRTC options), ``NVSHMEM_HOME``.

Importing this module registers the global functions ``tvm_callback_cuda_compile``,
``tvm_callback_libdevice_path`` and, under both the ``tvm.support.nvcc.`` and the
``tvm.contrib.nvcc.`` prefixes, ``get_compute_version``, ``supports_bf16``, ``supports_fp8`` and
``supports_fp4``.
"""

from __future__ import annotations

import glob
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import warnings
from collections.abc import Mapping
from typing import Any

from . import utils

__all__ = [
    "callback_libdevice_path",
    "compile_cuda",
    "find_cuda_path",
    "find_libdevice_path",
    "find_nvshmem_paths",
    "get_cuda_version",
    "get_target_compute_version",
    "have_bf16",
    "have_cudagraph",
    "have_fp4",
    "have_fp8",
    "have_fp16",
    "have_int8",
    "have_tensorcore",
    "parse_compute_version",
    "tvm_callback_cuda_compile",
]

_FILE_STEM = "tvm_kernels"

# Half and bfloat16 operators are disabled by default in cuda_fp16.h / cuda_bf16.h when some
# macros are defined; generated kernels need them.
_HALF_MACROS = [
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT162_OPERATORS__",
    "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
]

# nvcc options that NVRTC rejects; dropped from user options on the NVRTC path.
_NVCC_ONLY_PREFIXES = (
    "-c",
    "-O",
    "-std",
    "--std",
    "-X",
    "--compile",
    "--compiler-options",
    "--linker-options",
    "-fPIC",
    "-shared",
    "-o",
    "--output-file",
)


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


def _options_list(options: Any) -> list[str]:
    if options is None:
        return []
    if isinstance(options, str):
        return [options]
    if isinstance(options, (list, tuple)):
        return [
            os.fspath(option) if isinstance(option, os.PathLike) else option for option in options
        ]
    raise ValueError(f"options must be a str or a list of str, got {options!r}")


def _ptxas_options(extra: list[str] | None = None) -> str:
    level = os.environ.get("TVM_CUDA_PTXAS_REG_LEVEL", "10")
    parts = [
        "-v",
        f"--register-usage-level={level}",
        "--warn-on-local-memory-usage",
        *(extra or []),
    ]
    return "--ptxas-options=" + ",".join(parts)


def compile_cuda(
    code: str,
    target_format: str | None = None,
    arch: str | list[str] | None = None,
    options: str | list[str] | None = None,
    path_target: str | None = None,
    compiler: str = "nvrtc",
) -> bytearray:
    """Compiles CUDA source ``code`` and returns the binary.

    Parameters
    ----------
    code
        The CUDA source.
    target_format
        ``"ptx"``, ``"cubin"`` or ``"fatbin"`` (nvcc only). Default: ptx with nvcc (fatbin when
        ``TVM_KERNEL_DUMP`` is set), cubin with NVRTC; code that includes ``nvshmem.h`` is
        always compiled to cubin and linked with the NVSHMEM device library.
    arch
        ``"sm_80"``-style architecture (nvcc also takes a list of raw ``-gencode`` arguments).
        Default: the one of the GPU (see :func:`get_target_compute_version`).
    options
        More compiler options.
    path_target
        Also write the binary to this file.
    compiler
        ``"nvrtc"`` or ``"nvcc"``.
    """
    use_nvshmem = "#include <nvshmem.h>" in code or "#include <nvshmemx.h>" in code
    if compiler == "nvcc":
        return _compile_cuda_nvcc(code, target_format, arch, options, path_target, use_nvshmem)
    if compiler == "nvrtc":
        return _compile_cuda_nvrtc(code, target_format, arch, options, path_target, use_nvshmem)
    raise ValueError(f"compiler must be 'nvcc' or 'nvrtc', got {compiler!r}")


def _find_nvcc() -> str:
    found = shutil.which("nvcc")
    if found:
        return found
    try:
        root = find_cuda_path()
    except RuntimeError as err:
        raise RuntimeError(
            f"nvcc was not found: it is not on PATH and {err}. Install the CUDA toolkit, or "
            "set CUDA_PATH (or CUDA_HOME) to its root, or use compiler='nvrtc'"
        ) from None
    candidate = os.path.join(root, "bin", "nvcc")
    if not os.path.isfile(candidate):
        raise RuntimeError(
            f"nvcc was not found: it is not on PATH and {candidate} does not exist. Set "
            "CUDA_PATH (or CUDA_HOME) to the root of a CUDA toolkit, or use compiler='nvrtc'"
        )
    return candidate


def _arch_digits(arch: str) -> str:
    match = re.fullmatch(r"(?:sm|compute)_(\d+)[a-z]?", arch)
    if match is None:
        raise ValueError(f"cannot read a CUDA architecture from {arch!r} (expected e.g. 'sm_80')")
    return match.group(1)


def _default_arch_digits() -> str:
    """ "80", or "90a" for an architecture-specific version such as "9.0.a"."""
    return "".join(get_target_compute_version().split("."))


def _compile_cuda_nvcc(
    code: str,
    target_format: str | None,
    arch: str | list[str] | None,
    options: Any,
    path_target: str | None,
    use_nvshmem: bool,
) -> bytearray:
    extra = _options_list(options)
    nvshmem_include = nvshmem_lib = None
    dump_dir = os.environ.get("TVM_KERNEL_DUMP") or None
    if use_nvshmem:
        target_format = "cubin"
    elif dump_dir is not None:
        target_format = "fatbin"  # keeps the cubin, so SASS can be inspected
    elif target_format is None:
        target_format = "ptx"
    if target_format not in ("ptx", "cubin", "fatbin"):
        raise ValueError(f"target_format must be 'ptx', 'cubin' or 'fatbin', got {target_format!r}")
    nvcc = _find_nvcc()
    if use_nvshmem:
        nvshmem_include, nvshmem_lib = find_nvshmem_paths()

    if arch is None:
        digits = _default_arch_digits()
        arch_flags = ["-gencode", f"arch=compute_{digits},code=sm_{digits}"]
    elif isinstance(arch, str):
        digits = arch.split("_", 1)[-1]
        arch_flags = ["-arch", arch]
    else:
        digits = _default_arch_digits() if use_nvshmem else ""
        arch_flags = list(arch)

    with utils.tempdir() as temp:
        work_dir = dump_dir if dump_dir is not None else temp.relpath("")
        os.makedirs(work_dir, exist_ok=True)
        source_path = os.path.join(work_dir, f"{_FILE_STEM}.cu")
        with open(source_path, "w") as source:
            source.write(code)
        target_path = path_target or os.path.join(work_dir, f"{_FILE_STEM}.{target_format}")
        if use_nvshmem:
            target_path = os.path.splitext(target_path)[0] + ".o"

        cmd = [nvcc, f"--{target_format}", "-O3"]
        if dump_dir is not None:
            cmd += ["-lineinfo", "--keep", f"--keep-dir={dump_dir}"]
        if os.environ.get("TVM_KERNEL_DEBUG", "0") == "1":
            cmd += ["-g", "-G"]
        cmd += arch_flags
        cmd += _HALF_MACROS
        cmd += ["--expt-relaxed-constexpr", "--expt-extended-lambda"]
        if not _flag("TVM_CUDA_NVCC_NO_FAST_MATH"):
            cmd.append("--use_fast_math")
        cmd.append(_ptxas_options())
        cmd += extra
        cmd += ["-o", target_path]
        if use_nvshmem:
            cmd += ["-c", source_path, "-rdc=true", "-I", str(nvshmem_include)]
        else:
            cmd.append(source_path)
        _run_cuda_tool(cmd, code)

        if use_nvshmem:
            linked = os.path.splitext(target_path)[0] + ".cubin"
            nvlink = os.path.join(os.path.dirname(nvcc), "nvlink")
            cmd = [
                nvlink if os.path.isfile(nvlink) else "nvlink",
                f"-arch=sm_{digits}",
                "-L",
                str(nvshmem_lib),
                "-L",
                os.path.join(find_cuda_path(), "lib64"),
                "-l",
                "nvshmem_device",
                "-l",
                "cudadevrt",
                "-o",
                linked,
                target_path,
            ]
            _run_cuda_tool(cmd, code)
            target_path = linked

        with open(target_path, "rb") as result:
            data = bytearray(result.read())
    if not data:
        raise RuntimeError("Compilation error: empty result is generated")
    return data


def _run_cuda_tool(cmd: list[str], code: str) -> None:
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    except OSError as err:
        raise RuntimeError(
            f"cannot run {cmd[0]}: {err}. Install the CUDA toolkit or set CUDA_PATH"
        ) from err
    if proc.returncode != 0:
        raise RuntimeError(
            f"{code}\nCompilation error:\n{proc.stdout.decode(errors='replace')}\n"
            f"Command line: {shlex.join(cmd)}"
        )


def _nvrtc_source(code: str, use_nvshmem: bool) -> str:
    # NVRTC compiles device code only: the driver header is not available (nor needed).
    lines = [line for line in code.splitlines() if line.strip() != "#include <cuda.h>"]
    body = "\n".join(lines)
    prelude = []
    if use_nvshmem:
        prelude.append(
            "#include <cuda/std/type_traits>\n"
            "namespace std {\n"
            "using cuda::std::conditional; using cuda::std::enable_if;\n"
            "using cuda::std::is_floating_point; using cuda::std::is_integral;\n"
            "using cuda::std::is_same; using cuda::std::is_signed; using cuda::std::is_unsigned;\n"
            "}\n"
        )
    prelude.append(
        "#include <cuda/std/cstdint>\n"
        "using cuda::std::int8_t; using cuda::std::int16_t;\n"
        "using cuda::std::int32_t; using cuda::std::int64_t;\n"
        "using cuda::std::uint8_t; using cuda::std::uint16_t;\n"
        "using cuda::std::uint32_t; using cuda::std::uint64_t;\n"
        "#ifndef __asm__\n#define __asm__ asm\n#endif\n"
        "#ifndef __volatile__\n#define __volatile__ volatile\n#endif\n"
        "#ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n#endif\n"
    )
    if "CUtensorMap" in body:
        # A host-side type from cuda.h that kernels receive as a parameter.
        prelude.append("struct __align__(64) CUtensorMap { unsigned long long opaque[16]; };\n")
    return "".join(prelude) + body


def _cuda_include_dirs(cuda_path: str) -> list[str]:
    dirs = []
    standard = os.path.join(cuda_path, "include")
    if os.path.isdir(standard):
        dirs.append(standard)
    per_target = os.path.join(
        cuda_path, "targets", f"{platform.machine()}-{platform.system().lower()}", "include"
    )
    if os.path.isdir(per_target):
        dirs.append(per_target)
        cccl = os.path.join(per_target, "cccl")
        if os.path.isdir(cccl):
            dirs.append(cccl)
    if not any(os.path.isfile(os.path.join(d, "cuda_runtime.h")) for d in dirs):
        raise RuntimeError(
            f"cannot find the CUDA headers (cuda_runtime.h) under {cuda_path} (looked in "
            f"{', '.join(dirs) or 'no include directory'}); set CUDA_PATH to a complete toolkit"
        )
    return dirs


def _compile_cuda_nvrtc(
    code: str,
    target_format: str | None,
    arch: str | list[str] | None,
    options: Any,
    path_target: str | None,
    use_nvshmem: bool,
) -> bytearray:
    native = None
    try:
        from cuda.bindings import nvrtc  # type: ignore[import-not-found]
    except ImportError as err:
        # The runtime's own NVRTC binding (libnvrtc opened at run time) compiles to PTX.
        native = _native_nvrtc()
        if native is None or use_nvshmem or target_format not in (None, "ptx"):
            raise RuntimeError(
                "compiling CUDA with NVRTC needs the cuda-python package (module "
                "cuda.bindings.nvrtc), which is not installed: pip install cuda-python "
                "(without it, only PTX through tvm.support.nvrtc_compile). "
                "Alternatively compile with nvcc: compiler='nvcc' (or TVM_CUDA_COMPILE_MODE=nvcc)"
            ) from err
        target_format = "ptx"
    if use_nvshmem:
        import importlib.util

        if importlib.util.find_spec("cuda.bindings.driver") is None:
            raise RuntimeError(
                "linking NVSHMEM code compiled with NVRTC needs cuda.bindings.driver from the "
                "cuda-python package: pip install cuda-python"
            )
    if use_nvshmem or target_format is None:
        target_format = "cubin"
    if target_format == "fatbin":
        raise ValueError(
            "NVRTC cannot produce fatbin; use target_format='cubin' or 'ptx', or compiler='nvcc'"
        )
    if target_format not in ("cubin", "ptx"):
        raise ValueError(f"target_format must be 'cubin' or 'ptx', got {target_format!r}")
    user_options = _options_list(options)
    if arch is None:
        digits = _default_arch_digits()
    elif isinstance(arch, str):
        _arch_digits(arch)  # validates
        digits = arch.split("_", 1)[-1]
    else:
        raise ValueError(f"NVRTC takes arch as one string such as 'sm_80', got {arch!r}")
    # NVRTC wants a virtual architecture for PTX and a real one for cubin.
    gpu_arch = f"{'compute' if target_format == 'ptx' else 'sm'}_{digits}"

    nvshmem_include = nvshmem_lib = None
    if use_nvshmem:
        nvshmem_include, nvshmem_lib = find_nvshmem_paths()

    flags = [f"--gpu-architecture={gpu_arch}", "-default-device", "--device-int128"]
    if use_nvshmem:
        flags += ["-rdc", "true"]
    try:
        flags += [f"-I{d}" for d in _cuda_include_dirs(find_cuda_path())]
    except RuntimeError:
        if native is None:
            raise
        # NVRTC alone (no toolkit): kernels that include no CUDA headers still compile.
    if nvshmem_include:
        flags.append(f"-I{nvshmem_include}")
        flags += [
            "-D__NV_SILENCE_DEPRECATION_BEGIN=",
            "-D__NV_SILENCE_DEPRECATION_END=",
            "-D__NV_SILENCE_HOST_DEPRECATION_BEGIN=",
            "-D__NV_SILENCE_HOST_DEPRECATION_END=",
            "-D__CUDA_NO_FP8_CONVERSIONS__",
            "-D__CUDA_NO_FP6_CONVERSIONS__",
            "-D__CUDA_NO_FP4_CONVERSIONS__",
        ]
    flags += _HALF_MACROS
    if not _flag("TVM_CUDA_NVCC_NO_FAST_MATH"):
        flags.append("--use_fast_math")
    flags.append(_ptxas_options())
    flags += shlex.split(os.environ.get("TVM_CUDA_NVRTC_EXTRA_OPTS", ""))
    for option in user_options:
        text = option.decode() if isinstance(option, bytes) else str(option)
        if not text.startswith(_NVCC_ONLY_PREFIXES):
            flags.append(text)

    if native is not None:
        try:
            ptx = native(_nvrtc_source(code, use_nvshmem), flags)
        except RuntimeError as err:
            if "NVRTC not found" not in str(err):
                raise
            raise RuntimeError(
                "compiling CUDA with NVRTC needs the cuda-python package (module "
                "cuda.bindings.nvrtc; pip install cuda-python) or the NVRTC library, and neither "
                f"is here ({err}). Alternatively compile with nvcc: compiler='nvcc' (or "
                "TVM_CUDA_COMPILE_MODE=nvcc)"
            ) from err
        return _written(bytearray(ptx), path_target)

    def check(result: Any, what: str) -> None:
        if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, message = nvrtc.nvrtcGetErrorString(result)
            raise RuntimeError(f"NVRTC: {what} failed: {message!r}")

    source = _nvrtc_source(code, use_nvshmem).encode()
    result, program = nvrtc.nvrtcCreateProgram(source, f"{_FILE_STEM}.cu".encode(), 0, [], [])
    check(result, "nvrtcCreateProgram")
    try:
        encoded = [flag.encode() for flag in flags]
        (result,) = nvrtc.nvrtcCompileProgram(program, len(encoded), encoded)
        if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            log_result, size = nvrtc.nvrtcGetProgramLogSize(program)
            log = bytearray(size)
            if log_result == nvrtc.nvrtcResult.NVRTC_SUCCESS and size:
                nvrtc.nvrtcGetProgramLog(program, log)
            text = log.rstrip(b"\0").decode(errors="replace")
            raise RuntimeError(f"{code}\nCompilation error (NVRTC):\n{text}")
        if target_format == "cubin":
            result, size = nvrtc.nvrtcGetCUBINSize(program)
            check(result, "nvrtcGetCUBINSize")
            binary = bytearray(size)
            (result,) = nvrtc.nvrtcGetCUBIN(program, binary)
            check(result, "nvrtcGetCUBIN")
        else:
            result, size = nvrtc.nvrtcGetPTXSize(program)
            check(result, "nvrtcGetPTXSize")
            binary = bytearray(size)
            (result,) = nvrtc.nvrtcGetPTX(program, binary)
            check(result, "nvrtcGetPTX")
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    if use_nvshmem:
        binary = _link_nvshmem(binary, str(nvshmem_lib))
    return _written(binary, path_target)


def _written(binary: bytearray, path_target: str | None) -> bytearray:
    """``binary``, also written to ``path_target`` when given; an empty one is an error."""
    if not binary:
        raise RuntimeError("Compilation error: empty result is generated")
    if path_target:
        with open(path_target, "wb") as out:
            out.write(binary)
    return binary


def _native_nvrtc() -> Any:
    """``tvm.support.nvrtc_compile`` of the runtime (CUDA source to PTX with ``libnvrtc``
    opened at run time), or None when this build has no CUDA backend."""
    from .. import ffi

    return ffi.get_global_func("tvm.support.nvrtc_compile", allow_missing=True)


def _link_nvshmem(cubin: bytearray, nvshmem_lib: str) -> bytearray:
    """Links relocatable device code with the NVSHMEM device library (CUDA driver linker)."""
    import ctypes

    from cuda.bindings import driver

    def check(result: Any, what: str) -> None:
        if result != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"CUDA driver: {what} failed while linking NVSHMEM: {result}")

    library = os.path.join(nvshmem_lib, "libnvshmem_device.a")
    if not os.path.isfile(library):
        raise RuntimeError(f"the NVSHMEM device library {library} does not exist")
    (result,) = driver.cuInit(0)
    check(result, "cuInit")
    result, device = driver.cuDeviceGet(0)
    check(result, "cuDeviceGet")
    result, context = driver.cuCtxCreate(None, 0, device)
    check(result, "cuCtxCreate")
    try:
        result, state = driver.cuLinkCreate(0, [], [])
        check(result, "cuLinkCreate")
        try:
            (result,) = driver.cuLinkAddData(
                state,
                driver.CUjitInputType.CU_JIT_INPUT_CUBIN,
                bytes(cubin),
                len(cubin),
                f"{_FILE_STEM}.cubin".encode(),
                0,
                [],
                [],
            )
            check(result, "cuLinkAddData")
            (result,) = driver.cuLinkAddFile(
                state, driver.CUjitInputType.CU_JIT_INPUT_LIBRARY, library.encode(), 0, [], []
            )
            check(result, "cuLinkAddFile")
            result, image, size = driver.cuLinkComplete(state)
            check(result, "cuLinkComplete")
            return bytearray(ctypes.string_at(image, size))
        finally:
            driver.cuLinkDestroy(state)
    finally:
        driver.cuCtxDestroy(context)


def find_cuda_path() -> str:
    """The root of the CUDA toolkit: ``$CUDA_PATH``, ``$CUDA_HOME``, the directory above
    ``bin/nvcc`` on ``PATH``, or ``/usr/local/cuda``; ``RuntimeError`` if none."""
    for variable in ("CUDA_PATH", "CUDA_HOME"):
        value = os.environ.get(variable)
        if value:
            return value
    nvcc = shutil.which("nvcc")
    if nvcc:
        return os.path.realpath(os.path.join(nvcc, "..", ".."))
    default = "/usr/local/cuda"
    if os.path.isfile(os.path.join(default, "bin", "nvcc")):
        return default
    raise RuntimeError(
        "Cannot find CUDA path: CUDA_PATH and CUDA_HOME are not set, nvcc is not on PATH and "
        f"{default}/bin/nvcc does not exist. Install the CUDA toolkit or set CUDA_PATH to its "
        "root"
    )


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(field) for field in text.strip().split("."))


def get_cuda_version(cuda_path: str | None = None) -> tuple[int, ...]:
    """The CUDA toolkit version as a tuple of ints, e.g. ``(12, 4, 131)``: from its
    ``version.txt`` or ``version.json``, else from ``nvcc --version``."""
    if cuda_path is None:
        cuda_path = find_cuda_path()
    for candidate in (
        os.path.join(cuda_path, "version.txt"),
        os.path.join(cuda_path, "lib", "cuda", "version.txt"),  # Debian/Ubuntu packaging
    ):
        try:
            with open(candidate) as handle:
                return _version_tuple(handle.read().split()[-1])
        except (OSError, IndexError, ValueError):
            continue
    try:
        with open(os.path.join(cuda_path, "version.json")) as handle:
            return _version_tuple(json.load(handle)["cuda"]["version"])
    except (OSError, KeyError, TypeError, ValueError):
        pass
    nvcc = os.path.join(cuda_path, "bin", "nvcc")
    try:
        out = subprocess.run(
            [nvcc, "--version"], capture_output=True, text=True, check=False
        ).stdout
    except OSError:
        out = ""
    match = re.search(r"\bV(\d+(?:\.\d+)+)", out)
    if match:
        return _version_tuple(match.group(1))
    raise RuntimeError(
        f"Cannot read the CUDA version of {cuda_path}: no version.txt or version.json there and "
        f"{nvcc} --version gave none"
    )


def find_nvshmem_paths() -> tuple[str, str]:
    """The NVSHMEM include and library directories: the first candidate root (``$NVSHMEM_HOME``,
    the CUDA toolkit, ``/usr/local``, ``/usr``) with ``nvshmem.h`` and ``libnvshmem``."""
    roots: list[str] = []
    if os.environ.get("NVSHMEM_HOME"):
        roots.append(os.environ["NVSHMEM_HOME"])
    try:
        roots.append(find_cuda_path())
    except RuntimeError:
        pass
    roots += ["/usr/local", "/usr"]
    unique = list(dict.fromkeys(roots))
    triple = f"{platform.machine()}-{platform.system().lower()}-gnu"
    for root in unique:
        include_dirs = [os.path.join(root, "include")]
        include_dirs += sorted(glob.glob(os.path.join(root, "include", "nvshmem_*")))
        lib_dirs = [
            os.path.join(root, "lib64"),
            os.path.join(root, "lib"),
            os.path.join(root, "lib", triple),
            os.path.join(root, "lib64", triple),
        ]
        for include in include_dirs:
            if not os.path.isfile(os.path.join(include, "nvshmem.h")):
                continue
            for lib in lib_dirs:
                if any(
                    os.path.isfile(os.path.join(lib, f"libnvshmem.{ext}")) for ext in ("a", "so")
                ):
                    return include, lib
    searched = "\n".join(f"  - {root}" for root in unique)
    raise RuntimeError(
        "Cannot find NVSHMEM (nvshmem.h with libnvshmem.a or libnvshmem.so). Searched:\n"
        f"{searched}\nSet NVSHMEM_HOME to the NVSHMEM installation, or install it with the CUDA "
        "toolkit"
    )


def tvm_callback_cuda_compile(code: str) -> bytearray:
    """Compiles generated CUDA code for the runtime (global ``tvm_callback_cuda_compile``):
    NVRTC to cubin by default, nvcc to fatbin with ``TVM_CUDA_COMPILE_MODE=nvcc``."""
    mode = os.environ.get("TVM_CUDA_COMPILE_MODE", "nvrtc").strip().lower()
    if mode == "nvrtc":
        return compile_cuda(code, target_format="cubin", compiler="nvrtc")
    if mode == "nvcc":
        return compile_cuda(code, target_format="fatbin", compiler="nvcc")
    raise ValueError(f"TVM_CUDA_COMPILE_MODE must be 'nvrtc' or 'nvcc', got {mode!r}")


def find_libdevice_path(arch: int) -> str:
    """The libdevice bitcode file for compute architecture ``arch`` (e.g. 80)."""
    cuda_path = find_cuda_path()
    lib_dir = os.path.join(cuda_path, "nvvm", "libdevice")
    if not os.path.isdir(lib_dir):
        lib_dir = os.path.join(cuda_path, "lib", "nvidia-cuda-toolkit", "libdevice")
    version = get_cuda_version(cuda_path)
    if (9, 0) <= tuple(version[:2]) <= (11, 3):
        return os.path.join(lib_dir, "libdevice.10.bc")
    best_arch, best = -1, None
    try:
        names = sorted(os.listdir(lib_dir))
    except OSError as err:
        raise RuntimeError(f"Cannot find libdevice: {lib_dir} cannot be read ({err})") from None
    for name in names:
        if not name.startswith("libdevice") or not name.endswith(".bc"):
            continue
        match = re.fullmatch(r"libdevice\.compute_(\d+)\.10\.bc", name)
        if match is None:
            best = best or name  # plain libdevice.10.bc
            continue
        candidate = int(match.group(1))
        if best_arch < candidate <= arch:
            best_arch, best = candidate, name
    if best is None:
        raise RuntimeError(f"Cannot find libdevice for arch {arch} in {lib_dir}")
    return os.path.join(lib_dir, best)


def callback_libdevice_path(arch: int) -> str:
    """:func:`find_libdevice_path`, or "" (with a warning) if there is none."""
    try:
        return find_libdevice_path(arch)
    except RuntimeError as err:
        warnings.warn(f"Cannot find libdevice path: {err}", stacklevel=2)
        return ""


def _target_arch(target: Any) -> str | None:
    if target is None:
        return None
    if isinstance(target, str):
        if re.fullmatch(r"sm_\d+[a-z]?", target):
            return target
        match = re.search(r"-arch[= ](sm_\d+[a-z]?)", target)
        return match.group(1) if match else None
    if isinstance(target, Mapping):
        value = target.get("arch")
        return str(value) if value else None
    value = getattr(target, "arch", None)
    if not value:
        attrs = getattr(target, "attrs", None)
        if attrs is not None:
            try:
                value = attrs["arch"] if "arch" in attrs else None
            except (TypeError, KeyError):
                value = None
    return str(value) if value else None


def _gpu_compute_version() -> str | None:
    """The compute capability of GPU 0 ("8.6"), if one can be queried."""
    try:
        from .. import runtime

        value = getattr(runtime.cuda(0), "compute_version", None)
        if value:
            return str(value)
    except Exception:
        pass
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        proc = subprocess.run(
            [smi, "--query-gpu=compute_cap", "--format=csv,noheader", "--id=0"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    text = proc.stdout.strip().splitlines()[0].strip() if proc.stdout.strip() else ""
    return text if proc.returncode == 0 and re.fullmatch(r"\d+\.\d+", text) else None


def get_target_compute_version(target: Any = None) -> str:
    """The compute version, "major.minor" (with ".a" for architecture-specific targets such
    as ``sm_90a``): from the ``arch`` of ``target`` (an object with ``arch`` or
    ``attrs["arch"]``, a mapping, ``"sm_86"`` or a target string with ``-arch=sm_86``), else
    from GPU 0 (``".a"`` added from major 9 on); ``ValueError`` if neither is available."""
    arch = _target_arch(target)
    if arch is not None:
        match = re.fullmatch(r"sm_(\d+)(\d)([a-z]?)", arch)
        if match is None:
            raise ValueError(f"cannot read a compute version from arch {arch!r}")
        major, minor, suffix = match.groups()
        return f"{major}.{minor}.{suffix}" if suffix else f"{major}.{minor}"
    version = _gpu_compute_version()
    if version is not None:
        major, _ = parse_compute_version(version)
        return f"{version}.a" if major >= 9 else version
    raise ValueError(
        "No CUDA architecture was specified and no CUDA GPU was found: give a target with an "
        "arch such as 'sm_80' (or arch= to compile_cuda)"
    )


def parse_compute_version(compute_version: str) -> tuple[int, int]:
    """``"8.6"`` -> ``(8, 6)`` (further fields such as ``".a"`` are ignored)."""
    fields = str(compute_version).split(".")
    try:
        return int(fields[0]), int(fields[1])
    except (IndexError, ValueError):
        raise RuntimeError(f"Compute version parsing error: {compute_version!r}") from None


def have_fp16(compute_version: str) -> bool:
    """Whether fp16 arithmetic is supported: compute 5.3, or 6.0 and later."""
    major, minor = parse_compute_version(compute_version)
    return (major, minor) == (5, 3) or major >= 6


def have_int8(compute_version: str) -> bool:
    """Whether int8 dot products are supported: compute 6.0 and later."""
    major, _ = parse_compute_version(compute_version)
    return major >= 6


def have_tensorcore(compute_version: str | None = None, target: Any = None) -> bool:
    """Whether tensor cores exist: compute 7.0 and later. Without ``compute_version`` the
    ``arch`` of ``target`` decides; with neither it warns and returns False."""
    if compute_version is None:
        arch = _target_arch(target)
        if arch is None:
            warnings.warn(
                "Tensorcore will be disabled due to no CUDA architecture specified.",
                stacklevel=2,
            )
            return False
        compute_version = get_target_compute_version(arch)
    major, _ = parse_compute_version(compute_version)
    return major >= 7


def have_cudagraph() -> bool:
    """Whether the installed CUDA toolkit (10.0 and later) supports CUDA graphs."""
    try:
        return tuple(get_cuda_version()[:2]) >= (10, 0)
    except RuntimeError:
        return False


def have_bf16(compute_version: str) -> bool:
    """Whether bfloat16 is supported: compute 8.0 and later."""
    major, _ = parse_compute_version(compute_version)
    return major >= 8


def have_fp8(compute_version: str) -> bool:
    """Whether fp8 is supported: compute 8.9, or 9.0 and later."""
    major, minor = parse_compute_version(compute_version)
    return (major, minor) == (8, 9) or major >= 9


def have_fp4(compute_version: str) -> bool:
    """Whether fp4 is supported: compute 10.0 exactly."""
    return parse_compute_version(compute_version) == (10, 0)


def _register_global_functions() -> None:
    from ..ffi import register_func

    register_func("tvm_callback_cuda_compile", tvm_callback_cuda_compile, override=True)
    register_func("tvm_callback_libdevice_path", find_libdevice_path, override=True)
    for prefix in ("tvm.support.nvcc", "tvm.contrib.nvcc"):
        register_func(f"{prefix}.get_compute_version", get_target_compute_version, override=True)
        register_func(f"{prefix}.supports_bf16", have_bf16, override=True)
        register_func(f"{prefix}.supports_fp8", have_fp8, override=True)
        register_func(f"{prefix}.supports_fp4", have_fp4, override=True)


_register_global_functions()
