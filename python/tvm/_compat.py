"""What Python 3.11 gives the package and 3.9 and 3.10 lack, in one place."""

from __future__ import annotations

import types
import typing
from typing import Any

__all__ = ["UNION_ORIGINS", "add_note", "class_annotations"]

#: The origins of a union annotation: ``Union[A, B]``, and ``A | B`` (``types.UnionType``,
#: 3.10 and later).
UNION_ORIGINS: tuple[Any, ...] = (
    typing.Union,
    *((types.UnionType,) if hasattr(types, "UnionType") else ()),
)


def add_note(err: BaseException, note: str) -> None:
    """``err.add_note(note)``; before 3.11, the note goes into ``__notes__`` the same way (where
    3.11's tracebacks print it; earlier ones do not)."""
    if hasattr(err, "add_note"):
        err.add_note(note)
    else:
        notes = getattr(err, "__notes__", None)
        if not isinstance(notes, list):
            notes = []
        notes.append(note)
        err.__notes__ = notes  # type: ignore[attr-defined]


def class_annotations(cls: type) -> dict[str, Any]:
    """The annotations a class body declares itself, not its bases' (``inspect.get_annotations``
    of 3.10 and later)."""
    import inspect  # (imported when a class is declared: it adds milliseconds to `import tvm`)

    if hasattr(inspect, "get_annotations"):
        return dict(inspect.get_annotations(cls))
    annotations = cls.__dict__.get("__annotations__")  # noqa: RUF063 (3.9 has no get_annotations)
    return dict(annotations) if isinstance(annotations, dict) else {}
