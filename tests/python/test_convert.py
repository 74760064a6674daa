"""Conversions between Python values and runtime values, both ways (issue 3, §4).

Every value goes into native code and back out through ``testing.echo``, a packed function that
returns its argument, so each test exercises the argument conversion and the return conversion.
"""

import gc
import math
import os
import struct
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tvm
from tvm import ffi

echo = tvm.get_global_func("testing.echo")

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def float_bits(value: float) -> bytes:
    return struct.pack("<d", value)


# ---- scalars ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [True, False])
def test_bool_stays_bool(value):
    result = echo(value)
    assert type(result) is bool
    assert result is value


@pytest.mark.parametrize(
    "value",
    [0, 1, -1, 7, 2**31 - 1, 2**31, -(2**31) - 1, 2**32, 2**53 + 1, INT64_MAX, INT64_MIN],
)
def test_int_round_trip(value):
    result = echo(value)
    assert type(result) is int
    assert result == value


def test_int_subclass_converts_as_int():
    class Flag(int):
        pass

    result = echo(Flag(42))
    assert type(result) is int
    assert result == 42


@pytest.mark.parametrize("value", [INT64_MAX + 1, INT64_MIN - 1, 2**100, -(2**200)])
def test_out_of_range_int_is_overflow_error_naming_it(value):
    with pytest.raises(OverflowError) as info:
        echo(value)
    assert str(value) in str(info.value)


def test_out_of_range_int_nested_in_a_list_is_overflow_error():
    with pytest.raises(OverflowError, match=str(2**64)):
        echo([1, 2, [2**64]])


@pytest.mark.parametrize(
    "value", [0.0, 1.5, -2.25, 1e300, 5e-324, sys.float_info.max, math.pi, math.inf, -math.inf]
)
def test_float_round_trip_is_bit_exact(value):
    result = echo(value)
    assert type(result) is float
    assert float_bits(result) == float_bits(value)


def test_negative_zero_keeps_its_sign():
    result = echo(-0.0)
    assert float_bits(result) == float_bits(-0.0)
    assert math.copysign(1.0, result) == -1.0


@pytest.mark.parametrize(
    "bits",
    [
        0x7FF8000000000000,  # the canonical quiet NaN
        0xFFF8000000000000,  # negative quiet NaN
        0x7FF8000000000123,  # quiet NaN with a payload
    ],
)
def test_nan_bits_survive(bits):
    value = struct.unpack("<d", struct.pack("<Q", bits))[0]
    assert math.isnan(value)
    result = echo(value)
    assert math.isnan(result)
    assert struct.unpack("<Q", struct.pack("<d", result))[0] == bits


def test_float_subclass_converts_as_float():
    class Meters(float):
        pass

    result = echo(Meters(2.5))
    assert type(result) is float
    assert result == 2.5


def test_int_and_float_stay_distinct():
    assert type(echo(1)) is int
    assert type(echo(1.0)) is float


def test_none_round_trip():
    assert echo(None) is None


# ---- strings and bytes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a",
        "abcdefg",  # 7 bytes: the longest inline (small) string
        "abcdefgh",  # 8 bytes: the shortest heap string
        "\u00e9\u00e9\u00e9a",  # 7 UTF-8 bytes, 4 characters
        "\u00e9\u00e9\u00e9\u00e9",  # 8 UTF-8 bytes, 4 characters
        "h\u00e9llo \u4e16\u754c \U0001f600",
        "\x00",
        "a\x00b",
        "abcdefg\x00hij\x00",
        "x" * 100_000,
    ],
)
def test_str_round_trip(text):
    result = echo(text)
    assert type(result) is str
    assert result == text


def test_str_subclass_comes_back_as_str():
    result = echo(ffi.String("hello world"))
    assert type(result) is str
    assert result == "hello world"


def test_lone_surrogate_is_a_unicode_error():
    with pytest.raises(UnicodeEncodeError):
        echo("bad \ud800 text")


def test_a_path_that_is_not_utf8_is_named_where_text_is_expected():
    """A file name of bytes that are not UTF-8 travels as a string (surrogate escapes), which a
    function taking text refuses by naming it, not as "expected ffi.String, got ffi.String"."""
    path = os.fsdecode(b"/tmp/no-such-lib-\xff.so")
    with pytest.raises(ValueError, match=r"not valid UTF-8") as err:
        tvm.runtime.load_module(path)
    message = str(err.value)
    assert 'b"/tmp/no-such-lib-\\xff.so"' in message, message
    assert "byte 0xff at offset 17" in message and "ffi.ModuleLoadFromFile" in message


@pytest.mark.parametrize("text", ["\udcc3\udca9", "x\udcc3\udca9\udc80"])
def test_escapes_that_spell_valid_utf8_are_refused(text):
    """Surrogate escapes stand for bytes that are not UTF-8; escapes of bytes that are ("é")
    would come back as other text, so they are a UnicodeEncodeError, not a changed string."""
    with pytest.raises(UnicodeEncodeError):
        echo(text)
    assert echo("\udc80") == "\udc80"  # an escape of a byte that is not UTF-8 travels


@pytest.mark.parametrize(
    "data",
    [b"", b"a", b"abcdefg", b"abcdefgh", b"\x00", b"\x00\xff" * 4, bytes(range(256)) * 40],
)
def test_bytes_round_trip(data):
    result = echo(data)
    assert type(result) is bytes
    assert result == data


@pytest.mark.parametrize("data", [b"", b"xy", b"\x00abcdefgh\x00"])
def test_bytearray_comes_back_as_bytes(data):
    result = echo(bytearray(data))
    assert type(result) is bytes
    assert result == data


def test_bytes_subclass_comes_back_as_bytes():
    result = echo(ffi.Bytes(b"a\x00b"))
    assert type(result) is bytes
    assert result == b"a\x00b"


def test_str_and_bytes_stay_distinct():
    assert echo("abc") == "abc"
    assert echo(b"abc") == b"abc"
    assert type(echo("abc")) is not type(echo(b"abc"))


# ---- containers ------------------------------------------------------------------------------


def test_list_becomes_array():
    result = echo([1, "two", 3.0, None, True])
    assert isinstance(result, ffi.Array)
    assert list(result) == [1, "two", 3.0, None, True]
    assert [type(x) for x in result] == [int, str, float, type(None), bool]


def test_tuple_becomes_array():
    result = echo((1, 2, 3))
    assert isinstance(result, ffi.Array)
    assert list(result) == [1, 2, 3]


def test_nested_lists_and_tuples_become_nested_arrays():
    result = echo([1, [2, (3, [4])], ()])
    assert isinstance(result, ffi.Array)
    assert isinstance(result[1], ffi.Array)
    assert isinstance(result[1][1], ffi.Array)
    assert isinstance(result[1][1][1], ffi.Array)
    assert isinstance(result[2], ffi.Array)
    assert len(result[2]) == 0
    assert result[1][1][1][0] == 4


def test_dict_becomes_map_with_order_kept():
    source = {"zeta": 1, "alpha": 2, "mid": 3, "b": 4, "a": 5}
    result = echo(source)
    assert isinstance(result, ffi.Map)
    assert list(result.keys()) == list(source.keys())
    assert list(result.values()) == list(source.values())
    assert list(result.items()) == list(source.items())


def test_dict_order_kept_for_many_entries():
    keys = [f"key{i}" for i in range(200)][::-1]
    source = {k: i for i, k in enumerate(keys)}
    result = echo(source)
    assert list(result) == keys
    assert [result[k] for k in keys] == list(range(200))


def test_dict_with_non_str_keys():
    source = {3: "three", None: "none", 2.5: "float", "s": "str", b"b": "bytes"}
    result = echo(source)
    assert list(result.items()) == list(source.items())
    assert result[3] == "three"
    assert result[None] == "none"
    assert result[b"b"] == "bytes"


def test_nested_dicts_become_maps():
    result = echo({"outer": {"inner": [1, {"deep": "x"}]}})
    assert isinstance(result["outer"], ffi.Map)
    assert isinstance(result["outer"]["inner"], ffi.Array)
    assert isinstance(result["outer"]["inner"][1], ffi.Map)
    assert result["outer"]["inner"][1]["deep"] == "x"


def test_runtime_containers_pass_through_as_the_same_object():
    array = ffi.Array([1, 2])
    assert echo(array).same_as(array)
    mapping = ffi.Map({"a": 1})
    assert echo(mapping).same_as(mapping)


def test_objects_naming_their_runtime_form_convert_as_that_form():
    kept = ffi.Array([1, 2])

    class Stored:
        __tvm_ffi_object__ = kept

    class MadeOnEachAccess:
        @property
        def __tvm_ffi_object__(self):
            return ffi.Array(["fresh", 3])

    assert echo(Stored()).same_as(kept)
    for _ in range(3):
        result = echo(MadeOnEachAccess())
        gc.collect()
        assert list(result) == ["fresh", 3]
    nested = echo([MadeOnEachAccess(), Stored()])
    assert list(nested[0]) == ["fresh", 3]
    assert nested[1].same_as(kept)


# ---- callables -------------------------------------------------------------------------------


def test_lambda_becomes_function():
    result = echo(lambda x, y: x * y)
    assert isinstance(result, ffi.Function)
    assert result(6, 7) == 42


def test_callables_of_every_kind_become_functions():
    class Adder:
        def __init__(self, n):
            self.n = n

        def __call__(self, x):
            return x + self.n

        def method(self, x):
            return x - self.n

    adder = Adder(10)
    for func, arg, expected in [(adder, 1, 11), (adder.method, 1, -9), (len, [1, 2, 3], 3)]:
        result = echo(func)
        assert isinstance(result, ffi.Function), func
        assert result(arg) == expected


def test_function_passes_through_as_the_same_function():
    nop = tvm.get_global_func("testing.nop")
    assert echo(nop).same_as(nop)


def test_function_from_a_callable_converts_its_arguments_and_result():
    seen = []

    def callback(*args):
        seen.append(args)
        return {"got": list(args)}

    result = echo(callback)(1, "s", [2, 3])
    assert isinstance(seen[0][2], ffi.Array)
    assert isinstance(result, ffi.Map)
    assert list(result["got"][2]) == [2, 3]


# ---- devices and dtypes ----------------------------------------------------------------------


@pytest.mark.parametrize("device", [tvm.cpu(), tvm.cpu(3), tvm.cuda(1), tvm.vulkan(2)])
def test_device_round_trip(device):
    result = echo(device)
    assert isinstance(result, ffi.Device)
    assert result == device
    assert (result.device_type, result.device_id) == (device.device_type, device.device_id)


@pytest.mark.parametrize("name", ["float32", "int8x4", "bfloat16", "bool", "uint1", "float16"])
def test_dtype_round_trip(name):
    result = echo(ffi.dtype(name))
    assert isinstance(result, ffi.dtype)
    assert result == name
    assert (result.type_code, result.bits, result.lanes) == (
        ffi.dtype(name).type_code,
        ffi.dtype(name).bits,
        ffi.dtype(name).lanes,
    )


def test_dtype_text_passed_as_str_stays_str():
    result = echo("float32")
    assert type(result) is str


# ---- opaque Python objects -------------------------------------------------------------------


class Opaque:
    pass


@pytest.mark.parametrize(
    "factory",
    [object, Opaque, lambda: {1, 2}, frozenset, lambda: 3 + 4j, lambda: range(5), lambda: ...],
    ids=["object", "class", "set", "frozenset", "complex", "range", "ellipsis"],
)
def test_other_objects_travel_opaquely_and_come_back_as_themselves(factory):
    value = factory()
    assert echo(value) is value


def test_opaque_objects_inside_containers_come_back_as_themselves():
    first, second = Opaque(), object()
    result = echo([first, {"k": second}])
    assert result[0] is first
    assert result[1]["k"] is second


def test_opaque_objects_are_not_leaked_or_freed_early():
    value = Opaque()
    before = sys.getrefcount(value)
    for _ in range(1000):
        assert echo(value) is value
        echo([value, value])
    gc.collect()
    assert sys.getrefcount(value) == before


def test_opaque_object_outlives_the_caller_reference():
    result = echo([Opaque()])
    gc.collect()
    assert isinstance(result[0], Opaque)


# ---- convert ---------------------------------------------------------------------------------


def test_convert_gives_the_runtime_form():
    assert isinstance(ffi.convert([1, 2]), ffi.Array)
    assert isinstance(ffi.convert((1,)), ffi.Array)
    assert isinstance(ffi.convert({"a": 1}), ffi.Map)
    assert isinstance(ffi.convert(len), ffi.Function)
    assert ffi.convert(5) == 5
    assert ffi.convert("s") == "s"
    assert ffi.convert(None) is None
    value = object()
    assert ffi.convert(value) is value


# ---- property: nested values survive a round trip ---------------------------------------------


class DictForm(list):
    """A map or dict as the list of its ``[key, value]`` pairs, in order."""


def normalise(value):
    """Runtime containers as Python lists, maps as ``DictForm`` (to compare order too)."""
    if isinstance(value, (ffi.Array, ffi.List)):
        return [normalise(x) for x in value]
    if isinstance(value, (ffi.Map, ffi.Dict)):
        return DictForm([normalise(k), normalise(v)] for k, v in value.items())
    return value


def expected_form(value):
    """The normalised form a Python value should come back as."""
    if isinstance(value, (list, tuple)):
        return [expected_form(x) for x in value]
    if isinstance(value, dict):
        return DictForm([expected_form(k), expected_form(v)] for k, v in value.items())
    return value


def assert_same(actual, expected, path="value"):
    assert type(actual) is type(expected), f"{path}: {type(actual)} != {type(expected)}"
    if isinstance(expected, list):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{i}]")
    elif isinstance(expected, float):
        assert float_bits(actual) == float_bits(expected), f"{path}: {actual!r} != {expected!r}"
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=INT64_MIN, max_value=INT64_MAX)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.binary(max_size=20)
)
keys = st.text(max_size=10) | st.integers(min_value=INT64_MIN, max_value=INT64_MAX)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=6)
        | st.tuples(children, children)
        | st.dictionaries(keys, children, max_size=6)
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values)
def test_nested_values_survive_a_round_trip(value):
    result = echo(value)
    assert_same(normalise(result), expected_form(value))
    # A second trip passes the runtime form itself.
    assert_same(normalise(echo(result)), expected_form(value))


def test_self_referencing_containers_are_recursion_errors():
    cyclic_list = []
    cyclic_list.append(cyclic_list)
    with pytest.raises(RecursionError, match="nested container"):
        echo(cyclic_list)
    cyclic_dict = {}
    cyclic_dict["self"] = cyclic_dict
    with pytest.raises(RecursionError, match="nested container"):
        echo(cyclic_dict)
    # Nesting within the interpreter's limit converts.
    deep = current = []
    for _ in range(100):
        current.append([])
        current = current[0]
    assert len(echo(deep)) == 1


def test_numpy_scalars_convert_like_python_numbers():
    np = pytest.importorskip("numpy")
    assert echo(np.int64(-7)) == -7 and type(echo(np.int64(-7))) is int
    assert echo(np.uint8(200)) == 200
    assert echo(np.float32(1.5)) == 1.5 and type(echo(np.float32(1.5))) is float
    assert echo(np.float16(0.25)) == 0.25
    assert echo(np.bool_(True)) is True and echo(np.bool_(False)) is False


NON_UTF8_KERNEL = r"""
#include <tvm/ffi/c_api.h>

/* Returns a string whose bytes are not UTF-8 (a Latin-1 "café" and a stray 0xff). */
TVM_FFI_DLL_EXPORT int __tvm_ffi_latin1(void* self, const TVMFFIAny* args, int32_t num_args,
                                        TVMFFIAny* result) {
  (void)self, (void)args, (void)num_args;
  static const char text[] = "caf\xe9 \xff and more text than fits inline";
  TVMFFIByteArray bytes = {text, sizeof(text) - 1};
  return TVMFFIStringFromByteArray(&bytes, result);
}
"""


def test_a_non_utf8_string_from_native_code_goes_back_unchanged(compile_c):
    module = tvm.runtime.load_module(compile_c(NON_UTF8_KERNEL, name="liblatin1.so"))
    text = module.get_function("latin1")()
    assert text.startswith("caf\udce9 \udcff")  # surrogate escapes stand for the raw bytes
    back = echo(text)
    assert back == text
    assert tvm.ffi.convert([text])[0] == text
