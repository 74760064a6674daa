"""Containers: ``Array`` and ``List`` are sequences, ``Map`` and ``Dict`` mappings that keep
insertion order, ``Shape`` a tuple of ints. ``list``/``tuple`` arguments become arrays and
``dict`` arguments maps automatically."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, MutableSequence, Sequence

from .._native import Array, Dict, List, Map, Shape

__all__ = ["Array", "Dict", "List", "Map", "Shape"]

Sequence.register(Array)
Sequence.register(Shape)
MutableSequence.register(List)
Mapping.register(Map)
MutableMapping.register(Dict)
