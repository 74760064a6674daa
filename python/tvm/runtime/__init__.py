"""``tvm.runtime``: devices and tensors."""

from __future__ import annotations

from ..ffi import Device, Module, Tensor, device, from_dlpack, load_module, system_lib

__all__ = [
    "Device",
    "Module",
    "Tensor",
    "cpu",
    "cuda",
    "device",
    "from_dlpack",
    "load_module",
    "metal",
    "opencl",
    "rocm",
    "system_lib",
    "vulkan",
    "webgpu",
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
