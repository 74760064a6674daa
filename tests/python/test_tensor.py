"""Tensors and DLPack, with numpy as the producer and consumer (issue 3, §7)."""

import ctypes
import gc
import sys

import pytest

import tvm
from tvm import ffi

np = pytest.importorskip("numpy")

#: Skips a test that writes through an array numpy imported by DLPack: numpy before 2.1 (the last
#: numpy for Python 3.9) marks every array it imports that way read-only.
needs_writable_dlpack_imports = pytest.mark.skipif(
    tuple(int(part) for part in np.__version__.split(".")[:2]) < (2, 1),
    reason="numpy before 2.1 imports every DLPack capsule read-only",
)

echo = tvm.get_global_func("testing.echo")

K_DL_CPU = 1
K_DL_BFLOAT = 4


# ---- DLPack structures, to look inside capsules ----------------------------------------------


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


DLPACK_FLAG_READ_ONLY = 1

_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def capsule_name(capsule) -> str:
    return _capsule_name(capsule).decode()


def legacy_struct(capsule) -> DLManagedTensor:
    return DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor"))


def versioned_struct(capsule) -> DLManagedTensorVersioned:
    return DLManagedTensorVersioned.from_address(_capsule_pointer(capsule, b"dltensor_versioned"))


# ---- sharing memory --------------------------------------------------------------------------


@needs_writable_dlpack_imports
def test_from_dlpack_shares_memory_both_ways():
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensor = ffi.from_dlpack(array)
    assert isinstance(tensor, ffi.Tensor)
    assert tensor.data_ptr == array.ctypes.data
    view = tensor.numpy()
    view[0, 0] = 100.0
    assert array[0, 0] == 100.0
    array[2, 3] = -1.0
    assert view[2, 3] == -1.0
    assert np.shares_memory(view, array)


@needs_writable_dlpack_imports
def test_numpy_from_dlpack_of_a_tensor_shares_memory():
    array = np.zeros((2, 5), dtype=np.int64)
    tensor = ffi.from_dlpack(array)
    consumer = np.from_dlpack(tensor)
    assert np.shares_memory(consumer, array)
    consumer[1, 4] = 77
    assert array[1, 4] == 77
    assert consumer.shape == (2, 5)
    assert consumer.dtype == np.int64


def test_tensor_keeps_the_producer_memory_alive():
    array = np.arange(1000, dtype=np.float64)
    tensor = ffi.from_dlpack(array)
    del array
    gc.collect()
    np.testing.assert_array_equal(tensor.numpy(), np.arange(1000, dtype=np.float64))


def test_tensor_of_a_numpy_array_holds_one_reference_until_it_dies():
    array = np.arange(8, dtype=np.int32)
    before = sys.getrefcount(array)
    tensor = ffi.from_dlpack(array)
    assert sys.getrefcount(array) == before + 1
    del tensor
    gc.collect()
    assert sys.getrefcount(array) == before


def test_strided_tensor_of_a_numpy_array_keeps_its_shape_after_the_array_is_gone():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    expected = base[:, ::2].copy()
    tensor = ffi.from_dlpack(base[:, ::2])
    del base
    gc.collect()
    assert tensor.shape == (4, 3)
    assert tensor.strides == (6, 2)
    np.testing.assert_array_equal(np.from_dlpack(tensor), expected)


def test_numpy_view_keeps_the_tensor_alive():
    view = ffi.from_dlpack(np.arange(16, dtype=np.int32)).numpy()
    gc.collect()
    np.testing.assert_array_equal(view, np.arange(16, dtype=np.int32))


def test_numpy_array_passed_to_native_code_becomes_a_tensor():
    array = np.ones((4, 2), dtype=np.float32)
    result = echo(array)
    assert isinstance(result, ffi.Tensor)
    assert result.shape == (4, 2)
    assert result.data_ptr == array.ctypes.data


@needs_writable_dlpack_imports
def test_numpy_array_passed_to_a_callback_arrives_as_a_shared_tensor():
    array = np.zeros(3, dtype=np.float32)

    def callback(tensor):
        tensor.numpy()[1] = 5.0
        return tensor.shape

    assert tvm.get_global_func("testing.apply")(callback, array) == (3,)
    assert array[1] == 5.0


def test_tensor_passes_through_native_code_as_the_same_tensor():
    tensor = ffi.from_dlpack(np.arange(3, dtype=np.int8))
    assert echo(tensor).same_as(tensor)
    assert ffi.from_dlpack(tensor).data_ptr == tensor.data_ptr


def test_tensor_inside_containers():
    array = np.arange(4, dtype=np.int16)
    result = echo([array, {"t": array}])
    assert isinstance(result[0], ffi.Tensor)
    assert isinstance(result[1]["t"], ffi.Tensor)
    assert result[0].data_ptr == array.ctypes.data


# ---- read-only producers ---------------------------------------------------------------------


def read_only_array():
    array = np.arange(6, dtype=np.float64)
    array.flags.writeable = False
    return array


@needs_writable_dlpack_imports
def test_read_only_numpy_stays_read_only_after_a_round_trip():
    array = read_only_array()
    tensor = ffi.from_dlpack(array)
    back = np.from_dlpack(tensor)
    assert not back.flags.writeable
    with pytest.raises(ValueError):
        back[0] = 1.0
    assert not tensor.numpy().flags.writeable
    np.testing.assert_array_equal(back, array)


def test_read_only_tensor_exports_the_read_only_flag():
    tensor = ffi.from_dlpack(read_only_array())
    capsule = tensor.__dlpack__(max_version=(1, 0))
    assert versioned_struct(capsule).flags & DLPACK_FLAG_READ_ONLY


def test_read_only_tensor_refuses_a_legacy_export():
    tensor = ffi.from_dlpack(read_only_array())
    with pytest.raises(BufferError):
        tensor.__dlpack__()


def test_writable_tensor_exports_without_the_read_only_flag():
    tensor = ffi.from_dlpack(np.zeros(2))
    capsule = tensor.__dlpack__(max_version=(1, 0))
    assert not versioned_struct(capsule).flags & DLPACK_FLAG_READ_ONLY


# ---- the DLPack protocol of Tensor -----------------------------------------------------------


@pytest.mark.parametrize("max_version", [(1, 0), (1, 1), (2, 0)])
def test_dlpack_with_max_version_1_or_later_gives_a_versioned_capsule(max_version):
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    tensor = ffi.from_dlpack(array)
    capsule = tensor.__dlpack__(max_version=max_version)
    assert capsule_name(capsule) == "dltensor_versioned"
    managed = versioned_struct(capsule)
    assert managed.version.major == 1
    dl = managed.dl_tensor
    assert dl.data + dl.byte_offset == array.ctypes.data
    assert dl.ndim == 2
    assert [dl.shape[0], dl.shape[1]] == [2, 3]
    assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == (2, 32, 1)
    assert (dl.device.device_type, dl.device.device_id) == (K_DL_CPU, 0)


@pytest.mark.parametrize("max_version", [None, (0, 8)])
def test_dlpack_without_version_1_gives_a_legacy_capsule(max_version):
    array = np.arange(6, dtype=np.int32)
    tensor = ffi.from_dlpack(array)
    if max_version is None:
        capsule = tensor.__dlpack__()
    else:
        capsule = tensor.__dlpack__(max_version=max_version)
    assert capsule_name(capsule) == "dltensor"
    dl = legacy_struct(capsule).dl_tensor
    assert dl.data + dl.byte_offset == array.ctypes.data
    assert (dl.dtype.code, dl.dtype.bits) == (0, 32)


def test_unconsumed_capsules_are_released():
    use_count = tvm.get_global_func("testing.object_use_count")
    tensor = ffi.from_dlpack(np.arange(4.0))
    before = use_count(tensor)
    capsules = [tensor.__dlpack__(max_version=(1, 0)), tensor.__dlpack__()]
    assert use_count(tensor) > before  # each capsule keeps the tensor alive
    del capsules
    for _ in range(200):
        tensor.__dlpack__(max_version=(1, 0))
        tensor.__dlpack__()
    gc.collect()
    assert use_count(tensor) == before


def test_capsule_imports_once():
    tensor = ffi.from_dlpack(np.arange(3.0))
    capsule = tensor.__dlpack__(max_version=(1, 0))
    imported = ffi.from_dlpack(capsule)
    assert imported.data_ptr == tensor.data_ptr
    assert capsule_name(capsule) == "used_dltensor_versioned"
    with pytest.raises(TypeError):
        ffi.from_dlpack(capsule)


def test_dlpack_device():
    tensor = ffi.from_dlpack(np.zeros(3))
    assert tensor.__dlpack_device__() == (K_DL_CPU, 0)
    assert tensor.device == tvm.cpu(0)


def test_dlpack_copy_true_is_buffer_error():
    tensor = ffi.from_dlpack(np.zeros(3))
    with pytest.raises(BufferError):
        tensor.__dlpack__(max_version=(1, 0), copy=True)


def test_dlpack_to_another_device_is_buffer_error():
    tensor = ffi.from_dlpack(np.zeros(3))
    with pytest.raises(BufferError):
        tensor.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
    capsule = tensor.__dlpack__(max_version=(1, 0), dl_device=(K_DL_CPU, 0), copy=False)
    assert capsule_name(capsule) == "dltensor_versioned"


# ---- attributes ------------------------------------------------------------------------------


def test_shape_dtype_device_strides_ndim():
    array = np.zeros((2, 3, 4), dtype=np.float64)
    tensor = ffi.from_dlpack(array)
    assert tensor.shape == (2, 3, 4)
    assert tensor.ndim == 3
    assert tensor.dtype == "float64"
    assert isinstance(tensor.dtype, ffi.dtype)
    assert isinstance(tensor.device, ffi.Device)
    assert tensor.device == tvm.cpu()
    assert tensor.strides == (12, 4, 1)


def test_zero_dimensional_and_empty_tensors():
    scalar = ffi.from_dlpack(np.array(3.5))
    assert scalar.shape == ()
    assert scalar.ndim == 0
    assert scalar.numpy() == 3.5
    empty = ffi.from_dlpack(np.zeros((0, 4), dtype=np.int32))
    assert empty.shape == (0, 4)
    assert empty.numpy().shape == (0, 4)


def test_repr_is_readable():
    text = repr(ffi.from_dlpack(np.zeros((2, 3), dtype=np.int8)))
    assert "int8" in text
    assert "2, 3" in text
    assert "cpu" in text


@pytest.mark.parametrize(
    ("np_dtype", "name", "bits"),
    [
        (np.bool_, "bool", 8),
        (np.int8, "int8", 8),
        (np.uint8, "uint8", 8),
        (np.int16, "int16", 16),
        (np.int32, "int32", 32),
        (np.int64, "int64", 64),
        (np.uint64, "uint64", 64),
        (np.float16, "float16", 16),
        (np.float32, "float32", 32),
        (np.float64, "float64", 64),
        (np.complex64, "complex64", 64),
    ],
)
def test_dtypes(np_dtype, name, bits):
    array = (np.arange(6) % 2).astype(np_dtype)
    tensor = ffi.from_dlpack(array)
    assert tensor.dtype == name
    assert tensor.dtype.bits == bits
    back = tensor.numpy()
    assert back.dtype == np.dtype(np_dtype)
    np.testing.assert_array_equal(back, array)


def test_float16_values_survive():
    array = np.array([0.5, -2.0, 65504.0, np.inf], dtype=np.float16)
    np.testing.assert_array_equal(ffi.from_dlpack(array).numpy(), array)


def test_bool_values_survive():
    array = np.array([True, False, False, True])
    back = ffi.from_dlpack(array).numpy()
    assert back.dtype == np.bool_
    assert back.tolist() == [True, False, False, True]


def test_bfloat16_tensor_from_a_producer():
    # numpy has no bfloat16: relabel a legacy capsule of uint16 data as bfloat16 (code 4).
    bits = np.array([0x3F80, 0x4000, 0xC040], dtype=np.uint16)  # 1.0, 2.0, -3.0 as bfloat16
    capsule = bits.__dlpack__()
    legacy_struct(capsule).dl_tensor.dtype.code = K_DL_BFLOAT
    tensor = ffi.from_dlpack(capsule)
    assert tensor.dtype == "bfloat16"
    assert (tensor.dtype.type_code, tensor.dtype.bits, tensor.dtype.lanes) == (4, 16, 1)
    assert tensor.dtype.itemsize == 2
    assert tensor.shape == (3,)
    assert tensor.data_ptr == bits.ctypes.data
    exported = tensor.__dlpack__(max_version=(1, 0))
    dl = versioned_struct(exported).dl_tensor
    assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == (K_DL_BFLOAT, 16, 1)


def test_ml_dtypes_arrays_cross_without_copies():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed")
    for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        values = np.array([1.0, 2.0, -3.0, 0.5], dtype=getattr(ml_dtypes, name))
        tensor = ffi.from_dlpack(values)
        assert tensor.dtype == name and tensor.shape == (4,)
        assert tensor.data_ptr == values.ctypes.data  # shared, not copied
        back = tensor.numpy()
        assert back.dtype == values.dtype and back.ctypes.data == values.ctypes.data
        np.testing.assert_array_equal(back.astype("float32"), [1.0, 2.0, -3.0, 0.5])
        # A copy through the runtime keeps the type and the bits.
        copied = tvm.runtime.tensor(values)
        assert copied.dtype == name and copied.data_ptr != values.ctypes.data
        np.testing.assert_array_equal(copied.numpy().view("uint8"), values.view("uint8"))
    strided = np.arange(8, dtype="float32").astype(ml_dtypes.bfloat16)[::2]
    np.testing.assert_array_equal(ffi.from_dlpack(strided).numpy().astype("float32"), [0, 2, 4, 6])
    # Types whose values do not fill their bytes (4-bit floats) are refused by name.
    packed = np.zeros(2, dtype=ml_dtypes.float4_e2m1fn)
    with pytest.raises(TypeError, match="float4_e2m1fn"):
        ffi.from_dlpack(packed)


def test_ml_dtypes_tensors_need_ml_dtypes_for_numpy(monkeypatch):
    tensor = tvm.runtime.empty((2,), "bfloat16")
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)
    with pytest.raises(TypeError, match=r"bfloat16 tensor .*pip install ml_dtypes"):
        tensor.numpy()


# ---- strides ---------------------------------------------------------------------------------


@needs_writable_dlpack_imports
@pytest.mark.parametrize(
    "make_view",
    [
        lambda a: a[:, ::2],
        lambda a: a.T,
        lambda a: a[1:, 1:3],
        lambda a: a[::2, ::3],
    ],
    ids=["every-other-column", "transpose", "window", "two-steps"],
)
def test_non_contiguous_views_keep_their_strides(make_view):
    base = np.arange(48, dtype=np.float32).reshape(6, 8)
    view = make_view(base)
    tensor = ffi.from_dlpack(view)
    itemsize = view.itemsize
    assert tensor.shape == view.shape
    assert tensor.strides == tuple(s // itemsize for s in view.strides)
    assert tensor.data_ptr == view.ctypes.data
    back = tensor.numpy()
    assert back.strides == view.strides
    np.testing.assert_array_equal(back, view)
    assert np.shares_memory(back, base)
    back[0, 0] = -7.0
    assert view[0, 0] == -7.0


# ---- bad producers ---------------------------------------------------------------------------


class RaisingProducer:
    def __init__(self, exc):
        self.exc = exc

    def __dlpack__(self, **kwargs):
        raise self.exc

    def __dlpack_device__(self):
        return (K_DL_CPU, 0)


@pytest.mark.parametrize(
    "exc", [KeyError("nope"), BufferError("cannot export"), ValueError("bad"), TypeError("tt")]
)
def test_producer_that_raises_gives_the_same_exception_class(exc):
    with pytest.raises(type(exc)) as info:
        ffi.from_dlpack(RaisingProducer(exc))
    assert type(info.value) is type(exc)
    with pytest.raises(type(exc)):
        echo(RaisingProducer(exc))


def test_producer_returning_a_non_capsule_is_type_error():
    class NotACapsule:
        def __dlpack__(self, **kwargs):
            return 42

    with pytest.raises(TypeError):
        ffi.from_dlpack(NotACapsule())


def test_from_dlpack_of_a_non_producer_is_type_error_naming_it():
    with pytest.raises(TypeError, match="12345"):
        ffi.from_dlpack(12345)


def test_legacy_only_producer_is_accepted():
    array = np.arange(5, dtype=np.int32)

    class LegacyOnly:
        def __dlpack__(self, stream=None):
            return array.__dlpack__()

        def __dlpack_device__(self):
            return (K_DL_CPU, 0)

    tensor = ffi.from_dlpack(LegacyOnly())
    assert tensor.data_ptr == array.ctypes.data
    np.testing.assert_array_equal(tensor.numpy(), array)


def test_copyto_none_is_a_type_error():
    t = tvm.runtime.tensor(np.arange(3, dtype="float32"))
    with pytest.raises(TypeError, match="copyto needs a target"):
        t.copyto(None)
