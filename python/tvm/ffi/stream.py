"""The current stream kernels see: each thread has one per device (0, the default stream, unless
set), which compiled kernels read with ``TVMFFIEnvGetStream`` and launches run on.

.. code-block:: python

    with tvm.ffi.use_raw_stream(tvm.cuda(0), stream_handle):
        kernel(x, y)  # runs on stream_handle

    with tvm.ffi.use_torch_stream():  # PyTorch's current CUDA stream
        kernel(x, y)
"""

from __future__ import annotations

import ctypes
import importlib
from types import TracebackType
from typing import Any

from .. import _native

__all__ = ["StreamContext", "get_raw_stream", "use_raw_stream", "use_torch_stream"]


def _device(device: Any) -> _native.Device:
    return device if isinstance(device, _native.Device) else _native.Device(device)


#: Stream handles are addresses: below 2**64.
_HANDLE_LIMIT = 1 << 64


def _handle(stream: object) -> int:
    """``stream`` as a handle: an ``int`` or ``ctypes.c_void_p`` address; a ``ValueError``
    naming anything else."""
    if isinstance(stream, ctypes.c_void_p):
        return stream.value or 0
    if isinstance(stream, int) and not isinstance(stream, bool):
        if not 0 <= stream < _HANDLE_LIMIT:
            raise ValueError(f"a stream handle is an address below 2**64, not {stream}")
        return stream
    raise ValueError(
        f"a stream is a handle as an int or ctypes.c_void_p, got {type(stream).__name__}; "
        "for a torch stream use tvm.ffi.use_torch_stream"
    )


class StreamContext:
    """A ``with`` block in which ``stream`` is the calling thread's current stream on
    ``device``; the stream before it comes back on exit (also after an exception)."""

    def __init__(self, device: Any, stream: int | ctypes.c_void_p) -> None:
        self.device = _device(device)
        self.stream = _handle(stream)
        self._previous: list[int] = []

    def __enter__(self) -> StreamContext:
        self._previous.append(self.device.set_raw_stream(self.stream))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if not self._previous:
            raise RuntimeError("StreamContext.__exit__ without a matching __enter__")
        self.device.set_raw_stream(self._previous.pop())


def use_raw_stream(device: Any, stream: int | ctypes.c_void_p) -> StreamContext:
    """A :class:`StreamContext` for a raw stream handle (an ``int`` or ``ctypes.c_void_p``,
    such as a ``cudaStream_t``); a ``ValueError`` for anything else."""
    return StreamContext(device, stream)


def get_raw_stream(device: Any) -> int:
    """The calling thread's current stream on ``device`` (0: the default stream)."""
    return _device(device).get_raw_stream()


class _TorchStreamContext(StreamContext):
    """Enters a torch stream context (when given), then makes torch's current CUDA stream ours
    for the block."""

    def __init__(self, context: Any) -> None:
        self.context = context
        self._previous = []

    def __enter__(self) -> StreamContext:
        torch: Any = importlib.import_module("torch")
        if self.context is not None:
            self.context.__enter__()
        stream = torch.cuda.current_stream()
        self.device = _native.Device("cuda", stream.device.index or 0)
        self.stream = int(stream.cuda_stream)
        return super().__enter__()

    def __exit__(self, *exc_info: Any) -> None:
        super().__exit__(*exc_info)
        if self.context is not None:
            self.context.__exit__(*exc_info)


def use_torch_stream(context: Any = None) -> StreamContext:
    """Runs kernels on PyTorch's current CUDA stream: with no argument, the stream current when
    the block is entered; with a ``torch.cuda.stream(s)`` or ``torch.cuda.graph(g)`` context,
    that context is entered too and its stream used. An ``ImportError`` without torch."""
    try:
        importlib.import_module("torch")
    except ImportError as err:
        raise ImportError(
            "use_torch_stream needs PyTorch (pip install torch); use_raw_stream takes a raw "
            "stream handle instead"
        ) from err
    return _TorchStreamContext(context)
