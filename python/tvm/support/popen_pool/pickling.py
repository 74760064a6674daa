"""Pickling of popen jobs: a job ``(fn, args, kwargs)`` becomes bytes the worker can load.

Everything is pickled by reference, as usual, except plain functions defined at the top level of
``__main__``, which the worker cannot import and which therefore travel by value. What cannot be
sent (lambdas, nested functions, classes of ``__main__``) is refused with a
``pickle.PicklingError`` that names it, before anything reaches the worker.
"""

from __future__ import annotations

import builtins
import importlib
import io
import marshal
import pickle
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

# Pickling of jobs. Everything goes by reference as usual, except plain functions defined at the
# top level of `__main__`: the worker cannot import the parent's main script (or `-c` code, or
# an interactive session), so their code and the globals they use travel by value.

#: Namespace shared by the `__main__` functions rebuilt in this process.
_MAIN_NAMESPACE: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}


class _EmptyCell:
    """Stands for a closure cell that holds no value yet."""


def _describe(obj: object) -> str:
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if isinstance(name, str):
        module = getattr(obj, "__module__", None)
        return f"{module}.{name}" if isinstance(module, str) else name
    return repr(obj)


def _referenced_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _referenced_names(const)
    return names


def _make_main_function(
    code_bytes: bytes, name: str, closure: tuple[Any, ...] | None
) -> types.FunctionType:
    code = marshal.loads(code_bytes)
    cells = None
    if closure is not None:
        cells = tuple(
            types.CellType() if value is _EmptyCell else types.CellType(value) for value in closure
        )
    return types.FunctionType(code, _MAIN_NAMESPACE, name, None, cells)


def _fill_main_function(func: types.FunctionType, state: dict[str, Any]) -> None:
    func.__globals__.update(state["globals"])
    func.__defaults__ = state["defaults"]
    func.__kwdefaults__ = state["kwdefaults"]
    func.__qualname__ = state["qualname"]
    func.__doc__ = state["doc"]
    func.__dict__.update(state["dict"])


def _cell_value(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return _EmptyCell


def _reduce_main_function(func: types.FunctionType) -> tuple[Any, ...]:
    namespace = func.__globals__
    captured = {
        name: namespace[name] for name in _referenced_names(func.__code__) if name in namespace
    }
    closure = None
    if func.__closure__ is not None:
        closure = tuple(_cell_value(cell) for cell in func.__closure__)
    state = {
        "globals": captured,
        "defaults": func.__defaults__,
        "kwdefaults": func.__kwdefaults__,
        "qualname": func.__qualname__,
        "doc": func.__doc__,
        "dict": dict(func.__dict__),
    }
    args = (marshal.dumps(func.__code__), func.__name__, closure)
    return (_make_main_function, args, state, None, None, _fill_main_function)


class _JobPickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.FunctionType):
            if obj.__name__ == "<lambda>" or "<locals>" in obj.__qualname__:
                raise pickle.PicklingError(
                    f"{_describe(obj)} is a lambda or a function defined inside another "
                    "function; such functions cannot be pickled. Define it at the top level "
                    "of a module (functools.partial can bind arguments to it)"
                )
            if obj.__module__ == "__main__":
                return _reduce_main_function(obj)
        elif isinstance(obj, types.ModuleType):
            if obj.__name__ == "__main__":
                raise pickle.PicklingError("the __main__ module itself cannot be sent")
            if sys.modules.get(obj.__name__) is obj:
                return (importlib.import_module, (obj.__name__,))
        elif isinstance(obj, type) and obj.__module__ == "__main__":
            raise pickle.PicklingError(
                f"class {obj.__qualname__} is defined in the main script (__main__), which a "
                "popen worker cannot import; move it to a module"
            )
        return NotImplemented


def _dumps(obj: object) -> bytes:
    buffer = io.BytesIO()
    _JobPickler(buffer, pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def _pickle_job(
    fn: Callable[..., Any], args: Iterable[Any], kwargs: dict[str, Any] | None
) -> bytes:
    if not callable(fn):
        raise TypeError(f"a popen job must be callable, got {fn!r}")
    try:
        return _dumps((fn, tuple(args), dict(kwargs or {})))
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError, ValueError) as err:
        raise pickle.PicklingError(
            f"cannot send the job {_describe(fn)} to a popen worker: it cannot be pickled: {err}"
        ) from err
