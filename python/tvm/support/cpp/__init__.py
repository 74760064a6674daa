"""``tvm.support.cpp``: C++ (and CUDA or HIP) compiled against this package's headers into a
shared library, cached, and loaded as a :class:`~tvm.ffi.Module`.

.. code-block:: python

    from tvm.support import cpp

    mod = cpp.load_inline(
        "add",
        cpp_sources="int64_t add(int64_t a, int64_t b) { return a + b; }",
        functions=["add"],
    )
    assert mod.add(2, 3) == 5

- :func:`load_inline` / :func:`build_inline`: source text; each source starts with
  ``#include <tvm/ffi/ffi.h>``, and the functions named in ``functions`` are exported after it
  (``TVM_FFI_DLL_EXPORT_TYPED_FUNC``, with ``..._DOC`` for a ``{name: doc}`` mapping).
- :func:`load` / :func:`build`: existing files (``.cc``/``.cpp``/``.cxx`` with the C++
  compiler, ``.c`` with the C compiler, ``.cu`` with nvcc or hipcc), which export their
  functions themselves.

A build goes into ``build_directory``, or else into a directory of the cache (:func:`cache_dir`)
named by a key of its name, sources, flags, compilers and their versions, this package's version
and its headers: the same inputs load the library built before, a change builds again, and
builds of one directory from several processes wait for each other (a file lock). ninja runs
the build when it is installed (on ``PATH`` or beside the interpreter); otherwise the compilers
are called directly. A failed compilation raises :class:`BuildError` with the compiler's own
output.

Device sources compile with nvcc (``backend="cuda"``) or hipcc (``"hip"``); by default the one
found (``$TVM_FFI_GPU_BACKEND`` chooses). ``$TVM_FFI_CUDA_ARCH_LIST`` ("8.0;9.0+PTX") and
``$TVM_FFI_ROCM_ARCH_LIST`` ("gfx90a;gfx942") choose the architectures.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union

from .. import libinfo
from . import _build, _sources, _toolchain
from ._build import BuildError, Plan, Step

if TYPE_CHECKING:
    from ...ffi import Module

    # (typing.Union: the 3.9 type checkers read `|` between types only in annotations)
    Sources = Union[str, Sequence[str], None]
    Functions = Union[Sequence[str], Mapping[str, Optional[str]], None]
    Flags = Optional[Sequence[str]]
    PathLike = Union[str, os.PathLike[str]]

__all__ = ["BuildError", "build", "build_inline", "cache_dir", "load", "load_inline"]

_C_SUFFIXES = (".c",)
_CXX_SUFFIXES = (".cc", ".cpp", ".cxx", ".C")
_DEVICE_SUFFIXES = (".cu",)


def cache_dir() -> Path:
    """The root of the build cache: ``$TVM_FFI_CACHE_DIR``, else ``$XDG_CACHE_HOME/tvm/cpp``,
    else ``~/.cache/tvm/cpp``."""
    return _build.cache_root()


def _flags(flags: Flags, what: str) -> tuple[str, ...]:
    """``flags`` as a tuple of str; a ``TypeError`` or ``ValueError`` naming a bad one (a NUL or
    a line break would cut a command line or the build file)."""
    if flags is None:
        return ()
    if isinstance(flags, (str, bytes)):
        raise TypeError(f"{what} must be a list of str, got the single value {flags!r}")
    try:
        items = tuple(flags)
    except TypeError:
        raise TypeError(f"{what} must be a list of str, got {flags!r}") from None
    for flag in items:
        if not isinstance(flag, str):
            raise TypeError(f"{what} must be a list of str, got the item {flag!r}")
        if any(c in flag for c in "\0\n\r"):
            raise ValueError(f"{what} holds {flag!r}: a NUL or line break cannot be passed")
    return items


class _Options:
    """The flags and places every entry point takes, checked once."""

    def __init__(
        self,
        extra_cflags: Flags,
        extra_cuda_cflags: Flags,
        extra_ldflags: Flags,
        extra_include_paths: Flags,
        build_directory: PathLike | None,
        backend: str | None,
    ) -> None:
        self.cflags = _flags(extra_cflags, "extra_cflags")
        self.cuda_cflags = _flags(extra_cuda_cflags, "extra_cuda_cflags")
        self.ldflags = _flags(extra_ldflags, "extra_ldflags")
        self.includes = _build.include_flags(_flags(extra_include_paths, "extra_include_paths"))
        if build_directory is not None and not os.fspath(build_directory):
            raise ValueError("build_directory must name a directory, got ''")
        self.build_directory = None if build_directory is None else Path(build_directory)
        self.backend = backend

    def plan(
        self,
        name: str,
        sources: Sequence[tuple[Path, str | None]],
        writes: Sequence[tuple[Path, str]],
        key_covers_inputs: bool,
    ) -> tuple[Plan, str]:
        """The plan and key of building ``sources`` (paths, each with its text when known)."""
        cxx = _toolchain.cxx()
        device = None
        steps = []
        for index, (path, _) in enumerate(sources):
            if path.suffix in _DEVICE_SUFFIXES:
                device = device or _toolchain.gpu_compiler(_toolchain.gpu_backend(self.backend))
                compiler, extra = device, self.cuda_cflags
            elif path.suffix in _C_SUFFIXES:
                compiler, extra = _toolchain.c(), self.cflags
            else:
                compiler, extra = cxx, self.cflags
            obj = Path(f"{path.stem}.{index}.o")
            steps.append(Step(compiler, path, obj, (*self.includes, *extra)))
        runtime = tuple(libinfo.link_flags())  # the runtime library, found again through rpath
        link_flags = (*(device.link_flags if device else ()), *self.ldflags, *runtime)
        inputs = {
            "name": name,
            "sources": [[str(path), text] for path, text in sources],
            "steps": [[s.compiler.path, list(s.compiler.flags), list(s.flags)] for s in steps],
            "compilers": sorted(
                {s.compiler.path: _toolchain.version_of(s.compiler.path) for s in steps}.items()
            ),
            "link": [cxx.path, list(link_flags)],
        }
        key = _build.key_of(inputs)
        directory = self.build_directory or cache_dir() / f"{name}_{key[:16]}"
        directory = directory.absolute()
        steps = [Step(s.compiler, directory / s.source, directory / s.obj, s.flags) for s in steps]
        placed = tuple((directory / path, text) for path, text in writes)
        # In a directory of the caller's, each set of inputs gets a library file of its own:
        # the dynamic loader hands back a library it already loaded from the same path, so a
        # rebuild in place would load the old code in this process.
        output = f"{name}.so" if self.build_directory is None else f"{name}.{key[:16]}.so"
        plan = Plan(
            name, directory, tuple(steps), cxx, link_flags, placed, key_covers_inputs, output
        )
        return plan, key


def build_inline(
    name: str,
    *,
    cpp_sources: Sources = None,
    cuda_sources: Sources = None,
    functions: Functions = None,
    extra_cflags: Flags = None,
    extra_cuda_cflags: Flags = None,
    extra_ldflags: Flags = None,
    extra_include_paths: Flags = None,
    build_directory: PathLike | None = None,
    backend: str | None = None,
) -> str:
    """Builds C++ source text (and CUDA/HIP text) into a shared library; its path.

    ``functions`` (a list of names, or a dict of name to doc) are exported from the C++ source,
    or from the device source when there is no C++ source. See the module docs for the cache.
    """
    name = _sources.check_name(name)
    cpp = _sources.joined(cpp_sources, "cpp_sources")
    cuda = _sources.joined(cuda_sources, "cuda_sources")
    if cpp is None and cuda is None:
        raise ValueError("build_inline needs cpp_sources or cuda_sources")
    docs = _sources.function_docs(functions)
    options = _Options(
        extra_cflags,
        extra_cuda_cflags,
        extra_ldflags,
        extra_include_paths,
        build_directory,
        backend,
    )
    texts = []
    if cpp is not None:
        texts.append((Path("main.cpp"), _sources.with_exports(cpp, docs)))
    if cuda is not None:
        cuda_exports = docs if cpp is None else {}
        texts.append((Path("cuda.cu"), _sources.with_exports(cuda, cuda_exports)))
    plan, key = options.plan(name, list(texts), texts, key_covers_inputs=True)
    return str(_build.run(plan, key))


def load_inline(name: str, **kwargs: object) -> Module:
    """:func:`build_inline`, then the library loaded as a module (same arguments)."""
    return _load(build_inline(name, **kwargs))  # type: ignore[arg-type]


def build(
    name: str,
    *,
    cpp_files: Sequence[PathLike] | None = None,
    cuda_files: Sequence[PathLike] | None = None,
    extra_cflags: Flags = None,
    extra_cuda_cflags: Flags = None,
    extra_ldflags: Flags = None,
    extra_include_paths: Flags = None,
    build_directory: PathLike | None = None,
    backend: str | None = None,
) -> str:
    """Builds source files (C, C++, and CUDA/HIP ``.cu``) into a shared library; its path. The
    files export their functions themselves (``TVM_FFI_DLL_EXPORT_TYPED_FUNC``). With ninja the
    build runs every time and recompiles what changed (included headers too); without it, files
    whose text is unchanged are not compiled again."""
    name = _sources.check_name(name)
    files = []
    for group, given in (("cpp_files", cpp_files), ("cuda_files", cuda_files)):
        if given is None:
            continue
        if isinstance(given, (str, os.PathLike)):
            raise TypeError(f"{group} must be a list of paths, got the single path {given!r}")
        for entry in given:
            path = Path(entry).absolute()
            if not path.is_file():
                raise FileNotFoundError(f"{group}: no such file: {path}")
            if group == "cuda_files" and path.suffix not in _DEVICE_SUFFIXES:
                raise ValueError(f"cuda_files takes .cu files, got {path}")
            if group == "cpp_files" and path.suffix not in (*_CXX_SUFFIXES, *_C_SUFFIXES):
                raise ValueError(f"cpp_files takes .c, .cc, .cpp or .cxx files, got {path}")
            files.append((path, path.read_text(errors="replace")))
    if not files:
        raise ValueError("build needs cpp_files or cuda_files")
    options = _Options(
        extra_cflags,
        extra_cuda_cflags,
        extra_ldflags,
        extra_include_paths,
        build_directory,
        backend,
    )
    plan, key = options.plan(name, files, [], key_covers_inputs=_toolchain.ninja() is None)
    return str(_build.run(plan, key))


def load(name: str, **kwargs: object) -> Module:
    """:func:`build`, then the library loaded as a module (same arguments)."""
    return _load(build(name, **kwargs))  # type: ignore[arg-type]


def _load(path: str) -> Module:
    from ...ffi import load_module

    return load_module(path)
