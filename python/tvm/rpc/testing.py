"""Functions every server offers for tests (``rpc.test.*``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ffi import register_func


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
