"""Backend autoload: out-of-tree packages extend ``tvm`` through the ``tvm.backends`` entry-point
group.

At the end of ``import tvm`` (after the runtime and the ``tvm`` namespace are ready), every entry
point in the group is loaded and its callable invoked exactly once. An extension may register
global functions, object types or devices, or load native libraries with
:func:`tvm.base.load_backend_libs`; it may itself ``import tvm``. A failing extension is reported
with :func:`warnings.warn` naming the entry point and the error, and ``import tvm`` still
succeeds. ``TVM_DEVICE_BACKEND_AUTOLOAD=0`` turns autoload off.

:func:`loaded` tells what happened to each backend.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
import warnings
from typing import NamedTuple

__all__ = ["BackendStatus", "loaded"]

GROUP = "tvm.backends"
_ENV = "TVM_DEVICE_BACKEND_AUTOLOAD"


class BackendStatus(NamedTuple):
    """The outcome of loading one backend entry point."""

    #: The entry point's name.
    name: str
    #: ``"loaded"``, ``"failed"`` or ``"disabled"``.
    status: str
    #: The error as text, for a failed backend.
    error: str | None
    #: Seconds spent loading and running the entry point.
    load_time: float
    #: The entry point's target, such as ``"pkg.module:init"``.
    value: str = ""


class _EntryPoint(NamedTuple):
    name: str
    value: str

    def load(self) -> object:
        """Import the target ``module[:attr.path]`` (extras in brackets are ignored)."""
        spec = self.value.split("[", 1)[0].strip()
        module_name, _, attrs = spec.partition(":")
        module_name = module_name.strip()
        if not module_name or any(not part.isidentifier() for part in module_name.split(".")):
            raise ValueError(f"malformed entry point {self.value!r}")
        target: object = importlib.import_module(module_name)
        for attr in filter(None, attrs.strip().split(".")):
            target = getattr(target, attr)
        return target


def _entry_points_in(text: str) -> list[_EntryPoint]:
    """The ``tvm.backends`` entries of an ``entry_points.txt`` file."""
    found = []
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section == GROUP and "=" in line:
            name, _, value = line.partition("=")
            found.append(_EntryPoint(name.strip(), value.strip()))
    return found


def _discover() -> list[_EntryPoint]:
    """Entry points of the group from every distribution on ``sys.path`` (first one wins).

    Reads the ``entry_points.txt`` files directly: ``importlib.metadata`` would add tens of
    milliseconds to ``import tvm``.
    """
    found: dict[str, _EntryPoint] = {}
    seen: set[str] = set()
    for path in sys.path:
        path = path or "."
        try:
            names = os.listdir(path)
        except OSError:
            continue
        for name in sorted(names):
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            project = name.rsplit("-", 1)[0].lower().replace("_", "-")
            if project in seen:
                continue
            seen.add(project)
            try:
                with open(os.path.join(path, name, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            for entry in _entry_points_in(text):
                found.setdefault(entry.name, entry)
    return list(found.values())


_STATUS: dict[str, BackendStatus] = {}
_DONE = False


def loaded() -> list[BackendStatus]:
    """The status of every backend entry point seen at import, in load order."""
    return list(_STATUS.values())


def _disabled() -> bool:
    return os.environ.get(_ENV, "1").strip().lower() in ("0", "false", "off", "no")


def _load_one(entry: _EntryPoint) -> BackendStatus:
    start = time.perf_counter()
    try:
        target = entry.load()
        if not callable(target):
            raise TypeError(f"entry point target {entry.value!r} is not callable")
        target()
    except Exception as err:  # an extension must never break `import tvm`
        elapsed = time.perf_counter() - start
        message = f"{type(err).__name__}: {err}"
        warnings.warn(
            f"tvm backend {entry.name!r} ({entry.value}) failed to load: {message}",
            RuntimeWarning,
            stacklevel=3,
        )
        return BackendStatus(entry.name, "failed", message, elapsed, entry.value)
    return BackendStatus(entry.name, "loaded", None, time.perf_counter() - start, entry.value)


def _autoload() -> None:
    """Discover and run the backend entry points once (called by ``tvm/__init__.py``)."""
    global _DONE
    if _DONE:
        return
    _DONE = True
    entries = _discover()
    disabled = _disabled()
    for entry in sorted(entries, key=lambda e: e.name):
        if entry.name in _STATUS:
            continue
        if disabled:
            _STATUS[entry.name] = BackendStatus(entry.name, "disabled", None, 0.0, entry.value)
            continue
        _STATUS[entry.name] = _load_one(entry)
