"""Bytes per object held from Python, for the memory table of ``bench_ffi.py``: the Python heap
by tracemalloc, the C heap (where both implementations allocate their native objects) by glibc's
``mallinfo2``.
"""

from __future__ import annotations

import ctypes
import gc
import tracemalloc
from collections.abc import Callable
from typing import Any


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2``."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _load_mallinfo2() -> Callable[[], _MallInfo2] | None:
    """glibc's ``mallinfo2`` from the symbols of the process (None without glibc 2.33+)."""
    process = ctypes.CDLL(None)
    function = getattr(process, "mallinfo2", None)
    if function is None:
        return None
    function.restype = _MallInfo2
    function.argtypes = []
    return function


_MALLINFO2 = _load_mallinfo2()


def native_heap_bytes() -> int:
    """Bytes in use in the C heap (arena chunks and mapped blocks), where both implementations
    allocate their native objects; 0 where glibc's ``mallinfo2`` is missing."""
    if _MALLINFO2 is None:
        return 0
    info = _MALLINFO2()
    return int(info.uordblks + info.hblkhd)


def held_bytes(make: Callable[[], Any], count: int) -> tuple[float, float]:
    """Bytes per object of ``count`` objects made by ``make`` and held in a list: (Python heap,
    traced by tracemalloc; C heap, by ``mallinfo2``), measured in two passes because tracemalloc
    keeps its own records in the C heap."""
    make()  # first use: lazy setup and caches, not the objects
    per_object = []
    for traced in (True, False):
        held: list[Any] = [None] * count  # the list's own storage comes before the baseline
        gc.collect()
        if traced:
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
        else:
            before = native_heap_bytes()
        for index in range(count):
            held[index] = make()
        if traced:
            after = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
        else:
            after = native_heap_bytes()
        per_object.append((after - before) / count)
        del held
    return per_object[0], per_object[1]
