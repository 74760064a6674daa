"""The global function registry and the binding of Python classes to object types."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any, Literal, TypeVar, overload

from .. import _native
from .._native import Function, Object

__all__ = [
    "get_global_func",
    "list_global_func_names",
    "register_func",
    "register_object",
    "remove_global_func",
]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T", bound=type)


@overload
def register_func(name: F, f: None = None, *, override: bool = False) -> F: ...
@overload
def register_func(
    name: str | None = None, f: None = None, *, override: bool = False
) -> Callable[[F], F]: ...
@overload
def register_func(name: str, f: F, *, override: bool = False) -> F: ...


def register_func(name=None, f=None, *, override=False):
    """Register a Python callable as a global function.

    Use as ``@register_func`` (named after the function), ``@register_func("name")``, or
    ``register_func("name", f)``. An existing name is a ``RuntimeError`` unless ``override``.
    """
    if callable(name) and f is None:
        func = name
        _register(func.__name__, func, override)
        return func
    if name is not None and not isinstance(name, str):
        raise TypeError(f"register_func: name must be a str, got {name!r}")
    if name == "":
        raise ValueError("register_func: the name must not be empty")

    def register(func: F) -> F:
        if not callable(func):
            raise TypeError(f"register_func: {func!r} is not callable")
        _register(name if name is not None else func.__name__, func, override)
        return func

    return register(f) if f is not None else register


def _register(name: str, func: Callable[..., Any], override: bool) -> None:
    """Registers ``func`` with the documentation and type schema a Python function carries."""
    doc, metadata = "", ""
    if isinstance(func, (types.FunctionType, types.MethodType)):
        import inspect

        from .type_schema import metadata_of

        doc = inspect.getdoc(func) or ""
        metadata = metadata_of(func)
    _native.register_global_func(name, func, override, doc, metadata)


@overload
def get_global_func(name: str, allow_missing: Literal[False] = False) -> Function: ...
@overload
def get_global_func(name: str, allow_missing: bool) -> Function | None: ...
def get_global_func(name: str, allow_missing: bool = False) -> Function | None:
    """The global function ``name``; a ``ValueError`` naming it if missing (or None when
    ``allow_missing``)."""
    func = _native.get_global_func(name)
    if func is None and not allow_missing:
        raise ValueError(f"Cannot find global function `{name}`")
    return func


def get_global_func_metadata(name: str) -> dict[str, Any]:
    """The metadata recorded with global function ``name``, parsed from its JSON (``{}`` when
    none was recorded; a typed C++ export records ``{"type_schema": "<JSON>"}``); a
    ``KeyError`` naming it if no such function is registered."""
    text = get_global_func("ffi.GetGlobalFuncMetadata")(name)
    return _metadata_dict(text, f"global function `{name}`")


def get_global_func_doc(name: str) -> str | None:
    """The documentation recorded with global function ``name`` (None when it has none); a
    ``KeyError`` naming it if no such function is registered."""
    return get_global_func("ffi.GetGlobalFuncDoc")(name) or None


def _metadata_dict(text: str | None, what: str) -> dict[str, Any]:
    """Recorded metadata JSON as a dict; a ``ValueError`` naming ``what`` if it is not a JSON
    object."""
    import json

    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as err:
        raise ValueError(f"the metadata of {what} is not JSON ({err}): {text!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"the metadata of {what} is not a JSON object: {text!r}")
    return value


def list_global_func_names() -> list[str]:
    """The names of all global functions, sorted."""
    return _native.list_global_func_names()


def remove_global_func(name: str) -> bool:
    """Remove the global function ``name``; whether it existed."""
    return _native.remove_global_func(name)


class _Field:
    """A read-only attribute that reads a reflected field through its native getter."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Object | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return _native._object_get_field(obj, self.name)

    def __set__(self, obj: Object, value: Any) -> None:
        raise AttributeError(f"field '{self.name}' of {obj.type_key} is read-only")

    def __delete__(self, obj: Object) -> None:
        raise AttributeError(f"field '{self.name}' of {obj.type_key} is read-only")


class _ReflectedObject(Object):
    """Objects of types with no registered class: fields are read through reflection."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _native._object_get_field(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _native._type_field_names(self._type_index):
            raise AttributeError(f"field '{name}' of {self.type_key} is read-only")
        super().__setattr__(name, value)


def register_object(type_key: str | type | None = None) -> Any:
    """Bind a Python class (a subclass of :class:`Object`) to an object type registered in
    native code, so values of that type come back as instances of the class.

    Use as ``@register_object("ns.Type")`` or ``@register_object`` (the key is the class name).
    """

    def register(cls: T) -> T:
        if not (isinstance(cls, type) and issubclass(cls, Object)):
            raise TypeError(f"register_object needs a subclass of tvm.ffi.Object, got {cls!r}")
        key = type_key if isinstance(type_key, str) else cls.__name__
        index = _native._register_object_class(key, cls)
        registered: Any = cls
        registered._tvm_type_index = index
        registered._tvm_type_key = key
        for name in _native._type_field_names(index):
            if not hasattr(cls, name):
                setattr(cls, name, _Field(name))
        return cls

    if isinstance(type_key, type):
        return register(type_key)
    return register


register_object("ffi.Object")(_ReflectedObject)
