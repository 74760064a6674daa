"""The DLPack C exchange API both ways, against a CPython extension built by the test with gcc
(``dlpack_exchange_ext.c``): a producer whose ``__dlpack__`` raises, so imports that work went
through its table, and a consumer of ``tvm.ffi.Tensor``'s own table. Also the stream contexts
that set the stream kernels read. torch's table is checked too when torch is installed."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import tvm
from tvm.support import libinfo

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def ext(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    out = tmp_path_factory.mktemp("dlpack_exchange")
    target = out / f"dlpack_exchange_ext{sysconfig.get_config_var('EXT_SUFFIX')}"
    includes = [f"-I{sysconfig.get_paths()['include']}"]
    includes += [f"-I{path}" for path in libinfo.find_include_path()]
    command = ["gcc", "-shared", "-fPIC", "-O1", *includes, "-o", str(target)]
    result = subprocess.run(
        [*command, str(HERE / "dlpack_exchange_ext.c")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    spec = importlib.util.spec_from_file_location("dlpack_exchange_ext", target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["dlpack_exchange_ext"] = module
    return module


def test_from_dlpack_imports_through_the_producers_table(ext: ModuleType):
    buf = ext.Buf(4)
    before = ext.exports()
    tensor = tvm.ffi.from_dlpack(buf)
    assert ext.exports() == before + 1 and tensor.shape == (4,)
    buf.set(2, 42.0)  # shared memory, no copy
    assert np.from_dlpack(tensor).tolist() == [0.0, 1.0, 42.0, 3.0]
    del tensor
    assert ext.live() == 0


def test_a_type_without_the_table_goes_through_dlpack(ext: ModuleType):
    plain = ext.PlainBuf(3)
    plain.set(0, 5.0)
    assert np.from_dlpack(tvm.ffi.from_dlpack(plain)).tolist() == [5.0, 1.0, 2.0]
    assert ext.live() == 0


def test_arguments_convert_through_the_producers_table(ext: ModuleType):
    @tvm.register_func("testing.exchange_total", override=True)
    def total(t):
        return float(np.from_dlpack(t).sum())

    buf = ext.Buf(5)
    before = ext.exports()
    assert tvm.get_global_func("testing.exchange_total")(buf) == 10.0
    assert ext.exports() == before + 1 and ext.live() == 0


def test_calls_run_on_the_producers_stream_for_a_tensor_off_the_cpu(ext: ModuleType):
    """ext_dev is the testing library's simulated device; the producer's stream for index 0 is
    0x5678. CPU tensors leave the stream alone."""
    ext_dev = tvm.device("ext_dev", 0)

    @tvm.register_func("testing.exchange_stream_seen", override=True)
    def stream_seen(t):
        return tvm.ffi.get_raw_stream(ext_dev)

    seen = tvm.get_global_func("testing.exchange_stream_seen")
    assert seen(ext.Buf(2, ext_dev.device_type)) == 0x5678
    assert tvm.ffi.get_raw_stream(ext_dev) == 0, "the stream before the call is back"
    assert seen(ext.Buf(2)) == 0
    assert ext.live() == 0


def test_a_failed_export_and_a_failed_requirement_raise_and_release(ext: ModuleType):
    ext.fail_next()
    with pytest.raises(ValueError, match="Buf refused to export"):
        tvm.ffi.from_dlpack(ext.Buf(2))
    # Alignment beyond the buffer's: the managed tensor is released by its deleter.
    with pytest.raises(ValueError, match="align"):
        tvm.ffi.from_dlpack(ext.Buf(3), require_alignment=1 << 20)
    assert ext.live() == 0


def test_the_table_can_be_turned_off(ext: ModuleType, tmp_path: Path):
    program = textwrap.dedent(
        f"""
        import importlib.util, pytest, tvm
        spec = importlib.util.spec_from_file_location("dlpack_exchange_ext", {ext.__file__!r})
        ext = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(ext)
        with pytest.raises(RuntimeError, match="must not be called"):
            tvm.ffi.from_dlpack(ext.Buf(2))
        """
    )
    env = {**os.environ, "TVM_FFI_SKIP_DLPACK_C_EXCHANGE_API": "1"}
    result = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True)
    assert result.returncode == 0, result.stderr.decode()


def test_tvm_tensors_offer_their_table(ext: ModuleType):
    x = np.arange(6, dtype="float32").reshape(2, 3)
    tensor = tvm.ffi.from_dlpack(x)
    shape, code, bits, first = ext.consume(tensor)
    assert (shape, code, bits, first) == ((2, 3), 2, 32, 0.0)
    shape, address = ext.view(tensor)
    assert shape == (2, 3) and address == x.ctypes.data
    again = ext.roundtrip(tensor)
    assert isinstance(again, tvm.ffi.Tensor) and again is not tensor
    x[0, 0] = 7.0
    assert np.from_dlpack(again)[0, 0] == 7.0


def test_the_allocator_makes_tensors_on_the_runtimes_devices(ext: ModuleType):
    made = ext.allocate(tvm.ffi.Tensor, (3, 4), 1)
    assert isinstance(made, tvm.ffi.Tensor) and made.shape == (3, 4)
    assert str(made.dtype) == "float32" and made.device == tvm.cpu(0)
    with pytest.raises(RuntimeError, match="99"):
        ext.allocate(tvm.ffi.Tensor, (2,), 99)


def test_the_table_refuses_null_pointers(ext: ModuleType):
    calls = ext.null_calls(tvm.ffi.Tensor)
    allocated, error, wrapped, exported, error_type = calls[:5]
    assert allocated == -1 and error.startswith("ValueError: ") and "NULL" in error
    assert wrapped == -1 and exported == -1 and error_type == "ValueError"
    negative, negative_error, shapeless, shapeless_error = calls[5:]
    assert negative == -1 and negative_error == "ValueError: the prototype has -1 dimensions"
    assert shapeless == -1 and "a NULL shape" in shapeless_error


def test_integer_tables_are_trusted_from_torch_only(ext: ModuleType):
    """An integer `__c_dlpack_exchange_api__` is an address the runtime would read: a class that
    is not torch's gets the `__dlpack__` path, whatever integer it holds."""

    class Pretender:
        __c_dlpack_exchange_api__ = 1

        def __init__(self) -> None:
            self.array = np.arange(3, dtype="float32")

        def __dlpack__(self, *args, **kwargs):
            return self.array.__dlpack__(*args, **kwargs)

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    assert np.from_dlpack(tvm.ffi.from_dlpack(Pretender())).tolist() == [0.0, 1.0, 2.0]


def test_the_table_refuses_foreign_objects(ext: ModuleType):
    class NotATensor:
        __dlpack_c_exchange_api__ = tvm.ffi.Tensor.__dlpack_c_exchange_api__

    with pytest.raises(TypeError, match=r"takes a tvm\.ffi\.Tensor, got NotATensor"):
        ext.consume(NotATensor())


def test_streams_set_in_a_context_are_what_kernels_and_the_table_see(ext: ModuleType):
    device = tvm.device("ext_dev", 0)
    assert tvm.ffi.get_raw_stream(device) == 0
    stream = device.create_raw_stream()
    try:
        with tvm.ffi.use_raw_stream(device, stream):
            assert tvm.ffi.get_raw_stream(device) == stream
            assert ext.stream(tvm.ffi.Tensor, device.device_type, 0) == stream
        assert tvm.ffi.get_raw_stream(device) == 0
    finally:
        device.free_raw_stream(stream)
    with pytest.raises(ValueError, match="use_torch_stream"):
        tvm.ffi.use_raw_stream(device, "stream")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="below 2\\*\\*64"):
        tvm.ffi.use_raw_stream(device, 1 << 64)
    with pytest.raises(ValueError, match="-5"):
        tvm.ffi.StreamContext(device, -5)
    with pytest.raises(RuntimeError, match="without a matching __enter__"):
        tvm.ffi.StreamContext(device, 0).__exit__(None, None, None)


def test_use_torch_stream_needs_torch():
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed; this checks the message without it")
    with pytest.raises(ImportError, match="needs PyTorch"):
        tvm.ffi.use_torch_stream()


def test_torch_tensors_import_through_torchs_table():
    torch = pytest.importorskip(
        "torch", reason="torch is not installed (its PyPI wheel brings CUDA libraries, GBs)"
    )
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip(f"torch {torch.__version__} has no __dlpack_c_exchange_api__")
    t = torch.arange(4, dtype=torch.float32)
    tensor = tvm.ffi.from_dlpack(t)
    t[1] = 9.0
    assert np.from_dlpack(tensor).tolist() == [0.0, 9.0, 2.0, 3.0]
