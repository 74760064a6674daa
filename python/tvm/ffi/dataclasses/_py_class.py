"""``py_class``: new object types defined by Python classes, and the dataclass-style helpers
(``fields``, ``replace``, ``asdict``, ``astuple``, ``is_dataclass``) that work on them."""

from __future__ import annotations

import functools
import keyword
import sys
from collections.abc import Callable
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    ClassVar,
    Final,
    TypeVar,
    get_args,
    get_origin,
    overload,
)

from ... import _native
from ..._compat import class_annotations
from ..._native import Object
from ..container import Array, Dict, List, Map
from ..registry import get_global_func
from ._field import MISSING, Field, Mismatch, field_type

if TYPE_CHECKING:
    import inspect

__all__ = ["asdict", "astuple", "fields", "is_dataclass", "py_class", "replace"]

T = TypeVar("T", bound=type)


def _frozen_error(message: str) -> Exception:
    """``dataclasses.FrozenInstanceError``, imported when first raised (``dataclasses`` imports
    ``inspect``, which would add milliseconds to ``import tvm``)."""
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(message)


#: Structural equality kinds (kTVMFFISEqHashKind*) by the names ``py_class`` takes.
_STRUCTURAL_KINDS = {
    None: 0,
    "tree": 1,
    "var": 2,
    "dag": 3,
    "const-tree": 4,
    "singleton": 5,
}
_FIELDS_ATTR = "__tvm_dataclass_fields__"
_FROZEN_ATTR = "__tvm_dataclass_frozen__"
_OBJECT_INDEX = 64


#: ``id()`` of the objects whose ``__post_init__`` is running: it may set frozen fields (with
#: ``object.__setattr__``, as for :mod:`dataclasses`).
_initializing: set[int] = set()


class _FieldAccess:
    """The attribute of a field on instances: reads through the field's getter; assignment
    checks the value and writes through the setter, unless the field is frozen."""

    __slots__ = ("field", "type_key")

    def __init__(self, field: Field, type_key: str) -> None:
        self.field = field
        self.type_key = type_key

    def __get__(self, obj: Object | None, owner: type | None = None) -> Any:
        if obj is None:
            return self.field.default if self.field.default is not MISSING else self
        _check_bound(obj)
        return _native._object_get_field(obj, self.field.name)

    def __set__(self, obj: Object, value: Any) -> None:
        name = self.field.name
        initializing = id(obj) in _initializing
        if self.field.frozen and not initializing:
            raise _frozen_error(f"cannot assign to frozen field '{name}' of {self.type_key}")
        value = _convert(self.field, value, f"{self.type_key} assignment to")
        _check_bound(obj)
        _native._object_set_field(obj, name, value, initializing)

    def __delete__(self, obj: Object) -> None:
        raise AttributeError(f"cannot delete field '{self.field.name}' of {self.type_key}")


def _check_bound(obj: Object) -> None:
    """An ``AttributeError`` if ``obj`` has no runtime object (its ``__init__`` made none)."""
    if obj._type_index == 0:  # kTVMFFINone
        raise AttributeError(
            f"this {type(obj).__name__} has no fields: its __init__ did not call "
            "self.__ffi_init__(...)"
        )


def _convert(field: Field, value: Any, where: str) -> Any:
    """The value ``field`` stores for ``value``; a ``TypeError`` naming ``where``, the field and
    the value's type."""
    assert field._spec is not None
    try:
        return field._spec.convert(value)
    except Mismatch as err:
        raise TypeError(f"{where} field '{field.name}': {err}") from None
    except (ValueError, OverflowError) as err:
        # Content the field's type refuses (an int beyond 64 bits, an unknown dtype, ...).
        raise type(err)(f"{where} field '{field.name}': {err}") from None


def _is_class_var(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    return annotation is ClassVar or get_origin(annotation) is ClassVar


def _without_final(annotation: Any) -> tuple[Any, bool]:
    """The type a field stores for ``annotation``, and whether it was declared ``Final`` (a field
    that ``__init__`` sets and nothing may reassign); a bare ``Final`` stores any value."""
    if annotation is Final:
        return Any, True
    if get_origin(annotation) is Final:
        return get_args(annotation)[0], True
    if get_origin(annotation) is Annotated:
        inner, final = _without_final(get_args(annotation)[0])
        return (inner if final else annotation), final
    return annotation, False


def _is_reserved(name: str) -> bool:
    """Whether a field named ``name`` would replace what the class or the runtime relies on."""
    dunder = name.startswith("__") and name.endswith("__")
    return dunder or name.startswith(("_tvm", "__tvm")) or hasattr(Object, name)


def _is_mutable(value: Any) -> bool:
    """Whether ``value`` can change in place: a ``List``, a ``Dict`` or an instance of a
    ``py_class`` type that is not frozen."""
    if isinstance(value, (List, Dict)):
        return True
    return is_dataclass(value) and not getattr(type(value), _FROZEN_ATTR, True)


def _resolver(
    cls: type, new_cls: type, type_key: str, name: str, local_names: dict[str, Any]
) -> Callable[[str], Any]:
    """Evaluates the text of an annotation in the class's module and the scope that defined
    the class (``local_names``), where the class's own name refers to the new class."""

    def resolve(text: str) -> Any:
        module = sys.modules.get(cls.__module__)
        namespace = dict(vars(module)) if module is not None else {}
        namespace.update(local_names)
        namespace[cls.__name__] = new_cls
        try:
            return eval(text, namespace)
        except Exception as err:
            raise TypeError(
                f"{type_key}: cannot resolve the annotation {text!r} of field '{name}': {err}"
            ) from None

    return resolve


def _own_fields(
    cls: type,
    new_cls: type,
    type_key: str,
    kw_only: bool,
    frozen: bool,
    local_names: dict[str, Any],
) -> list[Field]:
    """The fields a class body declares, in order, with their storage worked out."""
    result = []
    for name, annotation in class_annotations(cls).items():
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"{type_key}: a field name must be an identifier, got {name!r}")
        if _is_class_var(annotation):
            continue
        if _is_reserved(name):
            raise ValueError(
                f"{type_key}: '{name}' cannot be a field name (it is a dunder name, starts with "
                "'_tvm' or is an attribute of tvm.ffi.Object)"
            )
        declared = cls.__dict__.get(name, MISSING)
        spec = (
            declared
            if isinstance(declared, Field)
            else Field(declared, MISSING, True, True, True, None, False, False)
        )
        spec.name = name
        spec.kw_only = spec.kw_only or kw_only
        spec.frozen = spec.frozen or frozen
        resolve = _resolver(cls, new_cls, type_key, name, local_names)
        spec.type = resolve(annotation) if isinstance(annotation, str) else annotation
        stored, final = _without_final(spec.type)
        spec.frozen = spec.frozen or final
        try:
            spec._spec = field_type(stored, new_cls, resolve)
        except TypeError as err:
            raise TypeError(f"{type_key} field '{name}': {err}") from None
        if spec.default is not MISSING:
            spec.default = _convert(spec, spec.default, f"{type_key} default of")
            if _is_mutable(spec.default):
                raise ValueError(
                    f"{type_key} field '{name}': a mutable default "
                    f"({type(spec.default).__name__}) would be shared by every instance; "
                    "use default_factory"
                )
        if not spec.init and not spec.has_default:
            raise TypeError(f"{type_key} field '{name}': a field with init=False needs a default")
        result.append(spec)
    return result


def _signature(all_fields: list[Field], type_key: str) -> inspect.Signature:
    """The signature of the generated ``__init__``."""
    import inspect  # see _frozen_error

    positional: list[inspect.Parameter] = []
    keyword: list[inspect.Parameter] = []
    for spec in all_fields:
        if not spec.init:
            continue
        default = inspect.Parameter.empty if not spec.has_default else spec.default
        if spec.default_factory is not MISSING:
            default = spec.default_factory
        kind = (
            inspect.Parameter.KEYWORD_ONLY
            if spec.kw_only
            else inspect.Parameter.POSITIONAL_OR_KEYWORD
        )
        (keyword if spec.kw_only else positional).append(
            inspect.Parameter(spec.name, kind, default=default, annotation=spec.type)
        )
    for before, after in zip(positional, positional[1:]):
        if (
            before.default is not inspect.Parameter.empty
            and after.default is inspect.Parameter.empty
        ):
            raise TypeError(
                f"{type_key}: non-default argument '{after.name}' follows default argument"
            )
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    return inspect.Signature([self_param, *positional, *keyword])


def _make_init(
    all_fields: list[Field], type_key: str, signature: inspect.Signature
) -> Callable[..., None]:
    where = f"{type_key}.__init__()"
    type_index = _native.type_key_to_index(type_key)

    def ffi_init(self: Object, *args: Any, **kwargs: Any) -> None:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError as err:
            raise TypeError(f"{where}: {err}") from None
        values = []
        for spec in all_fields:
            if spec.name in bound.arguments:
                values.append(_convert(spec, bound.arguments[spec.name], where))
            else:
                values.append(_convert(spec, spec.initial_value(), where))
        _native._init_object(self, type_index, values)
        post_init = getattr(self, "__post_init__", None)
        if post_init is not None:
            _initializing.add(id(self))
            try:
                post_init()
            finally:
                _initializing.discard(id(self))

    ffi_init.__signature__ = signature  # type: ignore[attr-defined]
    ffi_init.__name__ = ffi_init.__qualname__ = "__init__"
    return ffi_init


_global_functions: dict[str, Any] = {}


def _global(name: str) -> Any:
    if name not in _global_functions:
        _global_functions[name] = get_global_func(name)
    return _global_functions[name]


def _comparison(name: str) -> Callable[[Object, Any], Any]:
    def compare(self: Object, other: Any) -> Any:
        if type(other) is not type(self):
            return NotImplemented
        return bool(_global(name)(self, other))

    return compare


def _add_dunders(new_cls: Any, eq: bool, order: bool, frozen: bool, unsafe_hash: bool) -> None:
    def set_missing(name: str, value: Any) -> None:
        if name not in new_cls.__dict__:
            setattr(new_cls, name, value)

    if eq:
        set_missing("__eq__", _comparison("ffi.RecursiveEq"))
        set_missing(
            "__ne__",
            lambda self, other: (
                NotImplemented if (r := self.__eq__(other)) is NotImplemented else not r
            ),
        )
        if frozen or unsafe_hash:
            set_missing("__hash__", lambda self: int(_global("ffi.RecursiveHash")(self)))
        else:
            set_missing("__hash__", None)
    if order:
        for name, fn in (("__lt__", "Lt"), ("__le__", "Le"), ("__gt__", "Gt"), ("__ge__", "Ge")):
            set_missing(name, _comparison(f"ffi.Recursive{fn}"))
    if frozen:

        def refuse_setattr(self: Object, name: str, value: Any) -> None:
            raise _frozen_error(f"cannot assign to '{name}' of frozen {self.type_key}")

        def refuse_delattr(self: Object, name: str) -> None:
            raise _frozen_error(f"cannot delete '{name}' of frozen {self.type_key}")

        set_missing("__setattr__", refuse_setattr)
        set_missing("__delattr__", refuse_delattr)
    set_missing("__replace__", lambda self, **changes: replace(self, **changes))
    set_missing("__copy__", lambda self: _native._shallow_copy(self))


def _define(
    cls: type,
    type_key: str | None,
    *,
    init: bool,
    eq: bool,
    order: bool,
    frozen: bool,
    unsafe_hash: bool,
    kw_only: bool,
    structural_eq: str | None,
    local_names: dict[str, Any],
) -> type:
    if not isinstance(cls, type):
        raise TypeError(f"py_class decorates a class, got {cls!r}")
    key = type_key if type_key is not None else f"{cls.__module__}.{cls.__qualname__}"
    if not isinstance(key, str) or not key:
        raise TypeError(f"py_class: the type key must be a non-empty str, got {key!r}")
    parent = next((b for b in cls.__mro__[1:] if _FIELDS_ATTR in b.__dict__), None)
    native = next(
        (
            b
            for b in cls.__mro__[1:]
            if b.__dict__.get("_tvm_type_index", _OBJECT_INDEX) != _OBJECT_INDEX
            and _FIELDS_ATTR not in b.__dict__
        ),
        None,
    )
    if native is not None and (parent is None or issubclass(parent, native)):
        raise TypeError(
            f"{key}: a py_class type derives from tvm.ffi.Object or another py_class type, "
            f"not from {native.__name__} ({native.__dict__['_tvm_type_key']})"
        )
    if parent is not None and parent.__dict__[_FROZEN_ATTR] != frozen:
        raise TypeError(
            f"{key}: cannot inherit a {'' if frozen else 'non-'}frozen py_class from a "
            f"{'non-' if frozen else ''}frozen one ({parent.__dict__['_tvm_type_key']})"
        )
    parent_fields: list[Field] = list(getattr(parent, _FIELDS_ATTR, ()))
    bases = cls.__bases__
    if not any(issubclass(b, Object) for b in bases):
        bases = (Object, *(b for b in bases if b is not object))
    namespace = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
    new_cls: Any = type(cls)(cls.__name__, bases, namespace)
    own = _own_fields(cls, new_cls, key, kw_only, frozen, local_names)
    inherited = {spec.name for spec in parent_fields}
    for spec in own:
        if spec.name in inherited:
            raise ValueError(f"{key}: field '{spec.name}' is already a field of a parent type")
    all_fields = parent_fields + own
    signature = _signature(all_fields, key)
    specs = []
    for spec in own:
        assert spec._spec is not None
        if spec.default_factory is not MISSING:
            default_kind, default = 2, spec.default_factory
        else:
            default_kind, default = (0, None) if spec.default is MISSING else (1, spec.default)
        specs.append(
            (
                spec.name,
                spec._spec.static_index,
                spec._spec.boxed,
                spec.flags(),
                default_kind,
                default,
            )
        )
    parent_index = parent._tvm_type_index if parent is not None else _OBJECT_INDEX  # type: ignore[attr-defined]
    index, _offsets = _native._define_object_type(
        key, parent_index, specs, _STRUCTURAL_KINDS[structural_eq]
    )
    new_cls._tvm_type_index = index
    new_cls._tvm_type_key = key
    _native._register_object_class(key, new_cls)
    for spec in own:
        setattr(new_cls, spec.name, _FieldAccess(spec, key))
    setattr(new_cls, _FIELDS_ATTR, tuple(all_fields))
    setattr(new_cls, _FROZEN_ATTR, frozen)
    ffi_init = _make_init(all_fields, key, signature)
    new_cls.__ffi_init__ = ffi_init
    if init and "__init__" not in cls.__dict__:
        new_cls.__init__ = ffi_init
    _add_dunders(new_cls, eq, order, frozen, unsafe_hash)
    return new_cls


@overload
def py_class(type_key: T, /) -> T: ...
@overload
def py_class(
    type_key: str | None = None,
    /,
    *,
    init: bool = True,
    eq: bool = False,
    order: bool = False,
    frozen: bool = False,
    unsafe_hash: bool = False,
    kw_only: bool = False,
    structural_eq: str | None = "tree",
) -> Callable[[T], T]: ...


def py_class(
    type_key: Any = None,
    /,
    *,
    init: bool = True,
    eq: bool = False,
    order: bool = False,
    frozen: bool = False,
    unsafe_hash: bool = False,
    kw_only: bool = False,
    structural_eq: str | None = "tree",
) -> Any:
    """Define a new object type from a class's annotated fields.

    ``@py_class("demo.Point")`` (or ``@py_class``, keyed by module and class name) registers the
    type and its fields in the runtime's type table and returns a subclass of
    :class:`tvm.ffi.Object`: instances are runtime objects that cross into native functions and
    back, compare with :func:`tvm.ffi.structural_equal`, pickle, deep-copy and print through the
    runtime. Fields are declared as in :mod:`dataclasses`, optionally with :func:`field`.

    ``init``: generate ``__init__`` (type-checked; ``__post_init__`` runs after it, and may set
    frozen fields with ``object.__setattr__``); ``eq``:
    ``==`` compares fields recursively (instances compare by identity otherwise); ``order``:
    ``<``/``<=``/``>``/``>=`` field-wise; ``frozen``: no assignment after construction;
    ``unsafe_hash``: hash by fields even if not frozen; ``kw_only``: all fields keyword-only;
    ``structural_eq``: how :func:`~tvm.ffi.structural_equal` treats instances (``"tree"``,
    ``"const-tree"``, ``"dag"``, ``"var"``, ``"singleton"``, or None for not comparable).
    A type key that is already registered is a ``ValueError``.
    """
    if structural_eq not in _STRUCTURAL_KINDS:
        raise ValueError(
            f"py_class: structural_eq must be one of {sorted(k for k in _STRUCTURAL_KINDS if k)} "
            f"or None, got {structural_eq!r}"
        )
    define = functools.partial(
        _define,
        init=init,
        eq=eq,
        order=order,
        frozen=frozen,
        unsafe_hash=unsafe_hash,
        kw_only=kw_only,
        structural_eq=structural_eq,
        # Annotations may name classes local to the scope that applies the decorator.
        local_names=dict(sys._getframe(1).f_locals),
    )
    if isinstance(type_key, type):
        return define(type_key, None)
    return lambda cls: define(cls, type_key)


def is_dataclass(obj: Any) -> bool:
    """Whether ``obj`` is a ``py_class`` type or an instance of one."""
    cls = obj if isinstance(obj, type) else type(obj)
    return hasattr(cls, _FIELDS_ATTR)


def fields(obj: Any) -> tuple[Field, ...]:
    """The fields of a ``py_class`` type or instance, inherited ones first; a ``TypeError`` for
    anything else."""
    if not is_dataclass(obj):
        raise TypeError(f"fields() needs a py_class type or instance, got {obj!r}")
    cls = obj if isinstance(obj, type) else type(obj)
    return tuple(getattr(cls, _FIELDS_ATTR))


def replace(obj: Any, /, **changes: Any) -> Any:
    """A new instance of ``obj``'s type with the same fields except ``changes``; a ``ValueError``
    for a change to a field that ``__init__`` does not take."""
    if isinstance(obj, type) or not is_dataclass(obj):
        raise TypeError(f"replace() needs a py_class instance, got {obj!r}")
    kwargs = {}
    for spec in fields(obj):
        if not spec.init:
            if spec.name in changes:
                raise ValueError(
                    f"field '{spec.name}' is declared with init=False, it cannot be replaced"
                )
            continue
        kwargs[spec.name] = (
            changes.pop(spec.name) if spec.name in changes else getattr(obj, spec.name)
        )
    if changes:
        raise TypeError(
            f"replace(): {type(obj).__name__} has no field(s) {', '.join(sorted(changes))}"
        )
    return type(obj)(**kwargs)


def asdict(obj: Any) -> dict[str, Any]:
    """The fields of a ``py_class`` instance as a dict, recursing into nested instances and
    containers (arrays and lists become ``list``, maps become ``dict``)."""
    if isinstance(obj, type) or not is_dataclass(obj):
        raise TypeError(f"asdict() needs a py_class instance, got {obj!r}")
    return {spec.name: _plain(getattr(obj, spec.name), asdict) for spec in fields(obj)}


def astuple(obj: Any) -> tuple[Any, ...]:
    """The field values of a ``py_class`` instance as a tuple, recursing as :func:`asdict`
    does (nested instances become tuples)."""
    if isinstance(obj, type) or not is_dataclass(obj):
        raise TypeError(f"astuple() needs a py_class instance, got {obj!r}")
    return tuple(_plain(getattr(obj, spec.name), astuple) for spec in fields(obj))


def _plain(value: Any, convert: Callable[[Any], Any]) -> Any:
    """``value`` with ``py_class`` instances turned by ``convert`` and runtime containers into
    Python ones."""
    if is_dataclass(value) and not isinstance(value, type):
        return convert(value)
    if isinstance(value, (Array, List, list, tuple)):
        return [_plain(v, convert) for v in value]
    if isinstance(value, (Map, Dict, dict)):
        return {_plain(k, convert): _plain(v, convert) for k, v in value.items()}
    return value
