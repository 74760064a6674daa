"""The host C/C++ compiler: shared libraries, executables and static archives.

The compiler is, in order: the ``cc=`` argument, ``$CXX``, ``$CC``, or the first of ``g++``,
``gcc``, ``clang++``, ``clang``, ``c++``, ``cc`` found on ``PATH`` (Linux, macOS and FreeBSD;
Windows uses LLVM clang, ``$TVM_WIN_CC``). A compiler that cannot be found is a ``RuntimeError``
that says so and how to name another one; a failed compilation is a ``RuntimeError`` with the
compiler's output and the command line.

Example, building a kernel against the C header::

    from tvm.support import cc, libinfo
    cc.create_shared("libkernel.so", ["kernel.c"],
                     options=[f"-I{d}" for d in libinfo.find_include_path()])
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Union

from . import tar as _tar
from . import utils

__all__ = [
    "create_executable",
    "create_shared",
    "create_staticlib",
    "cross_compiler",
    "get_cc",
    "get_global_symbol_section_map",
    "get_target_by_dump_machine",
]

_CANDIDATES = ("g++", "gcc", "clang++", "clang", "c++", "cc")
#: C compilers, for inputs that are all C sources.
_C_CANDIDATES = ("gcc", "clang", "cc")
_C_SOURCES = (".c",)

# (typing.Union: evaluated at import, where `|` of a generic alias needs 3.10)
PathLike = Union[str, os.PathLike[str]]


def _is_linux_like() -> bool:
    return sys.platform == "darwin" or sys.platform.startswith(("linux", "freebsd"))


def _is_windows_like() -> bool:
    return sys.platform == "win32"


def get_cc() -> str | None:
    """The default C/C++ compiler: ``$CXX``, ``$CC``, or the first of g++, gcc, clang++,
    clang, c++, cc on ``PATH``; None if there is none (and always on Windows)."""
    if not _is_linux_like():
        return None
    for variable in ("CXX", "CC"):
        value = os.environ.get(variable)
        if value:
            return value
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _as_list(items: PathLike | Iterable[PathLike] | None) -> list[str]:
    if items is None:
        return []
    if isinstance(items, (str, os.PathLike)):
        return [os.fspath(items)]
    return [os.fspath(item) for item in items]


def _c_compiler() -> tuple[str | None, str]:
    """The default compiler for C sources, and where it came from: ``$CC``, else the first of
    gcc, clang, cc on ``PATH``, else the C++ default (:func:`get_cc`)."""
    if os.environ.get("CC"):
        return os.environ["CC"], "$CC"
    for name in _C_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found, "PATH"
    return get_cc(), "PATH"


def _only_c_sources(objects: list[str]) -> bool:
    sources = [o for o in objects if o.endswith((*_C_SOURCES, ".cc", ".cpp", ".cxx", ".cu"))]
    return bool(sources) and all(o.endswith(_C_SOURCES) for o in sources)


def _compiler_argv(
    cc: str | Sequence[str] | None,
    what: str = "C/C++ compiler",
    objects: Sequence[str] = (),
) -> list[str]:
    """The command that starts the compiler (``cc`` may carry a launcher such as
    ``"ccache g++"``); ``RuntimeError`` if its program cannot be found. Without ``cc``, inputs
    that are all C sources (``.c``) get the C compiler, anything else the C++ one."""
    origin = "the cc= argument"
    if cc is None and _is_linux_like() and _only_c_sources(list(objects)):
        cc, origin = _c_compiler()
    if cc is None:
        for variable in ("CXX", "CC"):
            if os.environ.get(variable):
                origin = f"${variable}"
                break
        cc = get_cc()
        if cc is None:
            raise RuntimeError(
                f"no {what} found: $CXX and $CC are not set and none of "
                f"{', '.join(_CANDIDATES)} is on PATH. Install one (e.g. gcc), or name the "
                "compiler with the CXX (or CC) environment variable or the cc= argument"
            )
    if isinstance(cc, (str, os.PathLike)):
        text = os.fspath(cc)
        argv = [text] if os.path.isfile(text) else shlex.split(text)
    else:
        argv = [os.fspath(part) for part in cc]
    if not argv:
        raise RuntimeError(f"empty {what} command (from {origin})")
    if shutil.which(argv[0]) is None:
        raise RuntimeError(
            f"{what} {argv[0]!r} (from {origin}) was not found or is not executable. "
            "Install it, or point at another compiler with the CXX (or CC) environment "
            "variable or the cc= argument"
        )
    return argv


def _include_flags(options: list[str]) -> list[str]:
    """``-I`` flags for the TVM headers (:func:`tvm.support.libinfo.find_include_path`) that the
    options do not name already; none when the headers cannot be found."""
    from . import libinfo

    try:
        directories = libinfo.find_include_path()
    except RuntimeError:
        return []
    return [f"-I{d}" for d in directories if f"-I{d}" not in options]


def _run(cmd: list[str], cwd: PathLike | None, env: dict[str, str] | None, failure: str) -> str:
    try:
        proc = subprocess.run(
            cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False
        )
    except OSError as err:
        raise RuntimeError(
            f"cannot run {cmd[0]!r}: {err}\nCommand line: {shlex.join(cmd)}"
        ) from err
    output = proc.stdout.decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{failure}:\n{output}\nCommand line: {shlex.join(cmd)}")
    return output


def _with_ccache(
    cmd: list[str], ccache_env: dict[str, str] | None
) -> tuple[list[str], dict[str, str] | None]:
    if ccache_env is None:
        return cmd, None
    ccache = shutil.which("ccache")
    if ccache is None:
        raise ValueError(
            "ccache not found: install ccache (and put it on PATH) or call without ccache_env"
        )
    env = dict(os.environ)
    env.update({str(key): str(value) for key, value in ccache_env.items()})
    return [ccache, *cmd], env


def _linux_compile(
    output: PathLike,
    objects: PathLike | Iterable[PathLike],
    options: str | Iterable[str] | None,
    cc: str | Sequence[str] | None,
    cwd: PathLike | None = None,
    ccache_env: dict[str, str] | None = None,
    compile_shared: bool = False,
) -> None:
    out = os.fspath(output)
    inputs = _as_list(objects)
    cmd = _compiler_argv(cc, objects=inputs)
    is_nvcc = os.path.basename(cmd[0]).startswith("nvcc")
    if compile_shared or out.endswith((".so", ".dylib")):
        if is_nvcc:
            cmd.append("-shared")
        else:
            cmd += ["-shared", "-fPIC"]
            if sys.platform == "darwin":
                cmd += ["-undefined", "dynamic_lookup"]
    elif out.endswith(".obj"):
        cmd.append("-c")
    # Objects before options: libraries named in the options (-lfoo) must follow the objects
    # that use them.
    extra = _as_list(options)
    cmd += ["-o", out, *inputs, *extra, *_include_flags(extra)]
    cmd, env = _with_ccache(cmd, ccache_env)
    _run(cmd, cwd, env, "Compilation error")


def _windows_compile(
    output: PathLike,
    objects: PathLike | Iterable[PathLike],
    options: str | Iterable[str] | None,
    cwd: PathLike | None = None,
    ccache_env: dict[str, str] | None = None,
    compile_shared: bool = True,
) -> None:
    compiler = os.environ.get("TVM_WIN_CC", "clang")
    target = os.environ.get("TVM_WIN_TARGET", "x86_64")
    if shutil.which(compiler) is None:
        raise RuntimeError(
            f"cannot find the LLVM clang compiler {compiler!r} needed on Windows: install LLVM "
            "and put clang on PATH, or set TVM_WIN_CC to the compiler (TVM_WIN_TARGET sets the "
            "target, default x86_64)"
        )
    out = os.fspath(output)
    cmd = [compiler, "-O2", f"--target={target}"]
    if compile_shared or out.endswith(".dll"):
        cmd.append("-shared")
    elif out.endswith(".obj"):
        cmd.append("-c")
    extra = _as_list(options)
    cmd += ["-o", out, *_as_list(objects), *extra, *_include_flags(extra)]
    cmd, env = _with_ccache(cmd, ccache_env)
    _run(cmd, cwd, env, "Compilation error")


def get_target_by_dump_machine(compiler: str | None) -> Callable[[], str | None]:
    """A function returning the target triple ``compiler -dumpmachine`` prints (None if that
    fails). With ``compiler=None`` the default compiler is looked up when it is called."""

    def get_target_triple() -> str | None:
        name = compiler if compiler is not None else (os.environ.get("CXX") or get_cc())
        if not name:
            return None
        try:
            argv = _compiler_argv(name)
            proc = subprocess.run(
                [*argv, "-dumpmachine"], capture_output=True, text=True, check=False
            )
        except (RuntimeError, OSError):
            return None
        if proc.returncode != 0:
            return None
        return proc.stdout.strip() or None

    return get_target_triple


def _compile(
    output: PathLike,
    objects: PathLike | Iterable[PathLike],
    options: str | Iterable[str] | None,
    cc: str | Sequence[str] | None,
    cwd: PathLike | None,
    ccache_env: dict[str, str] | None,
    compile_shared: bool,
) -> None:
    """Builds a shared library or an executable with the platform's compiler driver."""
    if _is_linux_like():
        _linux_compile(output, objects, options, cc, cwd, ccache_env, compile_shared)
    elif _is_windows_like():
        _windows_compile(output, objects, options, cwd, ccache_env, compile_shared)
    else:
        raise ValueError(f"Unsupported platform {sys.platform!r}")


def create_shared(
    output: PathLike,
    objects: PathLike | Iterable[PathLike],
    options: str | Iterable[str] | None = None,
    cc: str | Sequence[str] | None = None,
    cwd: PathLike | None = None,
    ccache_env: dict[str, str] | None = None,
) -> None:
    """Compiles and links ``objects`` (sources, objects, archives) into the shared library
    ``output`` (adding ``-shared -fPIC``, and ``-I`` for the TVM headers, so that
    ``#include <tvm/ffi/c_api.h>`` works with no options).

    Parameters
    ----------
    output
        The library to write.
    objects
        Input files, in order.
    options
        More compiler arguments, placed after the inputs (``-I``, ``-O2``, ``-lfoo``...).
    cc
        The compiler (a path, a name on PATH, or a command such as ``"ccache g++"``); default:
        for inputs that are all C sources (``.c``) ``$CC`` or the first of gcc, clang, cc;
        otherwise :func:`get_cc`.
    cwd
        Working directory of the compiler.
    ccache_env
        Run the compiler through ``ccache`` with these extra environment variables.
    """
    _compile(output, objects, options, cc, cwd, ccache_env, compile_shared=True)


create_shared.output_format = "dll" if _is_windows_like() else "so"  # type: ignore[attr-defined]
create_shared.get_target_triple = get_target_by_dump_machine(None)  # type: ignore[attr-defined]


def create_executable(
    output: PathLike,
    objects: PathLike | Iterable[PathLike],
    options: str | Iterable[str] | None = None,
    cc: str | Sequence[str] | None = None,
    cwd: PathLike | None = None,
    ccache_env: dict[str, str] | None = None,
) -> None:
    """Compiles and links ``objects`` into the executable ``output``; parameters as for
    :func:`create_shared`."""
    _compile(output, objects, options, cc, cwd, ccache_env, compile_shared=False)


create_executable.get_target_triple = get_target_by_dump_machine(None)  # type: ignore[attr-defined]


def create_staticlib(
    output: PathLike, inputs: PathLike | Iterable[PathLike], ar: str | None = None
) -> None:
    """Archives ``inputs`` (object files; a ``.tar`` contributes the files it holds) into the
    static library ``output`` with ``ar -crs``. The archiver is ``ar=``, ``$AR`` or ``ar``."""
    if not _is_linux_like():
        raise ValueError(f"Unsupported platform {sys.platform!r}")
    archiver = ar or os.environ.get("AR") or "ar"
    if shutil.which(archiver) is None:
        raise RuntimeError(
            f"archiver {archiver!r} was not found: install binutils (or LLVM), or name another "
            "archiver with the AR environment variable or the ar= argument"
        )
    out = os.fspath(output)
    with utils.tempdir() as temp:
        files = _tar.normalize_file_list_by_unpacking_tars(temp, _as_list(inputs))
        staged = temp.relpath(f"lib{os.path.basename(out)}")
        _run([archiver, "-crs", staged, *files], None, None, "Static library creation error")
        shutil.move(staged, out)


create_staticlib.output_format = "a"  # type: ignore[attr-defined]


def get_global_symbol_section_map(path: PathLike, *, nm: str | None = None) -> dict[str, str]:
    """The external symbols defined in the object or library ``path``, each mapped to its
    ``nm`` type letter (``T`` text, ``D`` data, ``B`` bss, ...)."""
    target = os.fspath(path)
    if not os.path.isfile(target):
        raise FileNotFoundError(f"{target} does not exist")
    tool = nm or os.environ.get("NM") or "nm"
    if shutil.which(tool) is None:
        raise RuntimeError(
            f"{tool!r} was not found: install binutils (or LLVM), or name another nm with the "
            "NM environment variable or the nm= argument"
        )
    flags = ["-gU"] if sys.platform == "darwin" else ["-g", "--defined-only"]
    output = _run([tool, *flags, target], None, None, f"{tool} failed on {target}")
    symbols = {}
    for line in output.splitlines():
        fields = line.split()
        if len(fields) == 3:
            symbols[fields[2]] = fields[1]
    return symbols


def cross_compiler(
    compile_func: str | Callable[..., Any],
    options: str | Iterable[str] | None = None,
    output_format: str | None = None,
    get_target_triple: Callable[[], str | None] | None = None,
    add_files: Iterable[PathLike] | None = None,
) -> Callable[..., Any]:
    """A compile function ``fcompile(output, objects, options=None)`` built on another one.

    ``compile_func`` is a compile function (such as :func:`create_shared`) or the name of a
    compiler (``"aarch64-linux-gnu-g++"``: :func:`create_shared` with that ``cc``). The result
    passes ``options`` before the per-call options and appends ``add_files`` to the objects.
    Its ``output_format`` is the one given, else ``compile_func``'s, else ``"so"``; its
    ``get_target_triple`` likewise (for a compiler name: that compiler's ``-dumpmachine``).
    """
    base_options = _as_list(options)
    extra_files = _as_list(add_files)
    kwargs: dict[str, Any] = {}
    if isinstance(compile_func, str):
        if get_target_triple is None:
            get_target_triple = get_target_by_dump_machine(compile_func)
        kwargs["cc"] = compile_func
        compile_func = create_shared
    func = compile_func

    def _fcompile(
        outputs: PathLike,
        objects: PathLike | Iterable[PathLike],
        options: str | Iterable[str] | None = None,
    ) -> Any:
        # Fresh lists each call: repeated calls never accumulate options or files.
        all_objects = [*_as_list(objects), *extra_files]
        all_options = [*base_options, *_as_list(options)]
        return func(outputs, all_objects, options=all_options, **kwargs)

    if output_format is None:
        output_format = getattr(func, "output_format", "so")
    if get_target_triple is None:
        get_target_triple = getattr(func, "get_target_triple", None)
    _fcompile.output_format = output_format  # type: ignore[attr-defined]
    _fcompile.get_target_triple = get_target_triple  # type: ignore[attr-defined]
    return _fcompile
