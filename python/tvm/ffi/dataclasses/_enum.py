"""FFI enums defined from Python: each entry is one runtime object (a singleton) with an int
index and a name, found by either; ``IntEnum`` and ``StrEnum`` entries also carry a value."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from ... import _native
from ..._native import Object
from ..registry import register_object

__all__ = ["Enum", "IntEnum", "StrEnum", "auto", "entry"]


class auto:  # noqa: N801 - the name the enum module uses
    """An entry whose value is chosen for it: its index for ``IntEnum``, its lower-cased name
    for ``StrEnum``; the way to declare entries of a plain ``Enum``."""

    __slots__ = ()


class entry:  # noqa: N801 - lower case, as the field specifier `field`
    """An entry with attributes, read back as attributes of the entry and recorded in the
    type's enum state for native code: ``ADD = entry(symbol="+")``. For ``IntEnum`` and
    ``StrEnum`` the optional positional argument is the value (chosen as by :class:`auto`
    when omitted)."""

    __slots__ = ("attrs", "value")

    def __init__(self, value: Any = None, /, **attrs: Any) -> None:
        self.value = auto() if value is None else value
        self.attrs = attrs


class _EnumMeta(type):
    """Class-level access to the entries: iteration in index order, ``len``, ``Cls["NAME"]``
    and membership."""

    _tvm_entries: list[Any]
    _tvm_by_key: dict[Any, Any]

    def __iter__(cls) -> Iterator[Any]:
        return iter(cls._tvm_entries)

    def __len__(cls) -> int:
        return len(cls._tvm_entries)

    def __getitem__(cls, name: str) -> Any:
        if not isinstance(name, str):
            raise KeyError(name)
        return cls.get(name)  # type: ignore[attr-defined]

    def __contains__(cls, entry: object) -> bool:
        return any(
            entry is e or (isinstance(entry, Object) and entry.same_as(e)) for e in cls._tvm_entries
        )


@register_object("ffi.Enum")
class Enum(Object, metaclass=_EnumMeta):
    """Base of FFI enums. Declare a subclass with its type key and entries::

        class Color(Enum, type_key="demo.Color"):
            RED = auto()
            GREEN = auto()

    ``Color.RED`` is the entry (an object of type ``demo.Color``), ``Color.get(0)`` and
    ``Color.get("RED")`` (or ``Color(0)``, ``Color("RED")``, ``Color["RED"]``) find it, and
    ``list(Color)`` lists the entries in index order. Entries print as ``demo.Color.RED``,
    serialize by name and come back as the same entry.
    """

    _tvm_kind: ClassVar[str] = "enum"
    _tvm_entries: ClassVar[list[Any]] = []
    _tvm_by_key: ClassVar[dict[Any, Any]] = {}
    _tvm_names: ClassVar[dict[int, str]] = {}
    _tvm_attrs: ClassVar[dict[str, dict[int, Any]]] = {}

    def __init_subclass__(cls, type_key: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "_tvm_kind" in cls.__dict__:
            return
        key = type_key if type_key is not None else f"{cls.__module__}.{cls.__qualname__}"
        declared = []
        for position, (name, value) in enumerate(
            (name, value) for name, value in cls.__dict__.items() if cls._is_entry(name, value)
        ):
            spec = value if isinstance(value, entry) else entry(value)
            declared.append((name, cls._entry_value(position, name, spec.value), spec.attrs))
        # Names and values are checked before the type key is taken, so a rejected enum
        # leaves it free.
        kind_base = next(b for b in cls.__mro__ if "_tvm_kind" in b.__dict__)
        for name, value, _ in declared:
            if hasattr(kind_base, name):
                raise ValueError(
                    f"{key}: '{name}' cannot be an entry name, it would hide "
                    f"{kind_base.__name__}.{name}"
                )
            cls._check_value(key, name, value)
        index = _native._define_enum_type(key, cls._tvm_kind)
        cls._tvm_type_index = index  # type: ignore[attr-defined]
        cls._tvm_type_key = key  # type: ignore[attr-defined]
        _native._register_object_class(key, cls)
        cls._tvm_entries = []
        cls._tvm_by_key = {}
        cls._tvm_names = {}
        cls._tvm_attrs = {}
        for name, value, entry_attrs in declared:
            attrs = list(entry_attrs.items())
            item = _native._add_enum_entry(index, cls._tvm_kind, name, value, attrs)
            # The runtime's indices: the position (an IntEnum's value) and the name (a
            # StrEnum's value).
            int_index = _native._object_get_field(item, "_int_index")
            str_index = _native._object_get_field(item, "_str_index")
            for attr, attr_value in attrs:
                cls._tvm_attrs.setdefault(attr, {})[int_index] = attr_value
            cls._tvm_entries.append(item)
            cls._tvm_names[int_index] = name
            cls._tvm_by_key[int_index] = item
            cls._tvm_by_key.setdefault(str_index, item)
            cls._tvm_by_key[name] = item
            setattr(cls, name, item)

    @classmethod
    def _is_entry(cls, name: str, value: Any) -> bool:
        return not name.startswith("_") and isinstance(value, (auto, entry))

    @classmethod
    def _entry_value(cls, position: int, name: str, value: Any) -> Any:
        return None

    @classmethod
    def _check_value(cls, type_key: str, name: str, value: Any) -> None:
        """A ``TypeError`` (or ``OverflowError``) naming the entry if ``value`` is not one this
        kind of enum stores."""

    def __new__(cls, *args: Any) -> Any:
        if not args:
            # The runtime wraps entries it returns through `__new__` with no arguments.
            return super().__new__(cls)
        if len(args) != 1:
            raise TypeError(f"{cls.__name__}() takes one index or name, got {len(args)} arguments")
        return cls.get(args[0])

    def __init__(self, *args: Any) -> None:
        """Entries exist already; ``Cls(key)`` looks one up."""

    @classmethod
    def get(cls, key: int | str) -> Any:
        """The entry with int index or name ``key``; a ``KeyError`` if there is none."""
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise TypeError(
                f"{cls.__name__}.get() takes an int index or a str name, got {type(key).__name__}"
            )
        try:
            return cls._tvm_by_key[key]
        except KeyError:
            raise KeyError(
                f"{cls.__name__} has no entry {key!r} (it has {len(cls._tvm_entries)} entries)"
            ) from None

    def __getattr__(self, name: str) -> Any:
        values = type(self)._tvm_attrs.get(name)
        if values is None or name.startswith("__"):
            raise AttributeError(f"{type(self).__name__} entries have no attribute '{name}'")
        try:
            return values[self.index]
        except KeyError:
            raise AttributeError(f"{self.name} has no attribute '{name}'") from None

    @property
    def name(self) -> str:
        """The entry's name."""
        return type(self)._tvm_names[self.index]

    @property
    def index(self) -> int:
        """The entry's int index: its position among the entries of its type (an
        ``IntEnum`` entry's value)."""
        return _native._object_get_field(self, "_int_index")


@register_object("ffi.IntEnum")
class IntEnum(Enum):
    """An enum whose entries carry an int ``value`` (``RED = 1``, or ``auto()`` for the index)."""

    _tvm_kind: ClassVar[str] = "int"

    @classmethod
    def _is_entry(cls, name: str, value: Any) -> bool:
        return not name.startswith("_") and (
            isinstance(value, (auto, entry))
            or (isinstance(value, int) and not isinstance(value, bool))
        )

    @classmethod
    def _entry_value(cls, position: int, name: str, value: Any) -> Any:
        return position if isinstance(value, auto) else value

    @classmethod
    def _check_value(cls, type_key: str, name: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{type_key}.{name}: the value must be an int, got {value!r}")
        if not -(2**63) <= value < 2**63:
            raise OverflowError(f"{type_key}.{name}: the value {value} does not fit in 64 bits")

    @property
    def value(self) -> int:
        """The entry's value."""
        return _native._object_get_field(self, "value")

    def __int__(self) -> int:
        return self.value


@register_object("ffi.StrEnum")
class StrEnum(Enum):
    """An enum whose entries carry a str ``value`` (``RED = "red"``, or ``auto()`` for the
    lower-cased name)."""

    _tvm_kind: ClassVar[str] = "str"

    @classmethod
    def _is_entry(cls, name: str, value: Any) -> bool:
        return not name.startswith("_") and isinstance(value, (auto, entry, str))

    @classmethod
    def _entry_value(cls, position: int, name: str, value: Any) -> Any:
        return name.lower() if isinstance(value, auto) else value

    @classmethod
    def _check_value(cls, type_key: str, name: str, value: Any) -> None:
        if not isinstance(value, str):
            raise TypeError(f"{type_key}.{name}: the value must be a str, got {value!r}")

    @property
    def value(self) -> str:
        """The entry's value."""
        return _native._object_get_field(self, "value")

    def __str__(self) -> str:
        return self.value
