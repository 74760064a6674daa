"""Checks the Vulkan and WebGPU test modules share: whether the backend has a device (the skip
mark), the ``add_one`` kernel's metadata and run, the DLPack export of device tensors, and the
bad launches every kernel backend refuses the same way."""

import json
from pathlib import Path

import numpy as np
import pytest

import tvm
from tvm.runtime import empty, tensor

ADD_ONE = {
    "name": "add_one",
    "arg_types": ["handle", "handle", "int32"],
    "launch_param_tags": ["blockIdx.x", "threadIdx.x"],
}


def skip_without_devices(backend: str, none_listed: str) -> pytest.MarkDecorator:
    """Skips a module when ``runtime.<backend>.device_names`` fails or lists nothing, saying why
    (``none_listed`` when the list is empty)."""
    try:
        names = list(tvm.get_global_func(f"runtime.{backend}.device_names")())
        reason = None if names else none_listed
    except Exception as err:
        reason = str(err)
    return pytest.mark.skipif(reason is not None, reason=f"no {backend} device: {reason}")


def run_add_one(add_one: tvm.ffi.Function, device: tvm.ffi.Device, n: int = 1000) -> None:
    """Runs ``add_one`` on ``n`` values on ``device`` and checks the result."""
    data = np.linspace(-3, 3, n, dtype="float32")
    a = tensor(data, device=device)
    b = empty((n,), "float32", device)
    add_one(a, b, n, (n + 63) // 64, 64)
    np.testing.assert_array_equal(b.numpy(), data + 1)


def write_add_one_metadata(code_path: Path) -> None:
    """Writes the ``.tvm_meta.json`` of ``add_one`` next to its code file."""
    meta = {"tvm_version": "0.1.0", "func_info": {"add_one": ADD_ONE}}
    code_path.with_suffix(".tvm_meta.json").write_text(json.dumps(meta))


def check_dlpack_export(device: tvm.ffi.Device) -> None:
    """A device tensor exports its device through DLPack and comes back as the same tensor."""
    x = tensor(np.arange(5, dtype="int32"), device=device)
    assert x.__dlpack_device__() == (device.device_type, device.device_id)
    back = tvm.ffi.from_dlpack(x)
    assert back.device == device
    np.testing.assert_array_equal(back.numpy(), np.arange(5))


def check_one_queue_streams(device: tvm.ffi.Device, backend: str) -> None:
    """A backend with one queue refuses any other raw stream in ``set_raw_stream`` as its
    ``sync`` does, and the default stream stays current."""
    refused = f"{backend} devices have one queue.*got stream 0x5150"
    for call in (device.set_raw_stream, device.sync):
        with pytest.raises(ValueError, match=refused):
            call(0x5150)
    assert device.set_raw_stream(0) == 0


def check_bad_launches(add_one: tvm.ffi.Function, device: tvm.ffi.Device, backend: str) -> None:
    """The launches every kernel backend refuses, each naming the kernel and the value; the
    kernel runs normally afterwards. ``backend`` is the backend's name in messages."""
    a = tensor(np.zeros(64, "float32"), device=device)
    b = empty((64,), "float32", device)
    on_cpu = tensor(np.zeros(64, "float32"))
    with pytest.raises(ValueError, match="kernel `add_one`: argument 0 is a tensor on cpu:0"):
        add_one(on_cpu, b, 64, 1, 64)
    with pytest.raises(ValueError, match=r"kernel `add_one`: launch argument blockIdx\.x is 0"):
        add_one(a, b, 64, 0, 64)
    with pytest.raises(ValueError, match=r"blockIdx\.x is 4294967296, outside"):
        add_one(a, b, 64, 1 << 32, 64)
    with pytest.raises(ValueError, match=r"threadIdx\.x=128 does not match .*\[64, 1, 1\]"):
        add_one(a, b, 64, 1, 128)
    with pytest.raises(TypeError, match="kernel `add_one` takes 3 arguments and 2 launch"):
        add_one(a, b, 64)
    with pytest.raises(TypeError, match=f"argument 1 must be a {backend} tensor"):
        add_one(a, "b", 64, 1, 64)
    with pytest.raises(ValueError, match=r"argument 2 is 4294967296, outside int32"):
        add_one(a, b, 1 << 32, 1, 64)
    run_add_one(add_one, device)
