"""Read-only memory stays read-only (issue 31): a tensor imported from a read-only numpy array,
memmap or DLPack export flagged read-only keeps the mark, passes it on in its own versioned
exports, and refuses every write (a copy into it from any device, the copy global) with numpy's
``ValueError: assignment destination is read-only``; reading it works as before."""

import os

import pytest

import tvm
from tvm.ffi import from_dlpack
from tvm.runtime import cpu, ext_dev, tensor

np = pytest.importorskip("numpy")

from isolated import run_isolated  # noqa: E402 - after numpy's skip
from numpy_layouts import exports_read_only  # noqa: E402

READ_ONLY = "assignment destination is read-only: Tensor"


def read_only_array() -> "np.ndarray":
    array = np.arange(4.0)
    array.setflags(write=False)
    return array


def test_every_write_into_a_read_only_import_is_refused_and_the_memory_kept():
    array = read_only_array()
    t = from_dlpack(array)
    copy = tvm.get_global_func("runtime.TensorCopyFromTo")
    writes = [
        lambda: t.copyfrom(np.ones(4)),
        lambda: t.copyfrom(tensor(np.ones(4))),
        lambda: tensor(np.ones(4)).copyto(t),
        lambda: tensor(np.ones(4), device=ext_dev(0)).copyto(t),  # a device-to-host copy
        lambda: copy(tensor(np.ones(4)), t),
    ]
    for write in writes:
        with pytest.raises(ValueError, match=READ_ONLY) as raised:
            write()
        assert "shape=[4], dtype=float64, device=cpu:0" in str(raised.value)
    assert array.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_read_only_import_is_read_as_before_and_exports_its_mark():
    array = read_only_array()
    t = from_dlpack(array)
    assert t.data_ptr == array.ctypes.data
    assert t.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    shared = np.asarray(t)
    assert not shared.flags.writeable and shared.ctypes.data == array.ctypes.data
    assert exports_read_only(t)
    # Copies out are new, writable tensors.
    for target in (cpu(), ext_dev(0)):
        out = t.copyto(target)
        assert out.copyfrom(np.full(4, 7.0)).numpy().tolist() == [7.0] * 4
    into = tensor(np.zeros(4))
    t.copyto(into)
    assert into.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    # Tensors that share its memory through DLPack are read-only as well.
    again = from_dlpack(t.__dlpack__(max_version=(1, 0)))
    with pytest.raises(ValueError, match=READ_ONLY):
        again.copyfrom(np.ones(4))
    # A writable array stays writable.
    writable = np.zeros(4)
    from_dlpack(writable).copyfrom(np.ones(4))
    assert writable.tolist() == [1.0] * 4


def test_a_versioned_capsule_flagged_read_only_imports_read_only():
    capsule = read_only_array().__dlpack__(max_version=(1, 0))
    t = from_dlpack(capsule)
    assert exports_read_only(t)
    with pytest.raises(ValueError, match=READ_ONLY):
        t.copyfrom(np.ones(4))


def test_a_copy_into_a_read_only_memmap_is_an_error_not_a_crash(tmp_path):
    # Without the mark the copy wrote into a page mapped read-only: SIGSEGV.
    path = os.fspath(tmp_path / "data.bin")
    np.arange(8.0).tofile(path)
    output = run_isolated(
        f"""
        import numpy as np
        from tvm.ffi import from_dlpack
        mapped = np.memmap({path!r}, dtype="float64", mode="r", shape=(8,))
        t = from_dlpack(mapped)
        try:
            t.copyfrom(np.ones(8))
        except ValueError as err:
            print(str(err).split(":")[0])
        print(t.numpy()[:3].tolist())
        """
    )
    assert output.splitlines() == ["assignment destination is read-only", "[0.0, 1.0, 2.0]"]


def test_an_array_read_through_the_buffer_protocol_keeps_its_mark():
    # An unknown numpy version is read through the buffer protocol, whose readonly flag counts.
    output = run_isolated(
        """
        import numpy as np
        np.__version__ = "3.0.0"
        from tvm import _native
        from tvm.ffi import from_dlpack
        array = np.arange(4.0)
        array.setflags(write=False)
        t = from_dlpack(array)
        try:
            t.copyfrom(np.ones(4))
        except ValueError as err:
            print(str(err).split(":")[0])
        print(_native._numpy_arrays_read_directly(), array.tolist())
        """
    )
    assert output.splitlines() == [
        "assignment destination is read-only",
        "False [0.0, 1.0, 2.0, 3.0]",
    ]
