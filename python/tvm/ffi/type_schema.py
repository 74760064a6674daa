"""Type schemas: the JSON a typed function or reflected field records about its types, as typed
C++ and Rust functions record it (``{"type": "int"}``; a function is
``{"type": "ffi.Function", "args": [<return>, <param 0>, ...]}``; containers and ``Optional`` put
their element types in ``args``). Made here from a Python function's annotations, so Python
registrations record them too, and read back as annotations for stubs."""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

#: Schema type names of the Python types that convert to them.
_SCALARS: dict[Any, str] = {
    int: "int",
    float: "float",
    bool: "bool",
    str: "ffi.String",
    bytes: "ffi.Bytes",
    type(None): "None",
}
#: The annotation a stub writes for each plain schema type name.
_ANNOTATIONS = {
    "int": "int",
    "float": "float",
    "bool": "bool",
    "ffi.String": "str",
    "ffi.SmallStr": "str",
    "ffi.Bytes": "bytes",
    "ffi.SmallBytes": "bytes",
    "None": "None",
    "Any": "Any",
    "ffi.Object": "Object",
    "ffi.Tensor": "Tensor",
    "DLTensor*": "Tensor",
    "Device": "Device",
    "DataType": "dtype",
    "ffi.Shape": "Shape",
    "ffi.Module": "Module",
    "ffi.Array": "Array",
    "ffi.List": "List",
    "ffi.Map": "Map",
    "ffi.Dict": "Dict",
}


class DLPackProducer(Protocol):
    """What a tensor parameter accepts besides ``Tensor``: any DLPack producer (a numpy array,
    a torch tensor, ...)."""

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...


def _class_schema(cls: type) -> str:
    from .. import _native

    key = getattr(cls, "_tvm_type_key", None)
    if isinstance(key, str):
        return key
    named = {
        _native.Tensor: "ffi.Tensor",
        _native.Device: "Device",
        _native.Function: "ffi.Function",
    }
    return named.get(cls, "Any")


def schema_of_annotation(annotation: Any) -> dict[str, Any]:
    """The schema of a Python annotation (``Any`` for what has no schema type)."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {"type": "Any"}
    if annotation is None:
        return {"type": "None"}
    try:
        scalar = _SCALARS.get(annotation)
    except TypeError:  # an unhashable annotation (`x: [int]`) names no type
        return {"type": "Any"}
    if scalar is not None:
        return {"type": scalar}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Union or type(annotation).__name__ == "UnionType":
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1 and len(args) == 2:
            return {"type": "Optional", "args": [schema_of_annotation(rest[0])]}
        return {"type": "Any"}
    if origin in (list, tuple, Sequence, typing.Sequence):
        element = args[0] if len(args) >= 1 and (origin is not tuple or args[-1] is ...) else Any
        return {"type": "ffi.Array", "args": [schema_of_annotation(element)]}
    if origin in (dict, Mapping, typing.Mapping):
        key, value = args if len(args) == 2 else (Any, Any)
        return {"type": "ffi.Map", "args": [schema_of_annotation(key), schema_of_annotation(value)]}
    if origin is Callable or annotation is Callable:
        if len(args) == 2 and isinstance(args[0], list):
            params = [schema_of_annotation(a) for a in args[0]]
            return {"type": "ffi.Function", "args": [schema_of_annotation(args[1]), *params]}
        return {"type": "ffi.Function"}
    if isinstance(annotation, type):
        return {"type": _class_schema(annotation)}
    return {"type": "Any"}


def function_schema(func: Callable[..., Any]) -> str | None:
    """The schema JSON of ``func`` from its annotations; None when it has none, or when its
    parameters are not a fixed positional list (``*args``, keyword-only ones) or its
    annotations do not resolve."""
    try:
        signature = inspect.signature(func)
        hints = typing.get_type_hints(func)
    except Exception:  # annotations are user code: any failure means no schema
        return None
    if not hints:
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = list(signature.parameters.values())
    if any(p.kind not in positional for p in params):
        return None
    empty = inspect.Parameter.empty
    ret = hints.get("return", empty)
    types = [
        schema_of_annotation(ret),
        *(schema_of_annotation(hints.get(p.name, empty)) for p in params),
    ]
    return json.dumps({"type": "ffi.Function", "args": types}, separators=(",", ":"))


def metadata_of(func: Callable[..., Any]) -> str:
    """The metadata JSON a Python registration records for ``func``: its schema, or empty."""
    schema = function_schema(func)
    return "" if schema is None else json.dumps({"type_schema": schema}, separators=(",", ":"))


def annotation_of(
    schema: Mapping[str, Any], classes: Mapping[str, str], param: bool = False
) -> str:
    """The annotation a stub writes for ``schema``; ``classes`` names the Python classes bound to
    object type keys (``Object`` stands for one without a class). A parameter (``param``)
    accepts what converts to the type: any sequence for an array, any mapping for a map, any
    DLPack producer for a tensor."""
    name = schema.get("type", "Any")
    args = schema.get("args") or []

    def inner(index: int) -> str:
        return annotation_of(args[index], classes, param) if len(args) > index else "Any"

    if name == "Optional" and len(args) == 1:
        return f"{inner(0)} | None"
    if name == "ffi.Function":
        if not args:
            return "Callable[..., Any]"
        params = ", ".join(annotation_of(a, classes, True) for a in args[1:])
        return f"Callable[[{params}], {annotation_of(args[0], classes)}]"
    if param and name in ("ffi.Array", "ffi.List"):
        return f"Sequence[{inner(0)}] | {_ANNOTATIONS[name]}"
    if param and name in ("ffi.Map", "ffi.Dict"):
        return f"Mapping[{inner(0)}, {inner(1)}] | {_ANNOTATIONS[name]}"
    if param and name in ("ffi.Tensor", "DLTensor*"):
        return "Tensor | DLPackProducer"
    if name in _ANNOTATIONS:
        return _ANNOTATIONS[name]
    return classes.get(name, "Object")
