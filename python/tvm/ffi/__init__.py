"""``tvm.ffi``: values, objects, functions and tensors shared with native code.

Python values convert automatically when they cross into native code: ``bool``, ``int``
(64-bit), ``float``, ``None``, ``str``, ``bytes``/``bytearray``, ``list``/``tuple`` (to
``Array``), ``dict`` (to ``Map``), callables (to ``Function``), DLPack producers (to ``Tensor``,
without a copy), ``Device`` and ``dtype``; any other object travels opaquely and comes back as
itself.
"""

from __future__ import annotations

from .. import _native
from .._native import Device, Function, Object, Tensor, from_dlpack
from . import dataclasses
from .access_path import AccessKind, AccessPath, AccessStep
from .container import Array, Dict, List, Map, Shape, break_cycles
from .dtype import dtype
from .module import Module, load_module, system_lib
from .registry import (
    get_global_func,
    get_global_func_doc,
    get_global_func_metadata,
    list_global_func_names,
    register_func,
    register_object,
    remove_global_func,
)
from .serialization import from_json_graph_str, to_json_graph_str
from .stream import StreamContext, get_raw_stream, use_raw_stream, use_torch_stream
from .string import Bytes, String
from .structural import (
    DefRegionKind,
    InplaceMode,
    StructuralKey,
    StructuralMutator,
    StructuralVisitor,
    VisitInterrupt,
    WalkOrder,
    WalkResult,
    get_first_structural_mismatch,
    structural_equal,
    structural_hash,
    structural_map,
    structural_mutate,
    structural_visit,
    structural_walk,
)

__all__ = [
    "AccessKind",
    "AccessPath",
    "AccessStep",
    "Array",
    "Bytes",
    "DefRegionKind",
    "Device",
    "Dict",
    "Function",
    "InplaceMode",
    "List",
    "Map",
    "Module",
    "Object",
    "Shape",
    "StreamContext",
    "String",
    "StructuralKey",
    "StructuralMutator",
    "StructuralVisitor",
    "Tensor",
    "VisitInterrupt",
    "WalkOrder",
    "WalkResult",
    "break_cycles",
    "convert",
    "dataclasses",
    "device",
    "dtype",
    "from_dlpack",
    "from_json_graph_str",
    "get_first_structural_mismatch",
    "get_global_func",
    "get_global_func_doc",
    "get_global_func_metadata",
    "get_raw_stream",
    "list_global_func_names",
    "load_module",
    "register_func",
    "register_object",
    "remove_global_func",
    "structural_equal",
    "structural_hash",
    "structural_map",
    "structural_mutate",
    "structural_visit",
    "structural_walk",
    "system_lib",
    "to_json_graph_str",
    "use_raw_stream",
    "use_torch_stream",
]


def convert(value: object) -> object:
    """The runtime form of a Python value: ``list`` becomes ``Array``, ``dict`` becomes ``Map``,
    a callable becomes ``Function``; scalars and strings come back unchanged."""
    return _native.convert(value)


def device(device_type: str | int, index: int | None = None) -> Device:
    """A device from a name (``"cuda"``, ``"cuda:1"``) or DLPack code, and an optional index."""
    return Device(device_type, index)
