"""``tvm.ffi.dataclasses``: object types and enums defined in Python.

:func:`py_class` turns an annotated class into a new runtime object type whose fields live in
the runtime's type table, so instances are real objects that native code can take, return,
compare structurally, serialize and copy. :func:`field` gives a field options; :func:`fields`,
:func:`replace`, :func:`asdict`, :func:`astuple` and :func:`is_dataclass` work as their
:mod:`dataclasses` namesakes. :class:`Enum`, :class:`IntEnum` and :class:`StrEnum` define enums
whose entries are runtime singletons.
"""

from ..._native import Object
from ._enum import Enum, IntEnum, StrEnum, auto, entry
from ._field import MISSING, Field, field
from ._py_class import asdict, astuple, fields, is_dataclass, py_class, replace

__all__ = [
    "MISSING",
    "Enum",
    "Field",
    "IntEnum",
    "Object",
    "StrEnum",
    "asdict",
    "astuple",
    "auto",
    "entry",
    "field",
    "fields",
    "is_dataclass",
    "py_class",
    "replace",
]
