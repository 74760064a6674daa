"""``String`` and ``Bytes``: the runtime's text and byte values as ``str``/``bytes`` subclasses.

Both travel through calls like the builtins they extend; values returned by native code come
back as plain ``str``/``bytes``.
"""

from __future__ import annotations

__all__ = ["Bytes", "String"]


class String(str):
    """Text as the runtime stores it (UTF-8)."""

    __slots__ = ()


class Bytes(bytes):
    """Bytes as the runtime stores them."""

    __slots__ = ()
