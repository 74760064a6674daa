"""``dtype``: a data type name (a ``str`` subclass) with its DLPack code, bits and lanes."""

from __future__ import annotations

import sys

from .. import _native

__all__ = ["dtype"]

_CACHE: dict[str, dtype] = {}

# DLPack type codes, by name.
_CODES = {
    0: "int",
    1: "uint",
    2: "float",
    3: "handle",
    4: "bfloat",
    5: "complex",
    6: "bool",
}


class dtype(str):  # noqa: N801 - the name users know
    """A data type such as ``"float32"``, ``"int8x4"`` or ``"bfloat16"``, in canonical spelling.

    Invalid names raise ``ValueError`` naming the text.
    """

    _packed: int

    def __new__(cls, value: str) -> dtype:
        if type(value) is cls:
            return value
        cached = _CACHE.get(value)
        if cached is not None:
            return cached
        if value == "":
            raise ValueError("dtype('') is empty; the opaque void type is dtype('void')")
        text, packed = _native._parse_dtype(str(value))
        obj = cls._from_parsed(text, packed)
        if len(_CACHE) < 4096:
            _CACHE[value] = obj
        return obj

    @classmethod
    def _from_parsed(cls, text: str, packed: int) -> dtype:
        obj = str.__new__(cls, text)
        obj._packed = packed
        return obj

    @property
    def type_code(self) -> int:
        """The DLPack type code."""
        return self._packed & 0xFF

    @property
    def bits(self) -> int:
        """Bits of one lane."""
        return (self._packed >> 8) & 0xFF

    @property
    def lanes(self) -> int:
        """Number of lanes (1 for scalars)."""
        return self._packed >> 16

    @property
    def itemsize(self) -> int:
        """Bytes of one element (all lanes)."""
        return (self.bits * self.lanes + 7) // 8

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return str.__eq__(self, other)
        # numpy's dtypes and scalar types compare equal to their names, as numpy's own do.
        numpy = sys.modules.get("numpy")
        if numpy is not None and (
            isinstance(other, numpy.dtype)
            or (isinstance(other, type) and issubclass(other, numpy.generic))
        ):
            try:
                return str.__eq__(self, numpy.dtype(other).name)
            except TypeError:
                return False
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__

    def __repr__(self) -> str:
        return f"dtype('{self}')"

    def __reduce__(self) -> tuple[type[dtype], tuple[str]]:
        return (dtype, (str(self),))


_native._register_dtype_class(dtype)
