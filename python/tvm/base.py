"""Loading of the native runtime and of backend libraries.

One owner of process-wide state: the global function registry, the type table, the device
registry and the per-thread error slot exist once per process, in the runtime library
``tvm/lib/libtvm_ffi.so``, which defines every ``TVMFFI*`` C function. The extension module
``tvm._native`` holds no state: it links that library by SONAME.

Importing this module loads the runtime library with ``RTLD_GLOBAL`` *before* anything imports
``tvm._native``, so its C API is in the global symbol scope of the process. Libraries loaded
afterwards (kernels, out-of-tree backends, Apache TVM's C++ libraries) resolve their ``TVMFFI*``
references against this one copy, whether they leave them undefined or were linked with
``-ltvm_ffi``, and so share the registry that Python uses. A different ``libtvm_ffi.so`` already
in the process (apache-tvm-ffi's, say) is refused at import with both paths: two registries side
by side would split every global and type.

``_LOADED_LIBS`` maps the file name (basename) of every library loaded here to its ctypes
handle; extensions call :func:`load_backend_libs` to load theirs, which skips any basename
already present.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Iterable

__all__ = ["load_backend_libs"]

#: Basename of each library loaded by this module -> its ctypes handle. The native runtime is
#: the first entry.
_LOADED_LIBS: dict[str, ctypes.CDLL] = {}

# RTLD_GLOBAL has the same value in os and ctypes on POSIX; ctypes also defines it (as 0) on
# Windows, where symbol scope does not apply.
_GLOBAL_MODE = ctypes.RTLD_GLOBAL

# Not resolved: the same path the import system uses for tvm._native.
_PACKAGE_DIR = os.path.dirname(__file__)
_LOCK = threading.RLock()

if sys.platform == "win32":
    _SHLIB_PREFIXES, _SHLIB_SUFFIX = ("",), ".dll"
elif sys.platform == "darwin":
    _SHLIB_PREFIXES, _SHLIB_SUFFIX = ("lib", ""), ".dylib"
else:
    _SHLIB_PREFIXES, _SHLIB_SUFFIX = ("lib", ""), ".so"

#: A C function of the runtime library, used to tell which library defines the C API.
_PROBE_SYMBOL = "TVMFFIFunctionCall"


def _native_library_path() -> str:
    """The runtime library this package ships: ``tvm/lib/libtvm_ffi.so``."""
    path = os.path.join(_PACKAGE_DIR, "lib", f"libtvm_ffi{_SHLIB_SUFFIX}")
    if not os.path.isfile(path):
        raise ImportError(
            f"the runtime library of tvm is missing: {path}; build and install the package "
            "(pip install ., or maturin)"
        )
    return path


class _DlInfo(ctypes.Structure):
    _fields_ = (
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    )


def _defining_file(address: int) -> str:
    """The file of the loaded library that holds ``address`` (``dladdr``), or ``"?"``."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except (OSError, AttributeError):
        return "?"
    dladdr.argtypes = (ctypes.c_void_p, ctypes.POINTER(_DlInfo))
    info = _DlInfo()
    if not dladdr(address, ctypes.byref(info)) or not info.dli_fname:
        return "?"
    return os.fsdecode(info.dli_fname)


def _check_single_runtime(handle: ctypes.CDLL, path: str) -> None:
    """``ImportError`` when the C API of the process resolves to another library than ours."""
    if sys.platform == "win32":
        return
    ours = ctypes.cast(getattr(handle, _PROBE_SYMBOL), ctypes.c_void_p).value
    try:
        first = ctypes.cast(getattr(ctypes.CDLL(None), _PROBE_SYMBOL), ctypes.c_void_p).value
    except AttributeError:
        return
    if first == ours:
        return
    other = _defining_file(first or 0)
    raise ImportError(
        f"another TVM FFI runtime library is already loaded in this process: {other}; tvm's "
        f"is {path}. Two runtimes would keep two registries side by side; import tvm in a "
        "process without the other one (apache-tvm-ffi's tvm_ffi, say), or use only one of them"
    )


def _load_native_library() -> str:
    path = _native_library_path()
    try:
        handle = ctypes.CDLL(path, mode=_GLOBAL_MODE)
    except OSError as err:
        raise ImportError(f"cannot load the runtime library of tvm {path}: {err}") from err
    _check_single_runtime(handle, path)
    name = os.path.basename(path)
    _LOADED_LIBS[name] = handle
    return name


def _candidate_names(name: str) -> list[str]:
    """File names a bare library name may have: as given, then with prefix and suffix."""
    names = [name]
    stem_has_suffix = name.endswith(_SHLIB_SUFFIX) or f"{_SHLIB_SUFFIX}." in name
    for prefix in _SHLIB_PREFIXES:
        full = f"{prefix}{name}" if stem_has_suffix else f"{prefix}{name}{_SHLIB_SUFFIX}"
        if full not in names:
            names.append(full)
    return names


def _is_path(text: str) -> bool:
    """Whether an entry names a file (absolute, or with a directory part), not a bare name."""
    return os.path.isabs(text) or os.sep in text or bool(os.altsep and os.altsep in text)


def _recorded_handle(text: str) -> ctypes.CDLL | None:
    """The handle of an already loaded library with the basename this entry would have."""
    names = [os.path.basename(text)] if _is_path(text) else _candidate_names(text)
    for file_name in names:
        handle = _LOADED_LIBS.get(file_name)
        if handle is not None:
            return handle
    return None


def _resolve(text: str, search_dirs: list[str]) -> str:
    if _is_path(text):
        if os.path.isfile(text):
            return text
        parent = os.path.dirname(text) or os.curdir
        raise FileNotFoundError(f"backend library {text!r} not found (searched: {parent})")
    for directory in search_dirs:
        for file_name in _candidate_names(text):
            candidate = os.path.join(directory, file_name)
            if os.path.isfile(candidate):
                return candidate
    searched = ", ".join(search_dirs) or "no directories"
    raise FileNotFoundError(
        f"backend library {text!r} not found (tried {', '.join(_candidate_names(text))} "
        f"in: {searched})"
    )


def _entry_text(entry: object) -> str:
    """One entry of ``load_backend_libs`` as text: a non-empty ``str`` path or name."""
    text = os.fspath(entry) if isinstance(entry, (str, os.PathLike)) else None
    if not isinstance(text, str):
        raise TypeError(f"a backend library is named by a str or os.PathLike, got {entry!r}")
    if not text:
        raise ValueError("a backend library name is empty")
    return text


def _check_complete(path: str) -> None:
    """Refuses a library file cut short (whose mapping would crash the process inside the dynamic
    loader) with an ``OSError`` naming the file and what is missing."""
    from .ffi import get_global_func  # the runtime is complete once tvm is imported

    get_global_func("runtime.CheckSharedLibrary")(path)


def load_backend_libs(
    names_or_paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    search_dirs: Iterable[str | os.PathLike[str]] | None = None,
) -> list[ctypes.CDLL]:
    """Loads shared libraries into the global symbol scope, each at most once.

    Parameters
    ----------
    names_or_paths
        Library paths (absolute, or relative with a directory part) or bare names. A bare name
        ``foo`` is looked up in ``search_dirs`` as ``foo``, ``libfoo.so`` and ``foo.so``
        (``.dylib`` on macOS, ``.dll`` on Windows). A single name or path may be passed alone.
    search_dirs
        Directories searched for bare names, in order. Defaults to the ``tvm`` package
        directory, where the native runtime lives.

    Returns
    -------
    list of ctypes.CDLL
        One handle per entry, in order. An entry whose basename is already in ``_LOADED_LIBS``
        is not loaded again; its recorded handle is returned.

    Raises
    ------
    FileNotFoundError
        An entry cannot be found; the message names it and the directories searched.
    OSError
        A file is cut short (the message names what is missing), or the dynamic loader rejects
        it (the message is the loader's).
    TypeError
        An entry is not a ``str`` or ``os.PathLike`` of one (bytes, say), or the argument is
        neither an entry nor an iterable of them.
    ValueError
        An entry is empty.
    """
    if isinstance(names_or_paths, (str, os.PathLike)):
        entries: list[str | os.PathLike[str]] = [names_or_paths]
    elif isinstance(names_or_paths, (bytes, bytearray)) or not isinstance(names_or_paths, Iterable):
        raise TypeError(
            "load_backend_libs takes a library name or path (str or os.PathLike) or an iterable "
            f"of them, got {names_or_paths!r}"
        )
    else:
        entries = list(names_or_paths)
    dirs = [os.fspath(d) for d in search_dirs] if search_dirs is not None else [_PACKAGE_DIR]

    handles: list[ctypes.CDLL] = []
    with _LOCK:
        for entry in entries:
            text = _entry_text(entry)
            recorded = _recorded_handle(text)
            if recorded is not None:
                handles.append(recorded)
                continue
            path = _resolve(text, dirs)
            _check_complete(path)
            try:
                handle = ctypes.CDLL(path, mode=_GLOBAL_MODE)
            except OSError as err:
                raise OSError(f"cannot load backend library {path}: {err}") from err
            _LOADED_LIBS[os.path.basename(path)] = handle
            handles.append(handle)
    return handles


#: Basename of the native runtime's file (its key in _LOADED_LIBS).
_NATIVE_LIB_NAME = _load_native_library()
