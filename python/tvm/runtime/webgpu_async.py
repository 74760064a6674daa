"""Awaitable WebGPU operations for :mod:`asyncio`.

WebGPU completes work asynchronously: the native backend turns queue completion and buffer
mapping into futures, completed on the device's poller thread. These helpers resolve an asyncio
future from that completion (``webgpu.sync_then`` / ``webgpu.copy_to_host_then``), so no thread
blocks and the event loop keeps running while the GPU works::

    await tvm.runtime.webgpu_sync_async(tvm.webgpu(0))
    array = await tvm.runtime.tensor_to_numpy_async(tensor)

The blocking forms are ``Device.sync()`` and ``Tensor.numpy()``; the RPC server's asynchronous
mode serves ``webgpu.sync_async`` and ``webgpu.copy_to_host_async``.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

from ..ffi import Device, Function, Tensor, get_global_func

if TYPE_CHECKING:  # asyncio is imported on first use: `import tvm` stays light
    import asyncio

__all__ = ["tensor_to_numpy_async", "webgpu_sync_async"]


def _api(name: str) -> Function:
    """A global function of the WebGPU backend; a ``RuntimeError`` when this build lacks it."""
    func = get_global_func(name)
    if func is None:
        raise RuntimeError(f"{name} is not registered: this build has no WebGPU backend")
    return func


def _exception(kind: str, message: str) -> BaseException:
    """The exception of an error the native side reported by kind and message."""
    cls = getattr(builtins, kind, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = RuntimeError
    return cls(message)


def _completion(loop: asyncio.AbstractEventLoop) -> tuple[asyncio.Future[None], Any]:
    """An asyncio future and the native callback ``(kind, message)`` that resolves it from any
    thread."""
    future: asyncio.Future[None] = loop.create_future()

    def resolve(kind: str, message: str) -> None:
        if future.done():
            return
        if kind:
            future.set_exception(_exception(kind, message))
        else:
            future.set_result(None)

    def callback(kind: str, message: str) -> None:
        loop.call_soon_threadsafe(resolve, str(kind), str(message))

    return future, callback


async def webgpu_sync_async(device: Device) -> None:
    """Waits, without blocking the event loop, until the work queued on WebGPU ``device`` is
    done."""
    import asyncio

    future, callback = _completion(asyncio.get_running_loop())
    _api("webgpu.sync_then")(device, callback)
    await future


async def tensor_to_numpy_async(tensor: Tensor) -> Any:
    """The elements of WebGPU ``tensor`` as a numpy array, read back without blocking the event
    loop (after the work queued before the call)."""
    import asyncio

    from . import cpu, empty

    host = empty(tensor.shape, tensor.dtype, cpu())
    future, callback = _completion(asyncio.get_running_loop())
    _api("webgpu.copy_to_host_then")(tensor, host, callback)
    await future
    return host.numpy()
