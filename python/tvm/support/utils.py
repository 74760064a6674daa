"""Temporary directories, file locks and small path helpers used by the build and run paths.

``tempdir()`` makes a :class:`TempDirectory`, removed when it is garbage collected, when its
``with`` block ends, or at interpreter exit. In *keep-for-debug* mode directories are kept
instead and named in order, ``<tmp>/tvm-debug-mode-tempdirs/<timestamp>___<random>/00000``,
``.../00001``, ... so that the files of a failing build can be inspected. The mode is chosen per
directory (``keep_for_debug=True``), for a block (``TempDirectory.set_keep_for_debug()``), or
for the whole process by setting the environment variable ``TVM_KEEP_TEMPDIRS=1``.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, ClassVar

from ._exit_guard import quiet_at_exit

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "DirectoryCreatedPastAtExit",
    "FileLock",
    "TempDirectory",
    "filelock",
    "is_source_path",
    "tempdir",
    "which",
]

_KEEP_ENV = "TVM_KEEP_TEMPDIRS"


class DirectoryCreatedPastAtExit(Exception):
    """A temporary directory was requested after the exit-time cleanup had already run."""


def _env_keeps_tempdirs() -> bool:
    return os.environ.get(_KEEP_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


class TempDirectory:
    """A temporary directory, removed with this object unless kept for debugging.

    Parameters
    ----------
    custom_path
        Create exactly this directory (``os.mkdir``: its parent must exist, it must not).
    keep_for_debug
        Keep the directory (never remove it). None: the class-wide setting
        (:meth:`set_keep_for_debug`, or ``TVM_KEEP_TEMPDIRS=1`` in the environment).
    """

    #: Class-wide keep-for-debug switch (see :meth:`set_keep_for_debug`).
    _KEEP_FOR_DEBUG: ClassVar[bool] = False
    #: Directories to remove at exit; None once that cleanup has run.
    TEMPDIRS: ClassVar[set[str] | None] = set()

    _counter: ClassVar[int] = 0
    _counter_lock: ClassVar[threading.Lock] = threading.Lock()
    _debug_parent: ClassVar[str | None] = None

    @classmethod
    def _next_debug_dir(cls) -> str:
        with cls._counter_lock:
            if cls._debug_parent is None:
                root = os.path.join(tempfile.gettempdir(), "tvm-debug-mode-tempdirs")
                try:
                    os.makedirs(root, exist_ok=True)
                    usable = os.access(root, os.W_OK | os.X_OK)
                except OSError:
                    usable = False
                if not usable:  # created by another user on a shared machine
                    root = f"{root}-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
                    os.makedirs(root, exist_ok=True)
                stamp = datetime.datetime.now().strftime("%Y-%m-%dT%H-%M-%S___")
                cls._debug_parent = tempfile.mkdtemp(prefix=stamp, dir=root)
            number = cls._counter
            cls._counter += 1
        return os.path.join(cls._debug_parent, f"{number:05d}")

    @classmethod
    def remove_tempdirs(cls) -> None:
        """Removes every directory still tracked; later constructions raise
        :class:`DirectoryCreatedPastAtExit`. Runs at exit; calling it again does nothing."""
        tracked = cls.TEMPDIRS
        if tracked is None:
            return
        cls.TEMPDIRS = None
        for path in list(tracked):
            shutil.rmtree(path, ignore_errors=True)

    @classmethod
    @contextlib.contextmanager
    def set_keep_for_debug(cls, set_to: bool = True) -> Iterator[None]:
        """Within the block, directories made without an explicit ``keep_for_debug`` are kept
        (``set_to=True``) or removed as usual (``set_to=False``)."""
        previous = cls._KEEP_FOR_DEBUG
        cls._KEEP_FOR_DEBUG = set_to
        try:
            yield
        finally:
            cls._KEEP_FOR_DEBUG = previous

    def __init__(
        self, custom_path: str | os.PathLike[str] | None = None, keep_for_debug: bool | None = None
    ) -> None:
        self.temp_dir: str | None = None
        tracked = TempDirectory.TEMPDIRS
        if tracked is None:
            raise DirectoryCreatedPastAtExit(
                "cannot create a temporary directory: the exit-time cleanup has already run"
            )
        if keep_for_debug is None:
            keep_for_debug = TempDirectory._KEEP_FOR_DEBUG or _env_keeps_tempdirs()
        self._created_with_keep_for_debug = bool(keep_for_debug)
        if custom_path is not None:
            path = os.path.abspath(os.fspath(custom_path))
            os.mkdir(path)
        elif keep_for_debug:
            path = self._next_debug_dir()
            os.mkdir(path)
        else:
            path = tempfile.mkdtemp()
        self.temp_dir = path
        if not self._created_with_keep_for_debug:
            tracked.add(path)

    @property
    def path(self) -> Path:
        """The directory as a ``pathlib.Path``."""
        return Path(self._require())

    def _require(self) -> str:
        if self.temp_dir is None:
            raise RuntimeError("this temporary directory has been removed")
        return self.temp_dir

    def remove(self) -> None:
        """Deletes the directory and its contents, unless it is kept for debugging."""
        path, self.temp_dir = self.temp_dir, None
        if path is None or self._created_with_keep_for_debug:
            return
        shutil.rmtree(path, ignore_errors=True)
        tracked = TempDirectory.TEMPDIRS
        if tracked is not None:
            tracked.discard(path)

    def relpath(self, name: str) -> str:
        """The path of ``name`` inside the directory."""
        return os.path.join(self._require(), name)

    def listdir(self) -> list[str]:
        """Names of the entries in the directory."""
        return os.listdir(self._require())

    def __truediv__(self, other: Any) -> Path:
        if not isinstance(other, (str, Path)):
            raise TypeError(
                f"TempDirectory / expects a str or pathlib.Path, got {type(other).__name__}"
            )
        return self.path / other

    def __enter__(self) -> TempDirectory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"TempDirectory({self.temp_dir!r})"

    @quiet_at_exit
    def __del__(self) -> None:
        # Once the exit-time cleanup has run, it has removed (or kept) everything already.
        if getattr(self, "temp_dir", None) is not None and TempDirectory.TEMPDIRS is not None:
            self.remove()


atexit.register(TempDirectory.remove_tempdirs)


def tempdir(
    custom_path: str | os.PathLike[str] | None = None, keep_for_debug: bool | None = None
) -> TempDirectory:
    """A new :class:`TempDirectory` (see there for the parameters)."""
    return TempDirectory(custom_path, keep_for_debug)


class FileLock:
    """An exclusive lock on ``path`` (created if missing) held until :meth:`release`.

    Uses ``fcntl.lockf``, so it excludes other processes; on systems without ``fcntl`` it only
    opens the file. Usable as a context manager.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.lock_file: IO[str] | None = open(path, "w")
        if fcntl is not None:
            try:
                fcntl.lockf(self.lock_file, fcntl.LOCK_EX)
            except BaseException:
                self.lock_file.close()
                raise

    def release(self) -> None:
        """Releases the lock; calling it again does nothing."""
        lock_file, self.lock_file = self.lock_file, None
        if lock_file is None:
            return
        try:
            if fcntl is not None:
                fcntl.lockf(lock_file, fcntl.LOCK_UN)
        finally:
            lock_file.close()

    def __enter__(self) -> FileLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def filelock(path: str | os.PathLike[str]) -> FileLock:
    """Takes an exclusive :class:`FileLock` on ``path``."""
    return FileLock(path)


def is_source_path(path: str) -> bool:
    """Whether ``path`` names a file rather than holding source text: it exists, or it is a
    single line ending in a file extension."""
    if os.path.exists(path):
        return True
    if "\n" in path:
        return False
    stem, dot, extension = path.rpartition(".")
    return bool(dot and stem and extension) and not any(ch.isspace() for ch in extension)


def which(exec_name: str) -> str | None:
    """The full path of executable ``exec_name``: as given, in ``/bin``, or on ``PATH``;
    None if it is nowhere."""
    directories = ["", "/bin", *os.environ.get("PATH", "").split(os.pathsep)]
    for directory in directories:
        candidate = os.path.join(directory, exec_name) if directory else exec_name
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    return None
