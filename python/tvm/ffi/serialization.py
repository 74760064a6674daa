"""JSON-graph serialization of values and object graphs, in the format of Apache TVM FFI (graphs
written by either runtime load in the other). Pickling of ``tvm.ffi`` objects uses it."""

from __future__ import annotations

from typing import Any

from .registry import get_global_func

__all__ = ["from_json_graph_str", "to_json_graph_str"]


def to_json_graph_str(obj: Any, metadata: Any = None) -> str:
    """The JSON-graph text of ``obj`` (with ``metadata``, a dict, if given). A cyclic graph or a
    type that cannot be rebuilt (functions, tensors) raises an error naming it."""
    return get_global_func("ffi.ToJSONGraphString")(obj, metadata)


def from_json_graph_str(text: str) -> Any:
    """The value of JSON-graph text; malformed text, an unknown node type or a type key that is
    not registered raises an error naming it."""
    return get_global_func("ffi.FromJSONGraphString")(text)
