"""Functions every server offers for tests, under the names Apache TVM's clients and RPC tests
call: ``rpc.test.*``, ``rpc.testing.*`` and the ``testing.echo`` / ``testing.test_raise_error``
pair (registered here only where the testing library did not already register them)."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

from ..ffi import get_global_func, register_func


@register_func("rpc.test.addone", override=True)
def _addone(x: int) -> int:
    return x + 1


@register_func("rpc.test.strcat", override=True)
def _strcat(name: str, x: int) -> str:
    return f"{name}:{x}"


@register_func("rpc.test.except", override=True)
def _except(name: str) -> None:
    raise ValueError(name)


@register_func("rpc.test.sleep", override=True)
def _sleep(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


@register_func("rpc.test.call_back", override=True)
def _call_back(func: Callable[..., Any], *args: Any) -> Any:
    return func(*args)


@register_func("rpc.test.runtime_str_concat", override=True)
def _runtime_str_concat(x: str, y: str) -> str:
    return str(x) + str(y)


@register_func("rpc.test.remote_tensor_func", override=True)
def _remote_tensor_func(tensor: Any) -> None:
    """Checks that ``tensor`` is the 3x4 array of ones the client sent."""
    import numpy as np

    got = tensor.numpy()
    if got.shape != (3, 4) or not (got == 1).all():
        raise ValueError(f"expected a 3x4 tensor of ones, got {np.array2string(got)}")


@register_func("rpc.test.add_to_lhs", override=True)
def _add_to_lhs(x: Any) -> Callable[[Any], Any]:
    return lambda y: x + y


@register_func("rpc.test.remote_return_nd", override=True)
def _remote_return_nd(name: str) -> Callable[..., Any]:
    """A function over one server-side tensor of 10 float32 zeros, kept alive by the closures
    (the client checks that remote references keep it): ``get_arr`` returns the tensor,
    ``ref_count`` its reference count, ``get_elem(i)`` its element ``i`` and
    ``get_arr_elem(arr, i)`` the element ``i`` of a tensor the client passes."""
    import numpy as np

    from ..runtime import tensor as make_tensor

    held = make_tensor(np.zeros(10, dtype="float32"))
    closures: dict[str, Callable[..., Any]] = {
        "get_arr": lambda: held,
        "ref_count": lambda: held._use_count(),
        "get_elem": lambda idx: float(held.numpy()[idx]),
        "get_arr_elem": lambda arr, idx: float(arr.numpy()[idx]),
    }
    if name not in closures:
        raise RuntimeError(f"unknown name {name!r}: expected one of {', '.join(closures)}")
    return closures[name]


@register_func("rpc.testing.GetShapeElem", override=True)
def _get_shape_elem(shape: Any, index: int) -> int:
    return int(shape[index])


@register_func("rpc.testing.GetShapeSize", override=True)
def _get_shape_size(shape: Any) -> int:
    return len(shape)


def _echo(value: Any, *rest: Any) -> Any:
    """Returns its first argument."""
    return value


def _raise_error(kind: str, message: str) -> None:
    """Raises an error of ``kind`` (a built-in exception's name, a kind registered with
    :func:`tvm.error.register_error`, or any other name, raised as a ``RuntimeError`` of that
    kind) with ``message``."""
    from .. import error

    cls = getattr(builtins, kind, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = getattr(error, kind, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = _RAISED_KINDS.get(kind)
        if cls is None:
            cls = _RAISED_KINDS[kind] = type(kind, (RuntimeError,), {})
            error.register_error(kind, cls)
    raise cls(message)


_RAISED_KINDS: dict[str, type[Exception]] = {}

# The testing library (libtvm_ffi_testing.so) has native versions: keep them where loaded.
for _name, _func in (("testing.echo", _echo), ("testing.test_raise_error", _raise_error)):
    if get_global_func(_name, allow_missing=True) is None:
        register_func(_name, _func)
