"""A tvm backend used by the tests: builds the example C device backend
(``cpp-abi/examples/device_backend.c``, named by ``TVM_TEST_DEVICE_SOURCE``), loads it with
``tvm.base.load_backend_libs`` and registers it for the DLPack device type ``hexagon`` (16)
through the C table of ``tvm/ffi/extra/device_api.h``."""

import ctypes
import os
import subprocess
from pathlib import Path

#: The DLPack device type the example device takes over.
DEVICE_TYPE = 16

#: The loaded library (ctypes handle), for the tests' counters.
LIBRARY = None


def load() -> None:
    """The entry point: called once by ``import tvm``."""
    global LIBRARY
    import tvm

    source = Path(os.environ["TVM_TEST_DEVICE_SOURCE"])
    target = Path(os.environ["TVM_TEST_BUILD_DIR"]) / "libexample_device.so"
    include = os.environ["TVM_TEST_INCLUDE"]
    compiler = os.environ.get("CC", "gcc")
    command = [compiler, "-shared", "-fPIC", "-std=c11", f"-I{include}", "-o", str(target)]
    subprocess.run([*command, str(source)], check=True)
    (LIBRARY,) = tvm.base.load_backend_libs([str(target)])
    LIBRARY.example_device_live_allocations.restype = ctypes.c_int64
    if LIBRARY.example_device_register(ctypes.c_int32(DEVICE_TYPE)) != 0:
        raise RuntimeError("example_device_register failed")
