"""The ROCm backend from Python, against the fake HIP runtime
``crates/device-kit/fake/libhip_fake.c`` (over the host-memory GPU of the same folder).

HIP is opened once per process (``TVM_ROCM_DRIVER``, read on first use), so each test runs its
checks in a fresh interpreter with the environment it needs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fake_gpu import build_fake_backend
from fake_gpu import run_python as run_with_env

#: A code object stand-in the fake reads: each `.entry name(` is a kernel of its kernels library.
# NUL-terminated: the fake reads its stand-in code object as a C string.
HSACO = "amdgcn-amd-amdhsa--gfx90a\n.entry add_one(\n\0"


@pytest.fixture(scope="module")
def fake_hip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fake HIP runtime and its kernels library, built with gcc, with a module next to it."""
    out = tmp_path_factory.mktemp("fake-rocm")
    return build_fake_backend(out, "libhip_fake.c", "libamdhip64_fake.so", "kernels.hsaco", HSACO)


def run_python(code: str, library: str | Path) -> None:
    """Runs ``code`` in a fresh interpreter whose HIP runtime is ``library``."""
    run_with_env(code, {"TVM_ROCM_DRIVER": str(library)})


def test_without_hip_rocm_is_absent_and_allocating_names_the_library():
    run_python(
        """
        import pytest, tvm
        assert not tvm.rocm(0).exist
        with pytest.raises(ValueError, match="HIP runtime not found: /nonexistent/libamdhip64.so"):
            tvm.runtime.empty((2,), "float32", tvm.rocm(0))
        assert tvm.runtime.tensor([1.0, 2.0]).numpy().tolist() == [1.0, 2.0]
        """,
        "/nonexistent/libamdhip64.so",
    )


def test_tensors_copies_and_device_attributes(fake_hip: Path):
    run_python(
        """
        import numpy as np, pytest, tvm
        dev = tvm.rocm(0)
        assert dev.exist and tvm.rocm(1).exist and not tvm.rocm(2).exist
        assert dev.gcn_arch == "gfx90a" and dev.compute_version == "9.0"
        assert dev.multi_processor_count == 104 and tvm.rocm(1).multi_processor_count == 105
        assert dev.device_name == "Fake AMD Instinct 0"
        assert dev.warp_size == 64 and dev.max_threads_per_block == 1024
        assert dev.max_shared_memory_per_block == 64 << 10
        assert dev.total_global_memory == 1 << 30
        x = np.arange(12, dtype="float32").reshape(3, 4)
        t = tvm.runtime.tensor(x, dev)
        assert t.device == dev and t.__dlpack_device__() == (10, 0)
        np.testing.assert_array_equal(t.numpy(), x)
        other = t.copyto(tvm.rocm(1))
        np.testing.assert_array_equal(other.numpy(), x)
        pinned = t.copyto(tvm.device("rocm_host", 0))
        np.testing.assert_array_equal(pinned.numpy(), x)
        with pytest.raises(ValueError, match="rocm:2 is out of range"):
            tvm.runtime.empty((2,), "float32", tvm.rocm(2))
        """,
        fake_hip,
    )


def test_kernel_from_an_hsaco_file_with_numpy_data(fake_hip: Path):
    run_python(
        f"""
        import numpy as np, pytest, tvm
        mod = tvm.ffi.load_module({str(fake_hip.parent / "kernels.hsaco")!r})
        assert mod.kind == "hip"
        x = np.arange(10, dtype="float32")
        t = tvm.runtime.tensor(x, tvm.rocm(1))
        mod["add_one"](t, 10, 3, 4)
        np.testing.assert_array_equal(t.numpy(), x + 1)
        with pytest.raises(ValueError, match="argument 0 is a tensor on cpu:0"):
            mod["add_one"](tvm.runtime.tensor(x), 10, 3, 4)
        with pytest.raises(TypeError, match="takes 4 arguments"):
            mod["add_one"](t, 10)
        """,
        fake_hip,
    )


def test_libinfo_reports_the_rocm_backend_of_this_build():
    import tvm

    assert tvm.support.libinfo()["USE_ROCM"] == "ON"
