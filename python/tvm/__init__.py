"""``tvm``: the TVM runtime in Rust, for Python.

``tvm.ffi`` passes values, objects, functions and tensors between Python and native code;
``tvm.runtime`` holds devices and tensors; ``tvm.error`` the exception classes.
"""

from __future__ import annotations

# `base` loads the native runtime into the global symbol scope before `_native` is imported.
from . import base  # noqa: F401

# isort: split
from . import _native, backends, error, ffi, runtime, support
from .ffi import get_global_func, register_func, register_object
from .runtime import cpu, cuda, device, metal, opencl, rocm, vulkan, webgpu

__version__: str = _native.__version__

__all__ = [
    "__version__",
    "backends",
    "cpu",
    "cuda",
    "device",
    "error",
    "ffi",
    "get_global_func",
    "metal",
    "opencl",
    "register_func",
    "register_object",
    "rocm",
    "runtime",
    "support",
    "vulkan",
    "webgpu",
]

# Last: extensions see a fully initialized `tvm`.
backends._autoload()
