"""``tvm.runtime``: devices and tensors."""

from __future__ import annotations

from typing import Any

from .. import _native
from ..ffi import Device, Module, Tensor, device, from_dlpack, load_module, system_lib
from ..ffi import dtype as _make_dtype
from .benchmark import BenchmarkResult
from .threading import config_threadpool, context_symbols, num_threads
from .webgpu_async import tensor_to_numpy_async, webgpu_sync_async

__all__ = [
    "BenchmarkResult",
    "Device",
    "Module",
    "Tensor",
    "config_threadpool",
    "context_symbols",
    "cpu",
    "cuda",
    "device",
    "empty",
    "ext_dev",
    "from_dlpack",
    "load_module",
    "metal",
    "num_threads",
    "opencl",
    "rocm",
    "system_lib",
    "tensor",
    "tensor_to_numpy_async",
    "vulkan",
    "webgpu",
    "webgpu_sync_async",
]


def cpu(index: int = 0) -> Device:
    """The host CPU."""
    return Device("cpu", index)


def cuda(index: int = 0) -> Device:
    """An NVIDIA GPU."""
    return Device("cuda", index)


def rocm(index: int = 0) -> Device:
    """An AMD GPU."""
    return Device("rocm", index)


def vulkan(index: int = 0) -> Device:
    """A Vulkan device."""
    return Device("vulkan", index)


def metal(index: int = 0) -> Device:
    """An Apple GPU through Metal."""
    return Device("metal", index)


def webgpu(index: int = 0) -> Device:
    """A WebGPU device."""
    return Device("webgpu", index)


def opencl(index: int = 0) -> Device:
    """An OpenCL device."""
    return Device("opencl", index)


def ext_dev(index: int = 0) -> Device:
    """An extension device (the test device of the runtime's test suites lives here)."""
    return Device("ext_dev", index)


def _dtype_text(value: Any) -> str:
    """A dtype string for a ``tvm.ffi.dtype``, a string, or a numpy dtype or scalar type."""
    if isinstance(value, str):
        return value
    import numpy as np

    return np.dtype(value).name


def empty(shape: Any, dtype: Any = "float32", device: Device | str | None = None) -> Tensor:
    """An uninitialized compact tensor of ``shape`` and ``dtype`` on ``device`` (default: CPU),
    allocated by the device's backend.

    Raises ``ValueError`` for a negative dimension, an unknown device or one that does not
    exist, and ``MemoryError`` when the device cannot hold it.
    """
    return _native.empty(tuple(shape), _make_dtype(_dtype_text(dtype)), device)


def tensor(data: Any, device: Device | str | None = None) -> Tensor:
    """A new tensor on ``device`` (default: CPU) holding a copy of ``data``: anything
    ``numpy.asarray`` accepts, or a DLPack producer on any device."""
    if hasattr(data, "__dlpack__") and not _is_numpy_array(data):
        source = from_dlpack(data)
        return source.copyto(device if device is not None else source.device)
    import numpy as np

    # np.ascontiguousarray would turn a 0-d array into shape (1,); a scalar keeps shape ().
    array = np.asarray(data, order="C")
    result = empty(array.shape, array.dtype, device)
    result.copyfrom(array)
    return result


def _is_numpy_array(value: Any) -> bool:
    return type(value).__module__ == "numpy" and type(value).__name__ == "ndarray"
