"""Access paths: where a value sits inside a structure (``<root>.f[2]["k"]``), as reported by
:func:`tvm.ffi.get_first_structural_mismatch`."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from .registry import Object, get_global_func, register_object

__all__ = ["AccessKind", "AccessPath", "AccessStep"]


class AccessKind(IntEnum):
    """What a step selects."""

    ATTR = 0
    ARRAY_ITEM = 1
    MAP_ITEM = 2
    ATTR_MISSING = 3
    ARRAY_ITEM_MISSING = 4
    MAP_ITEM_MISSING = 5


@register_object("ffi.reflection.AccessStep")
class AccessStep(Object):
    """One step of a path: ``kind`` (an :class:`AccessKind`) and ``key``."""

    kind: int
    key: Any


@register_object("ffi.reflection.AccessPath")
class AccessPath(Object):
    """A path from the root: ``parent`` (``None`` at the root), ``step`` and ``depth``."""

    parent: AccessPath | None
    step: AccessStep | None
    depth: int

    def to_steps(self) -> list[AccessStep]:
        """The steps from the root."""
        steps: list[AccessStep] = []
        node: AccessPath | None = self
        while node is not None and node.step is not None:
            steps.append(node.step)
            node = node.parent
        return steps[::-1]

    def _key(self) -> list[tuple[int, Any]]:
        return [(int(s.kind), s.key) for s in self.to_steps()]

    def is_prefix_of(self, other: AccessPath) -> bool:
        """Whether this path's steps begin ``other``'s."""
        mine, theirs = self._key(), other._key()
        return mine == theirs[: len(mine)]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AccessPath) and self._key() == other._key()

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        return get_global_func("ffi.ReprPrint")(self)
