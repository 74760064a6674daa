"""The CUDA backend from Python, against the fake driver ``crates/device-kit/fake/libcuda_fake.c``
(over the host-memory GPU of the same folder).

The driver is chosen once per process (``TVM_CUDA_DRIVER``, read on first use), so each test runs
its checks in a fresh interpreter with the environment it needs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fake_gpu import build_fake_backend
from fake_gpu import run_python as run_with_env

PTX = (
    ".version 7.0\n.target sm_52\n.visible .entry add_one(.param .u64 x, .param .u32 n) { ret; }\n"
)


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fake driver and its kernels library, built with gcc."""
    out = tmp_path_factory.mktemp("fake-cuda")
    return build_fake_backend(out, "libcuda_fake.c", "libcuda_fake.so", "kernels.ptx", PTX)


def run_python(code: str, driver: str | Path) -> None:
    """Runs ``code`` in a fresh interpreter whose CUDA driver is ``driver``."""
    run_with_env(code, {"TVM_CUDA_DRIVER": str(driver)})


def test_without_a_driver_cuda_is_absent_and_allocating_names_the_library():
    run_python(
        """
        import pytest, tvm
        assert not tvm.cuda(0).exist
        with pytest.raises(ValueError, match="CUDA driver not found: /nonexistent/libcuda.so.1"):
            tvm.runtime.empty((2,), "float32", tvm.cuda(0))
        assert tvm.runtime.tensor([1.0, 2.0]).numpy().tolist() == [1.0, 2.0]
        """,
        "/nonexistent/libcuda.so.1",
    )


def test_tensors_copies_and_device_attributes(fake_driver: Path):
    run_python(
        """
        import numpy as np, pytest, tvm
        dev = tvm.cuda(0)
        assert dev.exist and tvm.cuda(1).exist and not tvm.cuda(2).exist
        assert dev.compute_version == "9.0"
        assert dev.multi_processor_count == 132
        assert dev.device_name == "Fake CUDA Device 0"
        assert dev.warp_size == 32
        assert dev.total_global_memory == 1 << 30
        x = np.arange(12, dtype="float32").reshape(3, 4)
        t = tvm.runtime.tensor(x, dev)
        assert t.device == dev
        np.testing.assert_array_equal(t.numpy(), x)
        other = t.copyto(tvm.cuda(1))
        np.testing.assert_array_equal(other.numpy(), x)
        pinned = t.copyto(tvm.device("cuda_host", 0))
        np.testing.assert_array_equal(pinned.numpy(), x)
        with pytest.raises(ValueError, match="cuda:2 is out of range"):
            tvm.runtime.empty((2,), "float32", tvm.cuda(2))
        """,
        fake_driver,
    )


def test_kernel_from_a_ptx_file_with_numpy_data(fake_driver: Path):
    run_python(
        f"""
        import numpy as np, pytest, tvm
        mod = tvm.ffi.load_module({str(fake_driver.parent / "kernels.ptx")!r})
        assert mod.kind == "cuda"
        x = np.arange(10, dtype="float32")
        t = tvm.runtime.tensor(x, tvm.cuda(0))
        mod["add_one"](t, 10, 3, 4)
        np.testing.assert_array_equal(t.numpy(), x + 1)
        with pytest.raises(ValueError, match="argument 0 is a tensor on cpu:0"):
            mod["add_one"](tvm.runtime.tensor(x), 10, 3, 4)
        """,
        fake_driver,
    )


def test_dlpack_export_and_the_stream_hand_off(fake_driver: Path):
    run_python(
        f"""
        import numpy as np, tvm
        dev = tvm.cuda(0)
        mod = tvm.ffi.load_module({str(fake_driver.parent / "kernels.ptx")!r})
        t = tvm.runtime.tensor(np.zeros(4, dtype="float32"), dev)
        assert t.__dlpack_device__() == (2, 0)
        producer, consumer = dev.create_raw_stream(), dev.create_raw_stream()
        dev.set_raw_stream(producer)
        mod["add_one"](t, 4, 1, 4)  # queued on the producer's stream
        capsule = t.__dlpack__(stream=consumer)
        assert "dltensor" in repr(capsule)
        # The consumer reads on its own stream: the hand-off made it wait for the kernel.
        dev.set_raw_stream(consumer)
        np.testing.assert_array_equal(t.numpy(), np.ones(4, dtype="float32"))
        dev.set_raw_stream(0)
        dev.free_raw_stream(producer)
        dev.free_raw_stream(consumer)
        """,
        fake_driver,
    )


def test_libinfo_reports_the_cuda_backend_of_this_build():
    import tvm

    assert tvm.support.libinfo()["USE_CUDA"] == "ON"
    assert tvm.support.libinfo()["USE_LLVM"] == "OFF"
