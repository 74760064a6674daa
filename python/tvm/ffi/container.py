"""Containers: ``Array`` and ``List`` are sequences, ``Map`` and ``Dict`` mappings that keep
insertion order, ``Shape`` a tuple of ints. ``list``/``tuple`` arguments become arrays and
``dict`` arguments maps automatically."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, MutableSequence, Sequence
from typing import Any

from .._native import Array, Dict, List, Map, Shape
from .registry import get_global_func

__all__ = ["Array", "Dict", "List", "Map", "Shape", "break_cycles"]

Sequence.register(Array)
Sequence.register(Shape)
MutableSequence.register(List)
Mapping.register(Map)
MutableMapping.register(Dict)


def break_cycles(value: Any) -> int:
    """Breaks the reference cycles reachable from ``value`` so that they can be freed.

    Containers and objects are reference counted, with no cycle collector (as in Apache TVM
    FFI): a ``List`` or ``Dict`` that contains itself, directly or through other containers or
    object fields, is never freed, and Python's ``gc`` cannot see into it. This empties every
    ``List`` and ``Dict`` on a cycle reachable from ``value`` (on a cycle of objects alone, it
    sets the fields that close the cycle to ``None``) and leaves everything else as it is.
    Returns how many values it changed: 0 when nothing reachable was on a cycle.
    """
    return int(get_global_func("ffi.BreakCycles")(value))
