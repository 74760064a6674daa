"""Tensors on any device from Python, through the runtime's device registry: the CPU and the
strict simulated device ``ext_dev`` (registered by ``libtvm_ffi_testing.so``, which the conftest
loads), whose memory the host cannot address and whose copies land only when synchronized."""

import gc

import numpy as np
import pytest

import tvm
from tvm.runtime import cpu, empty, ext_dev, tensor


def device_stats() -> dict:
    return dict(tvm.get_global_func("testing.device_stats")())


@pytest.fixture
def no_leaks():
    """Fails the test if it leaves allocations or streams behind on the test device."""
    gc.collect()
    before = device_stats()
    yield
    gc.collect()
    after = device_stats()
    assert after["live_allocations"] == before["live_allocations"], (before, after)
    assert after["live_streams"] == before["live_streams"], (before, after)


def test_devices_report_presence_and_attributes():
    assert cpu().exist and ext_dev(0).exist and ext_dev(1).exist
    assert not ext_dev(2).exist and not cpu(3).exist
    hexagon = tvm.device("hexagon", 0)
    assert not hexagon.exist, "no backend registered: absent, not an error"
    dev = ext_dev(0)
    assert dev.device_name == "tvm test device"
    assert (dev.warp_size, dev.max_threads_per_block, dev.compute_version) == (32, 1024, "1.0")
    assert dev.multi_processor_count == 4 and dev.max_shared_memory_per_block == 48 << 10
    assert dev.total_global_memory >= dev.available_global_memory > 0
    assert dev.gcn_arch is None, "unknown to the backend"
    assert cpu().device_name == "cpu" and cpu().total_global_memory > 0
    with pytest.raises(ValueError, match="ext_dev:2 does not exist"):
        ext_dev(2).warp_size
    with pytest.raises(ValueError, match="no device backend is registered for hexagon:0"):
        hexagon.warp_size


def test_round_trip_through_the_device(no_leaks):
    data = np.arange(12, dtype="float32").reshape(3, 4)
    x = tensor(data, device=ext_dev(0))
    assert x.device == ext_dev(0) and x.shape == (3, 4) and x.dtype == "float32"
    np.testing.assert_array_equal(x.numpy(), data)
    y = x.copyto(ext_dev(1)).copyto("ext_dev:0")
    np.testing.assert_array_equal(np.asarray(y), data)
    # A strided numpy source (a transposed view) copies element by element.
    t = tensor(data.T, device="ext_dev")
    np.testing.assert_array_equal(t.numpy(), data.T)
    into = empty((4, 3), "float32", ext_dev(1))
    assert into.copyfrom(data.T) is into
    np.testing.assert_array_equal(into.copyto(cpu()).numpy(), data.T)
    host = empty((4, 3), np.float32)
    assert t.copyto(host) is host
    np.testing.assert_array_equal(host.numpy(), data.T)
    del x, y, t, into, host


def test_cpu_tensors_are_numpy_arrays():
    data = np.arange(6, dtype="int32").reshape(2, 3)
    t = tensor(data)
    assert t.device == cpu()
    array = np.asarray(t)
    assert array.dtype == np.int32 and array.tolist() == data.tolist()
    array[0, 0] = 99  # np.asarray shares the tensor's memory; tensor() made a copy of data
    assert t.numpy()[0, 0] == 99 and data[0, 0] == 0
    assert np.asarray(t, dtype="float64").dtype == np.float64
    copied = np.array(t, copy=True)
    copied[0, 0] = -1
    assert t.numpy()[0, 0] == 99
    e = empty([2, 2], "float16")
    assert (e.shape, e.dtype, e.device) == ((2, 2), "float16", cpu())


def test_tensor_keeps_the_shape_of_a_scalar_and_copies_strided_data():
    scalar = tensor(np.array(3.5))
    assert (scalar.shape, scalar.numpy().tolist()) == ((), 3.5)
    assert tensor(7).shape == ()
    columns = np.arange(12.0).reshape(3, 4)[:, ::2]  # not C-contiguous: copied compactly
    assert tensor(columns).numpy().tolist() == columns.tolist()


def test_np_asarray_of_a_device_tensor_copies_and_refuses_copy_false(no_leaks):
    x = tensor([1.5, 2.5], device=ext_dev(0))
    assert np.asarray(x).tolist() == [1.5, 2.5]
    with pytest.raises(ValueError, match="copy=False"):
        np.asarray(x, copy=False)
    with pytest.raises(RuntimeError, match="Unsupported device"):
        np.from_dlpack(x)  # numpy cannot read device memory
    del x


def test_streams_from_python(no_leaks):
    dev = ext_dev(1)
    stream = dev.create_raw_stream()
    assert stream != 0
    assert dev.set_raw_stream(stream) == 0
    x = tensor(np.ones(4, "float32"), device=dev)  # copies on the current stream, synchronized
    dev.sync()
    dev.sync(stream)
    assert x.numpy().tolist() == [1.0] * 4
    with pytest.raises(ValueError, match="belongs to"):
        ext_dev(0).sync(stream)
    with pytest.raises(ValueError, match="belongs to"):
        ext_dev(0).set_raw_stream(stream)
    assert dev.set_raw_stream(0) == stream
    dev.free_raw_stream(stream)
    with pytest.raises(ValueError, match="unknown stream"):
        dev.free_raw_stream(stream)
    # __dlpack__ orders a device tensor's pending work before the consumer (stream -1: no order).
    capsule = x.__dlpack__(stream=None, max_version=(1, 3))
    assert type(capsule).__name__ == "PyCapsule"
    x.__dlpack__(stream=-1)
    with pytest.raises(TypeError, match="stream must be an int"):
        x.__dlpack__(stream="now")
    del x, capsule


def test_bad_input_is_named(no_leaks):
    with pytest.raises(ValueError, match="negative dimension -1"):
        empty((2, -1), "float32", ext_dev(0))
    with pytest.raises(ValueError, match="does not exist"):
        empty((2,), "float32", ext_dev(7))
    with pytest.raises(ValueError, match="unknown device type"):
        empty((2,), "float32", "nodevice")
    with pytest.raises(MemoryError, match="cannot allocate"):
        empty((1 << 40,), "float32", ext_dev(0))
    with pytest.raises(ValueError, match="does not fit in memory"):
        empty((1 << 62, 1 << 62), "float32", ext_dev(0))
    a = empty((2, 3), "float32", ext_dev(0))
    with pytest.raises(ValueError, match=r"\[2, 3\].*\[3, 2\]"):
        a.copyto(empty((3, 2), "float32", ext_dev(0)))
    with pytest.raises(ValueError, match="int32"):
        a.copyfrom(np.zeros((2, 3), "int32"))
    with pytest.raises(TypeError, match="dtype must be"):
        tvm._native.empty((2,), 3.5, None)
    del a


def test_the_environment_allocator_reaches_the_test_device(no_leaks):
    # Native code allocating through TVMFFIEnvTensorAlloc (the C API) lands in the registry.
    alloc = tvm.get_global_func("runtime.TensorEmpty")
    t = alloc(tvm.ffi.Shape([3]), tvm.ffi.dtype("int8"), ext_dev(1))
    assert t.device == ext_dev(1) and t.shape == (3,)
    del t


def test_first_non_cpu_device_in_containers(no_leaks):
    """ffi.ContainerFindFirstNonCPUDevice: the first tensor off the CPU, depth first, in order,
    through array/list elements and map/dict values; cpu:0 when there is none."""
    find = tvm.get_global_func("ffi.ContainerFindFirstNonCPUDevice")
    on_cpu = empty((2,), "float32", cpu())
    on_dev1 = empty((2,), "float32", ext_dev(1))
    on_dev0 = empty((2,), "float32", ext_dev(0))
    assert find(on_dev1) == ext_dev(1)
    assert find(on_cpu) == cpu(0)
    assert find([1, "x", on_cpu]) == cpu(0)
    assert find(None) == cpu(0)
    assert find([on_cpu, [[on_dev1]], on_dev0]) == ext_dev(1)
    assert find({"a": on_cpu, "b": (on_dev0,)}) == ext_dev(0)
    assert find(tvm.ffi.Dict({on_dev1: 1})) == cpu(0), "keys are not searched"
    del on_cpu, on_dev1, on_dev0
