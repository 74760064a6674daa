"""Field specifiers of ``py_class`` types and the checks that turn a Python value into the value
a field stores (``int`` fields take integers, ``list[int]`` fields build an ``Array``, ...)."""

from __future__ import annotations

import operator
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ... import _native
from ..._compat import UNION_ORIGINS
from ..._native import Device, Function, Object
from ..container import Array, Dict, List, Map
from ..dtype import dtype

__all__ = ["MISSING", "Field", "field"]

# Type indices of the values fields store natively (tvm/ffi/c_api.h).
_ANY, _INT, _BOOL, _FLOAT, _DTYPE, _DEVICE, _OBJECT = -1, 1, 2, 3, 5, 6, 64

# Field flags of the type table (kTVMFFIFieldFlagBitMask*).
FLAG_WRITABLE = 1 << 0
FLAG_SEQ_HASH_IGNORE = 1 << 3
FLAG_SEQ_HASH_DEF = 1 << 4
FLAG_REPR_OFF = 1 << 6
FLAG_COMPARE_OFF = 1 << 7
FLAG_HASH_OFF = 1 << 8
FLAG_INIT_OFF = 1 << 9
FLAG_KW_ONLY = 1 << 10


class _MissingType:
    """The type of :data:`MISSING`."""

    _instance: _MissingType | None = None

    def __new__(cls) -> _MissingType:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __reduce__(self) -> str:
        return "MISSING"


#: Marks a field option that was not given (no default, no factory).
MISSING: Any = _MissingType()


class Mismatch(TypeError):
    """A value that a field's type does not accept: what was expected and what came."""

    def __init__(self, expected: str, value: object, show: bool = False) -> None:
        shown = f" {_short(value)}" if show else ""
        super().__init__(f"expected {expected}, got {type(value).__name__}{shown}")


class FieldType:
    """How a field of a given annotation is stored and checked: the type index the type table
    records, whether the value is kept boxed (16-byte ``Any``), and ``convert``, which returns
    the value to store or raises :class:`Mismatch`."""

    __slots__ = ("boxed", "convert", "describe", "static_index")

    def __init__(
        self,
        describe: str,
        static_index: int,
        boxed: bool,
        convert: Callable[[Any], Any],
    ) -> None:
        self.describe = describe
        self.static_index = static_index
        self.boxed = boxed
        self.convert = convert


def _short(value: Any) -> str:
    """``value`` as text for an error message, cut to 40 characters."""
    text = str(value)
    return text if len(text) <= 40 else f"{text[:18]}...{text[-18:]}"


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (str, bytes, float)) or not hasattr(value, "__index__"):
        raise Mismatch("int", value)
    number = operator.index(value)
    if not -(2**63) <= number < 2**63:
        raise Mismatch("int (64-bit)", value, show=True)
    return number


def _to_float(value: Any) -> float:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
        raise Mismatch("float", value)
    try:
        return float(value)
    except OverflowError:
        raise Mismatch("float (64-bit)", value, show=True) from None


def _exact(kind: type, describe: str) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        if not isinstance(value, kind):
            raise Mismatch(describe, value)
        return value

    return convert


def _to_bytes(value: Any) -> bytes:
    if not isinstance(value, (bytes, bytearray)):
        raise Mismatch("bytes", value)
    return bytes(value)


def _to_dtype(value: Any) -> dtype:
    if not isinstance(value, str):
        raise Mismatch("dtype", value)
    return value if isinstance(value, dtype) else dtype(value)


def _sequence_type(annotation: Any, container: type, element: FieldType | None) -> FieldType:
    name = "List" if container is List else "Array"

    def convert(value: Any) -> Any:
        if not isinstance(value, (list, tuple, Array, List)):
            raise Mismatch(describe, value)
        if element is None and isinstance(value, container):
            return value
        items = list(value) if element is None else [element.convert(v) for v in value]
        return container(items)

    describe = _describe(annotation)
    return FieldType(describe, _native.type_key_to_index(f"ffi.{name}"), False, convert)


def _mapping_type(
    annotation: Any, container: type, key: FieldType | None, item: FieldType | None
) -> FieldType:
    name = "Dict" if container is Dict else "Map"

    def convert(value: Any) -> Any:
        if not isinstance(value, (dict, Map, Dict)):
            raise Mismatch(describe, value)
        if key is None and item is None and isinstance(value, container):
            return value
        pairs = [
            (
                k if key is None else key.convert(k),
                v if item is None else item.convert(v),
            )
            for k, v in value.items()
        ]
        return container(pairs)

    describe = _describe(annotation)
    return FieldType(describe, _native.type_key_to_index(f"ffi.{name}"), False, convert)


def _describe(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    if isinstance(annotation, typing.ForwardRef):
        return annotation.__forward_arg__
    return re.sub(r"ForwardRef\('([^']*)'\)", r"\1", str(annotation).replace("typing.", ""))


def _object_type(cls: type) -> FieldType:
    index = getattr(cls, "_tvm_type_index", None)
    if index is None:
        raise TypeError(f"{cls.__name__} is not bound to an object type")
    return FieldType(cls.__name__, index, False, _exact(cls, cls.__name__))


def _union_type(
    annotation: Any, options: list[Any], self_cls: type, resolve: Callable[[str], Any]
) -> FieldType:
    optional = type(None) in options
    inner = [field_type(o, self_cls, resolve) for o in options if o is not type(None)]
    describe = _describe(annotation)
    if len(inner) == 1 and not inner[0].boxed and inner[0].static_index >= _OBJECT:
        # An object slot holds None as NULL.
        static_index, boxed = inner[0].static_index, False
    else:
        static_index, boxed = _ANY, True

    def convert(value: Any) -> Any:
        if value is None and optional:
            return None
        for option in inner:
            try:
                return option.convert(value)
            except Mismatch:
                continue
        raise Mismatch(describe, value)

    return FieldType(describe, static_index, boxed, convert)


_SCALARS: dict[Any, FieldType] = {
    int: FieldType("int", _INT, False, _to_int),
    float: FieldType("float", _FLOAT, False, _to_float),
    bool: FieldType("bool", _BOOL, False, _exact(bool, "bool")),
    Device: FieldType("Device", _DEVICE, False, _exact(Device, "Device")),
    dtype: FieldType("dtype", _DTYPE, False, _to_dtype),
}


def field_type(annotation: Any, self_cls: type, resolve: Callable[[str], Any]) -> FieldType:
    """The storage and check of a field annotated ``annotation`` in class ``self_cls`` (which a
    field may name to refer to its own class), with ``resolve`` evaluating forward references;
    a ``TypeError`` for annotations with no FFI form."""
    if isinstance(annotation, typing.ForwardRef):
        annotation = resolve(annotation.__forward_arg__)
    if isinstance(annotation, str):
        annotation = resolve(annotation)
    if typing.get_origin(annotation) is typing.Annotated:
        # The metadata is for other tools: the field stores what the annotated type stores.
        return field_type(typing.get_args(annotation)[0], self_cls, resolve)
    if annotation in (Any, object):
        return FieldType("Any", _ANY, True, lambda value: value)
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    if annotation is str:
        return FieldType("str", _native.type_key_to_index("ffi.String"), True, _exact(str, "str"))
    if annotation is bytes:
        return FieldType("bytes", _native.type_key_to_index("ffi.Bytes"), True, _to_bytes)
    if annotation is self_cls:
        # The class's own index is not known until it is registered: any object is stored,
        # the Python side checks the class.
        return FieldType(self_cls.__name__, _OBJECT, False, _exact(self_cls, self_cls.__name__))
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in UNION_ORIGINS:
        return _union_type(annotation, list(args), self_cls, resolve)
    if annotation in (list, tuple, Sequence, Array) or origin in (list, tuple, Sequence):
        element = None
        if args and (len(args) == 1 or args[1] is Ellipsis):
            element = field_type(args[0], self_cls, resolve)
        return _sequence_type(annotation, Array, element)
    if annotation is List:
        return _sequence_type(annotation, List, None)
    if annotation in (dict, Mapping, Map) or origin in (dict, Mapping):
        key = field_type(args[0], self_cls, resolve) if args else None
        item = field_type(args[1], self_cls, resolve) if args else None
        return _mapping_type(annotation, Map, key, item)
    if annotation is Dict:
        return _mapping_type(annotation, Dict, None, None)
    if annotation is Function or origin is Callable or annotation is Callable:

        def to_function(value: Any) -> Any:
            if not callable(value):
                raise Mismatch("callable", value)
            return value

        return FieldType("callable", _native.type_key_to_index("ffi.Function"), False, to_function)
    if isinstance(annotation, type) and issubclass(annotation, Object):
        return _object_type(annotation)
    raise TypeError(f"unsupported field type {_describe(annotation)}")


class Field:
    """A field of a ``py_class`` type, as :func:`field` declares it and :func:`fields` lists it."""

    __slots__ = (
        "_spec",
        "compare",
        "default",
        "default_factory",
        "frozen",
        "hash",
        "init",
        "kw_only",
        "name",
        "repr",
        "structural_eq",
        "type",
    )

    def __init__(
        self,
        default: Any,
        default_factory: Any,
        init: bool,
        repr: bool,
        compare: bool,
        hash: bool | None,
        kw_only: bool,
        frozen: bool,
        structural_eq: str | None = None,
    ) -> None:
        if structural_eq not in (None, "ignore", "def"):
            raise ValueError(
                f"structural_eq of a field must be None, 'ignore' or 'def', got {structural_eq!r}"
            )
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        if default_factory is not MISSING and not callable(default_factory):
            raise TypeError(f"default_factory must be callable, got {default_factory!r}")
        self.name = ""
        self.type: Any = Any
        self.default = default
        self.default_factory = default_factory
        self.init = init
        self.repr = repr
        self.compare = compare
        self.hash = compare if hash is None else hash
        self.kw_only = kw_only
        self.frozen = frozen
        self.structural_eq = structural_eq
        self._spec: FieldType | None = None

    @property
    def has_default(self) -> bool:
        """Whether the field has a default value or factory."""
        return self.default is not MISSING or self.default_factory is not MISSING

    def flags(self) -> int:
        """The field flags the type table records."""
        flags = 0 if self.frozen else FLAG_WRITABLE
        if not self.repr:
            flags |= FLAG_REPR_OFF
        if not self.compare:
            flags |= FLAG_COMPARE_OFF | FLAG_SEQ_HASH_IGNORE
        if self.structural_eq == "ignore":
            flags |= FLAG_SEQ_HASH_IGNORE
        elif self.structural_eq == "def":
            flags |= FLAG_SEQ_HASH_DEF
        if not self.hash:
            flags |= FLAG_HASH_OFF
        if not self.init:
            flags |= FLAG_INIT_OFF
        if self.kw_only:
            flags |= FLAG_KW_ONLY
        return flags

    def initial_value(self) -> Any:
        """The default of a field that has one (a new value from the factory)."""
        if self.default_factory is not MISSING:
            return self.default_factory()
        return self.default

    def __repr__(self) -> str:
        return (
            f"Field(name={self.name!r}, type={_describe(self.type)}, default={self.default!r}, "
            f"default_factory={self.default_factory!r}, init={self.init}, repr={self.repr}, "
            f"compare={self.compare}, hash={self.hash}, kw_only={self.kw_only}, "
            f"frozen={self.frozen}, structural_eq={self.structural_eq!r})"
        )


def field(
    *,
    default: Any = MISSING,
    default_factory: Callable[[], Any] | Any = MISSING,
    init: bool = True,
    repr: bool = True,
    compare: bool = True,
    hash: bool | None = None,
    kw_only: bool = False,
    frozen: bool = False,
    structural_eq: str | None = None,
) -> Any:
    """Declare a field of a ``py_class`` type with options, as ``x: int = field(default=0)``.

    ``default``/``default_factory``: the value (or a function making it) when ``__init__`` gets
    none; ``init``: whether ``__init__`` takes it; ``repr``: whether the printer shows it;
    ``compare``/``hash``: whether equality, structural comparison and hashing look at it;
    ``kw_only``: keyword-only in ``__init__``; ``frozen``: assignment after construction raises;
    ``structural_eq``: ``"ignore"`` leaves the field out of structural comparison only,
    ``"def"`` marks it as where free variables are defined (as a let-binding's variable).
    """
    return Field(
        default, default_factory, init, repr, compare, hash, kw_only, frozen, structural_eq
    )
