"""Structural equality and hashing of values and object graphs (containers compare by content,
maps in any order, reflected objects field by field under their type's rules for variables)."""

from __future__ import annotations

from typing import Any

from .access_path import AccessPath
from .registry import Object, get_global_func, register_object

__all__ = [
    "StructuralKey",
    "get_first_structural_mismatch",
    "structural_equal",
    "structural_hash",
]


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
