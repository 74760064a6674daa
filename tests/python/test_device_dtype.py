"""Devices and data types (issue 3, §3)."""

import pickle

import pytest

import tvm
from tvm import ffi

echo = tvm.get_global_func("testing.echo")

# (constructor, name, DLPack device type code)
BACKENDS = [
    (tvm.cpu, "cpu", 1),
    (tvm.cuda, "cuda", 2),
    (tvm.opencl, "opencl", 4),
    (tvm.vulkan, "vulkan", 7),
    (tvm.metal, "metal", 8),
    (tvm.rocm, "rocm", 10),
    (tvm.webgpu, "webgpu", 15),
]


# ---- Device ----------------------------------------------------------------------------------


def test_cpu_defaults_to_index_zero():
    device = tvm.cpu()
    assert isinstance(device, ffi.Device)
    assert device.device_type == 1
    assert device.device_id == 0
    assert device == tvm.device("cpu", 0) == tvm.device("cpu") == tvm.device("cpu:0")


@pytest.mark.parametrize(("constructor", "name", "code"), BACKENDS, ids=[b[1] for b in BACKENDS])
def test_every_backend_constructor(constructor, name, code):
    for index in (0, 3):
        device = constructor(index)
        assert isinstance(device, ffi.Device)
        assert device.device_type == code
        assert device.device_id == index
        assert device.type_name == name
        assert device == tvm.device(name, index)
        assert device == tvm.device(f"{name}:{index}")
        assert device == ffi.Device(code, index)
        assert str(device) == f"{name}:{index}"
        assert repr(device) == f"device(type='{name}', index={index})"
        assert device.__dlpack_device__() == (code, index)
    assert constructor() == constructor(0)


def test_cuda_one_spelled_every_way():
    expected = tvm.cuda(1)
    assert tvm.device("cuda", 1) == expected
    assert tvm.device("cuda:1") == expected
    assert ffi.device("cuda:1") == expected
    assert tvm.runtime.device("cuda", 1) == expected
    assert ffi.Device(2, 1) == expected
    assert tvm.device(2, 1) == expected


def test_repr_and_str():
    assert repr(tvm.cuda(1)) == "device(type='cuda', index=1)"
    assert str(tvm.cuda(1)) == "cuda:1"
    assert str(tvm.cpu()) == "cpu:0"


def test_equality_and_hash_by_value():
    assert tvm.cuda(1) == tvm.cuda(1)
    assert tvm.cuda(1) != tvm.cuda(0)
    assert tvm.cuda(0) != tvm.cpu(0)
    assert tvm.cuda(0) != "cuda:0"
    assert tvm.cuda(0) != (2, 0)
    assert hash(tvm.device("cuda:1")) == hash(tvm.cuda(1))
    table = {tvm.cuda(1): "gpu1", tvm.cpu(): "host"}
    assert table[tvm.device("cuda", 1)] == "gpu1"
    assert table[tvm.device("cpu")] == "host"
    assert len({tvm.cuda(0), tvm.device("cuda:0"), tvm.cuda(1)}) == 2


def test_device_pickles():
    device = tvm.vulkan(2)
    assert pickle.loads(pickle.dumps(device)) == device


def test_device_is_immutable():
    device = tvm.cuda(1)
    with pytest.raises(AttributeError):
        device.device_id = 5
    assert device.device_id == 1


@pytest.mark.parametrize("name", ["nosuchdevice", "cudaa", "Cuda2", "", " cpu"])
def test_bad_device_name_is_value_error_naming_it(name):
    with pytest.raises(ValueError) as info:
        tvm.device(name)
    assert f"`{name}`" in str(info.value) or repr(name) in str(info.value)


@pytest.mark.parametrize("text", ["cpu:0:0", "cpu:", "cpu:x", "cuda:1.5", "cuda:-1"])
def test_bad_device_index_is_value_error_naming_it(text):
    with pytest.raises(ValueError, match=text.replace(".", r"\.")):
        tvm.device(text)


def test_index_given_twice_is_value_error():
    with pytest.raises(ValueError, match="cuda:1"):
        tvm.device("cuda:1", 2)


def test_wrong_argument_types_are_type_errors():
    with pytest.raises(TypeError, match=r"1\.5"):
        tvm.device(1.5)
    with pytest.raises(TypeError):
        tvm.device("cuda", "1")


# ---- dtype -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "code", "bits", "lanes", "itemsize"),
    [
        ("int8", 0, 8, 1, 1),
        ("int32", 0, 32, 1, 4),
        ("int64", 0, 64, 1, 8),
        ("uint8", 1, 8, 1, 1),
        ("uint1", 1, 1, 1, 1),
        ("float16", 2, 16, 1, 2),
        ("float32", 2, 32, 1, 4),
        ("float64", 2, 64, 1, 8),
        ("bfloat16", 4, 16, 1, 2),
        ("bool", 6, 8, 1, 1),
        ("handle", 3, 64, 1, 8),
        ("float32x4", 2, 32, 4, 16),
        ("int8x4", 0, 8, 4, 4),
        ("float4_e2m1fn", 17, 4, 1, 1),
    ],
)
def test_dtype_fields(text, code, bits, lanes, itemsize):
    dtype = ffi.dtype(text)
    assert isinstance(dtype, str)
    assert isinstance(dtype, ffi.dtype)
    assert dtype == text
    assert str(dtype) == text
    assert (dtype.type_code, dtype.bits, dtype.lanes, dtype.itemsize) == (
        code,
        bits,
        lanes,
        itemsize,
    )


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("f32", "float32"),
        ("i8", "int8"),
        ("u16", "uint16"),
        ("bf16", "bfloat16"),
        ("f16", "float16"),
        ("int", "int32"),
        ("float", "float32"),
    ],
)
def test_dtype_has_a_canonical_spelling(alias, canonical):
    dtype = ffi.dtype(alias)
    assert dtype == canonical
    assert str(dtype) == canonical
    assert dtype == ffi.dtype(canonical)
    assert hash(dtype) == hash(ffi.dtype(canonical))


def test_dtype_is_usable_as_a_str():
    dtype = ffi.dtype("float32")
    assert dtype.startswith("float")
    assert f"{dtype}" == "float32"
    assert {"float32": 1}[dtype] == 1
    assert hash(dtype) == hash("float32")
    assert repr(dtype) == "dtype('float32')"


def test_dtype_compares_equal_to_numpy_dtypes_and_scalar_types():
    np = pytest.importorskip("numpy")
    dtype = ffi.dtype("float32")
    assert dtype == np.float32 and np.float32 == dtype
    assert dtype == np.dtype("float32") and not dtype != np.dtype("float32")
    assert dtype != np.int32 and dtype != np.dtype("float64")
    assert ffi.dtype("bool") == np.bool_
    assert dtype != 32 and dtype != "float64"


def test_dtype_pickles():
    dtype = ffi.dtype("int8x4")
    restored = pickle.loads(pickle.dumps(dtype))
    assert type(restored) is ffi.dtype
    assert restored == "int8x4"
    assert restored.lanes == 4


def test_dtype_of_a_dtype_is_itself():
    dtype = ffi.dtype("float16")
    assert ffi.dtype(dtype) is dtype


def test_dtype_through_native_code():
    result = echo(ffi.dtype("bfloat16"))
    assert type(result) is ffi.dtype
    assert result == "bfloat16"
    assert result.type_code == 4


@pytest.mark.parametrize(
    "text",
    ["floaty", "xyz", "float32x", "float32x0", "int7000", "int8x-1", "int0", "float33", "bfloat8"],
)
def test_bad_dtype_is_value_error_naming_the_text(text):
    with pytest.raises(ValueError) as info:
        ffi.dtype(text)
    assert text in str(info.value)


def test_dtype_of_a_non_str_is_an_error():
    with pytest.raises((TypeError, ValueError)):
        ffi.dtype(32)


def test_negative_device_index_is_a_value_error():
    with pytest.raises(ValueError, match="-1"):
        tvm.device("cuda", -1)


def test_empty_dtype_text_is_a_value_error():
    with pytest.raises(ValueError, match="void"):
        ffi.dtype("")
    assert ffi.dtype("void") == ""


def test_an_empty_function_name_is_refused():
    with pytest.raises(ValueError, match="empty"):
        tvm.register_func("", lambda: 0)


def test_device_numbers_out_of_range_name_the_value():
    with pytest.raises(OverflowError, match=str(2**31)):
        tvm.ffi.Device("cpu", 2**31)
    with pytest.raises(OverflowError, match=str(2**63)):
        tvm.ffi.Device(2**63)
    with pytest.raises(TypeError, match=r"device index must be an int, got 1\.5"):
        tvm.ffi.Device("cpu", 1.5)
