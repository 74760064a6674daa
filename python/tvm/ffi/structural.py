"""Structural equality and hashing of values and object graphs (containers compare by content,
maps in any order, reflected objects field by field under their type's rules for variables),
and structural traversal (walk, visit) and rewriting (map, mutate) of them."""

from __future__ import annotations

import typing
from collections.abc import Callable, Sequence
from enum import IntEnum
from typing import Any, Union

from .. import _native
from .access_path import AccessPath
from .registry import Object, get_global_func, register_object

__all__ = [
    "DefRegionKind",
    "InplaceMode",
    "StructuralKey",
    "StructuralMutator",
    "StructuralVisitor",
    "VisitInterrupt",
    "WalkOrder",
    "WalkResult",
    "get_first_structural_mismatch",
    "structural_equal",
    "structural_hash",
    "structural_map",
    "structural_mutate",
    "structural_visit",
    "structural_walk",
]


class WalkOrder(IntEnum):
    """Whether walk and map callbacks run before or after the value's children."""

    PREORDER = 0
    POSTORDER = 1


class WalkResult(IntEnum):
    """What a pre-order walk callback asks for: visit the value's children or skip them."""

    ADVANCE = 0
    SKIP = 1


class InplaceMode(IntEnum):
    """Whether a rewrite may change a uniquely owned value in place (``ALLOW``) or must copy
    the changed paths (``DISALLOW``)."""

    DISALLOW = 0
    ALLOW = 1


class DefRegionKind(IntEnum):
    """The definition region a traversal is in: variables reached are uses (``NONE``), bind
    as a pattern (``DEF_PATTERN``) or are defined alone (``DEF_SIMPLE``)."""

    NONE = 0
    DEF_PATTERN = 1
    DEF_SIMPLE = 2


def structural_equal(
    lhs: Any, rhs: Any, map_free_vars: bool = False, skip_tensor_content: bool = False
) -> bool:
    """Whether ``lhs`` and ``rhs`` are structurally equal (``list``/``dict`` convert first).
    ``map_free_vars`` pairs unbound variables; ``skip_tensor_content`` compares tensors by
    dtype, shape and device only."""
    return get_global_func("ffi.StructuralEqual")(lhs, rhs, map_free_vars, skip_tensor_content)


def structural_hash(
    value: Any, map_free_vars: bool = False, skip_tensor_content: bool = False
) -> int:
    """The structural hash of ``value`` (an unsigned 64-bit int), consistent with
    :func:`structural_equal` and stable across processes for values without free variables."""
    h = get_global_func("ffi.StructuralHash")(value, map_free_vars, skip_tensor_content)
    return h & 0xFFFFFFFFFFFFFFFF


def get_first_structural_mismatch(
    lhs: Any, rhs: Any, map_free_vars: bool = False, skip_tensor_content: bool = False
) -> tuple[AccessPath, AccessPath] | None:
    """``None`` if equal, else the paths to the first difference on each side."""
    found = get_global_func("ffi.GetFirstStructuralMismatch")(
        lhs, rhs, map_free_vars, skip_tensor_content
    )
    return None if found is None else (found[0], found[1])


@register_object("ffi.StructuralKey")
class StructuralKey(Object):
    """A value keyed by structure: usable as a ``dict`` or ``Map`` key, equal to another key
    whose value is structurally equal."""

    key: Any
    hash_i64: int

    def __init__(self, value: Any) -> None:
        self.__init_handle_by_constructor__(get_global_func("ffi.StructuralKey"), value)

    def __hash__(self) -> int:
        return self.hash_i64

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StructuralKey) and get_global_func("ffi.StructuralKeyEqual")(
            self, other
        )

    def __ne__(self, other: object) -> bool:
        return not self == other


@register_object("ffi.VisitInterrupt")
class VisitInterrupt(Object):
    """Returned by a traversal callback to stop the traversal; its ``value`` goes back to the
    caller of :func:`structural_walk` or :func:`structural_visit`."""

    value: Any

    def __init__(self, value: Any = None) -> None:
        self.__init_handle_by_constructor__(get_global_func("ffi.VisitInterrupt"), value)


@register_object("ffi.StructuralVisitor")
class StructuralVisitor(Object):
    """The active context of a :func:`structural_visit`, handed to its callbacks."""

    def visit(self, value: Any) -> VisitInterrupt | None:
        """Visit ``value`` through the traversal's callbacks."""
        return get_global_func("ffi.StructuralVisitorVisit")(self, value)

    def default_visit(self, value: Any) -> VisitInterrupt | None:
        """Visit the children of ``value`` by its type's default descent (its callback, if
        any, is bypassed for ``value`` itself; never call it on the value whose own
        ``__s_visit__`` hook is running)."""
        return get_global_func("ffi.StructuralVisitorDefaultVisit")(self, value)

    def def_region_kind(self) -> DefRegionKind:
        """The definition region the traversal is in."""
        return DefRegionKind(get_global_func("ffi.StructuralVisitorDefRegionKind")(self))

    def with_def_region_kind(self, kind: int, callback: Callable[[], Any]) -> Any:
        """Run ``callback()`` with the definition region ``kind`` (inside a pattern region
        the pattern stays)."""
        return get_global_func("ffi.StructuralVisitorWithDefRegionKind")(self, kind, callback)


@register_object("ffi.StructuralMutator")
class StructuralMutator(Object):
    """The active context of a :func:`structural_mutate` or :func:`structural_map`."""

    def mutate(self, value: Any) -> Any:
        """``value`` rewritten through the callbacks (itself if nothing changed; never
        modified in place)."""
        return get_global_func("ffi.StructuralMutatorMutate")(self, value)

    def default_mutate(self, value: Any) -> Any:
        """``value`` rewritten by its type's default (its children through the callbacks),
        bypassing the callback for ``value`` itself."""
        return get_global_func("ffi.StructuralMutatorDefaultMutate")(self, value)

    def var_remap_get(self, var: Object) -> Any | None:
        """The replacement recorded for the variable ``var``, or ``None``."""
        return get_global_func("ffi.StructuralMutatorVarRemapGet")(self, var)

    def var_remap_set(self, var: Object, mapped_value: Any) -> None:
        """Record ``mapped_value`` as the replacement of the variable ``var``."""
        get_global_func("ffi.StructuralMutatorVarRemapSet")(self, var, mapped_value)

    def def_region_kind(self) -> DefRegionKind:
        """The definition region the rewrite is in."""
        return DefRegionKind(get_global_func("ffi.StructuralMutatorDefRegionKind")(self))

    def with_def_region_kind(self, kind: int, callback: Callable[[], Any]) -> Any:
        """Run ``callback()`` with the definition region ``kind``."""
        return get_global_func("ffi.StructuralMutatorWithDefRegionKind")(self, kind, callback)


# (typing.Union: a module-level alias is evaluated at import, and `|` of generic aliases needs 3.10)
Callbacks = Union[Callable[..., Any], tuple[Any, Callable[..., Any]], Sequence[Any]]

_BUILTIN_TYPE_KEYS: dict[object, str] = {
    type(None): "None",
    int: "int",
    bool: "bool",
    float: "float",
    str: "ffi.String",
    bytes: "ffi.Bytes",
}


def _type_index(callback_type: Any, api: str) -> int:
    """The type index a callback entry matches (``-1``: any value)."""
    if callback_type is typing.Any or callback_type is object:
        return -1
    key = _BUILTIN_TYPE_KEYS.get(callback_type)
    if key is None and isinstance(callback_type, type) and issubclass(callback_type, Object):
        key = getattr(callback_type, "_tvm_type_key", None)
        if key is None:
            key = _native_type_keys().get(callback_type)
    if key is None:
        raise TypeError(
            f"{api} callback type must be int, float, bool, str, bytes, None, typing.Any/object "
            f"or a registered object class, got {callback_type!r}"
        )
    return _native.type_key_to_index(key)


def _native_type_keys() -> dict[object, str]:
    from .container import Array, Dict, List, Map, Shape

    return {
        Object: "ffi.Object",
        _native.Function: "ffi.Function",
        _native.Tensor: "ffi.Tensor",
        Array: "ffi.Array",
        List: "ffi.List",
        Map: "ffi.Map",
        Dict: "ffi.Dict",
        Shape: "ffi.Shape",
    }


def _entries(callbacks: Callbacks, api: str) -> list[tuple[Any, Callable[..., Any]]]:
    """``(type, callback)`` pairs from a bare callback, a ``(type, fn)`` or ``((t1, t2), fn)``
    entry, or a sequence of entries."""

    def expand(entry: tuple[Any, Callable[..., Any]]) -> list[tuple[Any, Callable[..., Any]]]:
        types, fn = entry
        return [(t, fn) for t in (types if isinstance(types, tuple) else (types,))]

    if callable(callbacks):
        return [(typing.Any, callbacks)]
    if isinstance(callbacks, tuple) and len(callbacks) == 2 and callable(callbacks[1]):
        return expand(callbacks)
    if isinstance(callbacks, Sequence) and not isinstance(callbacks, (str, bytes)):
        out = []
        for entry in callbacks:
            if not (isinstance(entry, tuple) and len(entry) == 2 and callable(entry[1])):
                raise TypeError(
                    f"{api} callbacks within a sequence must be (type, callback) tuples, "
                    f"got {entry!r}"
                )
            out.extend(expand(entry))
        return out
    raise TypeError(
        f"{api} callbacks must be a callback, a (type, callback) entry, a "
        f"((type1, type2, ...), callback) entry or a sequence of entries, got {callbacks!r}"
    )


def _table(callbacks: Callbacks, api: str) -> list[tuple[int, Callable[..., Any]]]:
    return [(_type_index(t, api), fn) for t, fn in _entries(callbacks, api)]


def _region_table(callbacks: Callbacks, api: str) -> list[tuple[int, Callable[..., Any]]]:
    def with_kind(fn: Callable[..., Any]) -> Callable[[Any, int], Any]:
        return lambda value, kind: fn(value, DefRegionKind(kind))

    return [(index, with_kind(fn)) for index, fn in _table(callbacks, api)]


def _order(order: str | WalkOrder, api: str) -> int:
    if isinstance(order, WalkOrder):
        return int(order)
    if order in ("pre", "post"):
        return int(WalkOrder.PREORDER if order == "pre" else WalkOrder.POSTORDER)
    raise ValueError(f"{api} order must be 'pre', 'post' or a WalkOrder, got {order!r}")


def structural_walk(
    root: Any,
    callbacks: Callbacks = (),
    with_def_region_kind: Callbacks = (),
    order: str | WalkOrder = "post",
) -> VisitInterrupt | None:
    """Walk ``root`` (containers' items, maps' values, objects' structural fields) and call the
    first matching callback at every occurrence of a value: ``callbacks`` get ``(value)``,
    ``with_def_region_kind`` entries get ``(value, DefRegionKind)``. Entries are a bare
    callable (any value), ``(type, fn)``, ``((type1, type2), fn)`` or a sequence of those.
    In pre-order a callback may return ``WalkResult.SKIP`` to skip the value's children; any
    callback may return a :class:`VisitInterrupt` to stop, which is returned."""
    return get_global_func("ffi.StructuralWalk")(
        root,
        _table(callbacks, "structural_walk"),
        _region_table(with_def_region_kind, "structural_walk"),
        _order(order, "structural_walk"),
    )


def structural_visit(root: Any, callbacks: Callbacks = ()) -> VisitInterrupt | None:
    """Visit ``root`` with callbacks ``(value, visitor)`` that own the descent into the values
    they match (``visitor.visit(child)``, ``visitor.default_visit(value)``, or nothing to
    prune); unmatched values take their default descent. Returns the interrupt that stopped
    the visit, if any."""
    return get_global_func("ffi.StructuralVisit")(root, _table(callbacks, "structural_visit"))


def _takes_inplace_mode(fn: Callable[..., Any]) -> bool:
    import inspect  # on first use: importing it costs a few ms

    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    try:
        signature.bind(None, None, InplaceMode.DISALLOW)
        return True
    except TypeError:
        pass
    try:
        signature.bind(None, None)
    except TypeError as err:
        raise TypeError(
            "structural_mutate callback must accept (value, mutator) or "
            f"(value, mutator, inplace_mode), got {fn!r}"
        ) from err
    return False


def structural_mutate(root: Any, callbacks: Callbacks = ()) -> Any:
    """``root`` rewritten by callbacks ``(value, mutator[, inplace_mode])`` that own the
    rewrite of the values they match (``mutator.mutate(child)``,
    ``mutator.default_mutate(value)``); unmatched values take their default rewrite. Changed
    paths are copied; ``root`` itself is unchanged."""
    entries = [
        (index, fn, _takes_inplace_mode(fn)) for index, fn in _table(callbacks, "structural_mutate")
    ]
    return get_global_func("ffi.StructuralMutate")(root, entries)


def structural_map(
    root: Any,
    callbacks: Callbacks = (),
    with_def_region_kind: Callbacks = (),
    order: str | WalkOrder = "post",
) -> Any:
    """``root`` with every value replaced by what the first matching callback returns for it
    (``callbacks``: ``(value)``; ``with_def_region_kind``: ``(value, DefRegionKind)``), after
    its children are mapped (``order="post"``) or before (``"pre"``, the replacement's
    children are then mapped). Map keys stay; where the definition of a variable is rewritten,
    its later uses start from that same replacement. Changed paths are copied; ``root``
    itself is unchanged."""
    return get_global_func("ffi.StructuralMap")(
        root,
        _table(callbacks, "structural_map"),
        _region_table(with_def_region_kind, "structural_map"),
        _order(order, "structural_map"),
    )
