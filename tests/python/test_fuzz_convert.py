"""Fuzzing the conversion layer: arbitrary nested Python values through ``testing.echo`` and
``tvm.ffi.convert``.

Every value either converts (and then equals the input, with equality as in
``test_convert.py``: containers in order, floats bit for bit, tensors sharing the array's memory
and holding its elements) or raises a documented exception class that the value explains: an
``OverflowError`` for an int outside int64, a ``ValueError`` (``UnicodeEncodeError``) for a
string with a lone surrogate that is not the escape of a byte invalid in UTF-8, a
``BufferError`` for an array numpy itself cannot export through DLPack. Anything else (another
exception, a crash, a wrong value) is a finding.
"""

import math
import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tvm

# The equality of the conversion tests: containers as lists in order, maps as ``DictForm``.
from test_convert import DictForm, float_bits, normalise
from tvm import ffi

np = pytest.importorskip("numpy")
hnp = pytest.importorskip("hypothesis.extra.numpy")

echo = tvm.get_global_func("testing.echo")

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
#: Examples per test: bounded so that the module takes well under 30 s; ``TVM_FUZZ_EXAMPLES``
#: raises it for long runs (``scripts/fuzz.sh``).
EXAMPLES = int(os.environ.get("TVM_FUZZ_EXAMPLES", "400"))

DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    ">i4",  # non-native byte order: numpy refuses to export it (BufferError)
    ">f8",
]


def _layout(array, draw_index: int):
    """The array itself, or a non-contiguous or read-only view of it."""
    if draw_index == 1 and array.ndim >= 1:
        return array[::2]
    if draw_index == 2 and array.ndim >= 2:
        return array.T
    if draw_index == 3:
        view = array.view()
        view.flags.writeable = False
        return view
    return array


@st.composite
def arrays(draw):
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    array = draw(hnp.arrays(dtype, shape))
    return _layout(array, draw(st.integers(0, 3)))


ints = st.integers(min_value=INT64_MIN, max_value=INT64_MAX) | st.integers()
floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [
        struct.unpack("<d", struct.pack("<Q", bits))[0]
        for bits in (0x7FF8000000000123, 0xFFF8_0000_0000_0000)
    ]
)
# Surrogates are excluded from the default alphabet; NULs are not.
texts = st.text(max_size=12) | st.text(st.characters(blacklist_categories=()), max_size=12)
NUMPY_SCALAR_DTYPES = [d for d in DTYPES if d[0] not in "<>" and not d.startswith("complex")]
# numpy scalars convert like Python numbers (a uint64 past int64 is an OverflowError).
numpy_scalars = st.sampled_from(NUMPY_SCALAR_DTYPES).flatmap(
    lambda d: hnp.from_dtype(np.dtype(d)).map(np.dtype(d).type)
)
scalars = (
    st.none()
    | st.booleans()
    | ints
    | floats
    | texts
    | st.binary(max_size=12)
    | st.binary(max_size=12).map(bytearray)
    | numpy_scalars
    | arrays()
)
# NaN keys are left out: a map compares floats bit for bit, so two distinct NaN keys of a Python
# dict with the same bits become one entry (a documented difference, not a conversion error).
keys = st.none() | st.booleans() | ints | st.floats(allow_nan=False) | texts | st.binary(max_size=8)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.tuples(children, children)
        | st.dictionaries(keys, children, max_size=5)
    ),
    max_leaves=25,
)


def _exportable(array) -> bool:
    """Whether numpy exports the array through DLPack (versioned, as the runtime asks first)."""
    try:
        array.__dlpack__(max_version=(1, 0))
    except BufferError:
        return False
    return True


def _travels_as_utf8_bytes(text: str) -> bool:
    """Whether a string converts: valid UTF-8, or surrogate escapes of bytes that are not (what
    native code returning such bytes gives Python), which travel as those bytes and come back
    as the same string. Any other lone surrogate is a ``ValueError``."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return False
    return raw.decode("utf-8", "surrogateescape") == text


def allowed_errors(value) -> tuple[type[BaseException], ...]:
    """The exception classes the value explains (empty: it must convert)."""
    found: set[type[BaseException]] = set()

    def walk(v):
        if isinstance(v, np.integer):
            v = int(v)
        if isinstance(v, bool) or v is None:
            return
        if isinstance(v, int):
            if not INT64_MIN <= v <= INT64_MAX:
                found.add(OverflowError)
        elif isinstance(v, str) and not _travels_as_utf8_bytes(v):
            found.add(ValueError)
        elif isinstance(v, np.ndarray):
            if not _exportable(v):
                found.add(BufferError)
        elif isinstance(v, (list, tuple)):
            for item in v:
                walk(item)
        elif isinstance(v, dict):
            for k, item in v.items():
                walk(k)
                walk(item)

    walk(value)
    return tuple(found)


class ArrayForm:
    """What a numpy array must come back as: a tensor over the same memory and elements."""

    def __init__(self, array):
        self.array = array

    def check(self, actual, path):
        a = self.array
        assert isinstance(actual, ffi.Tensor), f"{path}: {type(actual)} is not a Tensor"
        assert actual.shape == a.shape, f"{path}: shape {actual.shape} != {a.shape}"
        assert actual.dtype == str(a.dtype), f"{path}: dtype {actual.dtype} != {a.dtype}"
        if a.size:
            assert actual.data_ptr == a.ctypes.data, f"{path}: the tensor copied the data"
        back = np.from_dlpack(actual)
        assert back.dtype == a.dtype and back.shape == a.shape
        assert np.array_equal(back, a, equal_nan=a.dtype.kind in "fc"), f"{path}: elements differ"


def expected_form(value):
    if isinstance(value, (list, tuple)):
        return [expected_form(x) for x in value]
    if isinstance(value, dict):
        return DictForm([expected_form(k), expected_form(v)] for k, v in value.items())
    if isinstance(value, np.ndarray):
        return ArrayForm(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def assert_same(actual, expected, path="value"):
    if isinstance(expected, ArrayForm):
        expected.check(actual, path)
        return
    assert type(actual) is type(expected), f"{path}: {type(actual)} != {type(expected)}"
    if isinstance(expected, list):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{i}]")
    elif isinstance(expected, float):
        assert float_bits(actual) == float_bits(expected) or (
            math.isnan(actual) and math.isnan(expected)
        ), f"{path}: {actual!r} != {expected!r}"
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def check_conversion(convert, value):
    allowed = allowed_errors(value)
    try:
        result = convert(value)
    except (TypeError, ValueError, OverflowError, RecursionError, BufferError) as err:
        assert allowed, f"{type(err).__name__} for a convertible value: {err}"
        assert isinstance(err, allowed), f"{type(err).__name__} ({err}), expected one of {allowed}"
        return None
    assert not allowed, f"converted a value that should raise one of {allowed}"
    assert_same(normalise(result), expected_form(value))
    return result


fuzz_settings = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@fuzz_settings
@given(values)
def test_echo_returns_the_value_or_a_documented_error(value):
    result = check_conversion(echo, value)
    if result is not None:
        # The runtime form goes through again unchanged.
        assert_same(normalise(echo(result)), expected_form(value))


@fuzz_settings
@given(values)
def test_convert_gives_the_runtime_form_or_a_documented_error(value):
    result = check_conversion(ffi.convert, value)
    if isinstance(value, (list, tuple)):
        assert result is None or isinstance(result, ffi.Array)
    elif isinstance(value, dict):
        assert result is None or isinstance(result, ffi.Map)
