"""numpy arrays as tensors: read from numpy's own structs once they were checked against numpy's
buffer export, through the buffer protocol otherwise (issue 16), and ``from_dlpack``'s
``require_alignment`` / ``require_contiguous`` keywords."""

import inspect
import json
import os
import subprocess
import sys
import textwrap

import pytest

import tvm
from tvm import _native
from tvm.ffi import from_dlpack

np = pytest.importorskip("numpy")

from numpy_layouts import describe, expected, exports_read_only, make_arrays  # noqa: E402 - after numpy's skip

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def test_numpy_arrays_are_read_from_numpys_structs_here():
    # numpy 1.x and 2.x start their array structs alike; the check passed in this process.
    assert _native._numpy_arrays_read_directly()


@pytest.mark.parametrize("name", sorted(make_arrays()))
def test_tensor_describes_the_array_exactly(name):
    array = make_arrays()[name]
    assert describe(array) == expected(array)


def test_tensor_shares_the_array_and_holds_it_once():
    array = np.arange(12, dtype=np.int32).reshape(3, 4)[:, 1::2]
    before = sys.getrefcount(array)
    tensor = from_dlpack(array)
    assert sys.getrefcount(array) == before + 1
    back = tensor.numpy()
    back[2, 1] = -5
    assert array[2, 1] == -5
    del back, tensor
    assert sys.getrefcount(array) == before


def test_arrays_passed_to_native_code_are_read_the_same_way():
    echo = tvm.get_global_func("testing.echo")
    arrays = make_arrays()
    for name, array in arrays.items():
        tensor = echo(array)
        assert list(tensor.shape) == list(array.shape), name
        assert tensor.data_ptr == array.ctypes.data, name


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.arange(3, dtype=">i4"), "native byte order"),
        (np.arange(3, dtype=np.longdouble), "longdouble"),
        (np.zeros(2, dtype=[("a", "i4")]), "float and complex"),
        (np.zeros(2, dtype=object), "float and complex"),
        (np.lib.stride_tricks.as_strided(np.zeros(4, np.int32), (2,), (6,)), "multiple of item"),
    ],
    ids=["big-endian", "longdouble", "structured", "object", "strides-of-part-elements"],
)
def test_arrays_dlpack_cannot_describe_get_numpys_error(array, message):
    with pytest.raises(BufferError, match=message):
        from_dlpack(array)


def test_an_array_numpy_warns_about_when_written_imports_read_only():
    # numpy's buffer export calls an output of `broadcast_arrays` read-only (numpy warns when
    # it is written); the struct reading says the same, and nothing warns (warnings are errors).
    array = np.broadcast_arrays(np.arange(3.0), np.zeros((2, 3)))[0]
    tensor = from_dlpack(array)
    assert tensor.data_ptr == array.ctypes.data
    assert tensor.strides == (0, 1)
    assert exports_read_only(tensor)


def _descriptions_in_a_fresh_process(prelude: str, environ=None) -> dict:
    script = prelude + textwrap.dedent(
        f"""
        import json
        import sys
        sys.path.insert(0, {TESTS_DIR!r})
        import numpy
        from numpy_layouts import describe, expected, make_arrays, without_empty_strides
        from tvm import _native
        arrays = make_arrays()
        described = {{name: describe(array) for name, array in arrays.items()}}
        wanted = {{name: expected(array) for name, array in arrays.items()}}
        print(json.dumps({{
            "direct": _native._numpy_arrays_read_directly(),
            "version": numpy.__version__,
            "described": described,
            "described_without_empty_strides": without_empty_strides(described, arrays),
            "expected": wanted,
            "expected_without_empty_strides": without_empty_strides(wanted, arrays),
        }}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env=environ,
        check=False,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_an_unknown_numpy_version_is_read_through_the_buffer_protocol_alike():
    # numpy 3 might lay its structs out otherwise: such a version is never read directly, and
    # the buffer protocol gives every array the same tensor.
    fresh = _descriptions_in_a_fresh_process("import numpy\nnumpy.__version__ = '3.0.0'")
    assert fresh["direct"] is False
    assert fresh["described_without_empty_strides"] == fresh["expected_without_empty_strides"]


@pytest.fixture(scope="session")
def numpy1_path(tmp_path_factory):
    """A folder holding numpy 1.26 (from PyPI; the test skips where PyPI is unreachable or
    numpy 1.x has no wheel for this Python)."""
    if sys.version_info >= (3, 13):
        pytest.skip("numpy 1.x has no wheels for Python 3.13 and later")
    target = tmp_path_factory.mktemp("numpy1")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--only-binary=:all:",
            "--target",
            str(target),
            "numpy==1.26.4",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if result.returncode != 0:
        output = result.stdout + result.stderr
        if "Could not fetch URL" in output or "connection" in output.lower():
            pytest.skip("PyPI is unreachable, cannot install numpy 1.26")
        pytest.fail(f"pip install numpy==1.26.4 failed:\n{output}")
    return target


def test_numpy_1_arrays_are_read_from_their_structs_alike(numpy1_path):
    environ = dict(os.environ)
    environ["PYTHONPATH"] = os.pathsep.join(
        [str(numpy1_path), *filter(None, [environ.get("PYTHONPATH")])]
    )
    fresh = _descriptions_in_a_fresh_process("", environ)
    assert fresh["version"] == "1.26.4"
    assert fresh["direct"] is True
    assert fresh["described"] == fresh["expected"]


# ---- require_alignment, require_contiguous ---------------------------------------------------


def aligned_floats(count, alignment=64):
    raw = np.zeros(count * 4 + alignment, dtype=np.uint8)
    start = -raw.ctypes.data % alignment
    return raw[start : start + count * 4].view(np.float32)


def test_requirements_that_hold_give_the_tensor():
    array = aligned_floats(16)
    tensor = from_dlpack(array, require_alignment=64, require_contiguous=True)
    assert tensor.data_ptr == array.ctypes.data
    assert from_dlpack(array, require_alignment=0, require_contiguous=False).shape == (16,)


@pytest.mark.parametrize("through", ["numpy", "tensor", "capsule", "producer"])
def test_misaligned_data_is_a_value_error_naming_the_address(through):
    array = aligned_floats(16)[1:]
    producer = {
        "numpy": lambda: array,
        "tensor": lambda: from_dlpack(array),
        "capsule": lambda: array.__dlpack__(),
        "producer": lambda: type("P", (), {"__dlpack__": lambda self, **kw: array.__dlpack__()})(),
    }[through]()
    with pytest.raises(ValueError, match=rf"{array.ctypes.data:#x} is not aligned to 64 bytes"):
        from_dlpack(producer, require_alignment=64)
    assert from_dlpack(producer, require_alignment=4).data_ptr == array.ctypes.data


@pytest.mark.parametrize("through", ["numpy", "tensor", "capsule"])
def test_strided_data_is_a_value_error_when_contiguity_is_required(through):
    array = np.arange(8.0)[::2]
    producer = {
        "numpy": lambda: array,
        "tensor": lambda: from_dlpack(array),
        "capsule": lambda: array.__dlpack__(),
    }[through]()
    with pytest.raises(ValueError, match=r"strides \[2\] is not contiguous"):
        from_dlpack(producer, require_contiguous=True)
    assert from_dlpack(producer).strides == (2,)


def test_a_capsule_that_fails_a_requirement_stays_unconsumed():
    array = np.arange(8.0)[::2]
    capsule = array.__dlpack__(max_version=(1, 0))
    with pytest.raises(ValueError, match="not contiguous"):
        from_dlpack(capsule, require_contiguous=True)
    # Still the producer's: it imports afterwards, once.
    assert from_dlpack(capsule).numpy().tolist() == [0.0, 2.0, 4.0, 6.0]
    with pytest.raises(TypeError, match="unconsumed DLPack capsule"):
        from_dlpack(capsule)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"require_alignment": -8}, ValueError, r"require_alignment must be .* got -8"),
        ({"require_alignment": 2**40}, ValueError, r"got 1099511627776"),
        ({"require_alignment": 3}, ValueError, r"require_alignment must be .*power of two.* got 3"),
        ({"require_alignment": 2**31 - 1}, ValueError, r"power of two.* got 2147483647"),
        ({"require_alignment": "64"}, TypeError, r"require_alignment must be an int, got '64'"),
        ({"require_alignment": 1.5}, TypeError, r"got 1.5"),
        ({"require_alignment": np.int64(-1)}, ValueError, r"got np.int64\(-1\)"),
        ({"require_alignment": None}, TypeError, r"must be an int, got None"),
        ({"alignment": 64}, TypeError, r"unexpected keyword argument 'alignment'"),
        ({"x": np.zeros(2)}, TypeError, r"unexpected keyword argument 'x'"),
    ],
)
def test_bad_keywords_are_errors_naming_them(kwargs, error, message):
    with pytest.raises(error, match=message):
        from_dlpack(np.zeros(2), **kwargs)


def test_require_alignment_takes_any_integer_and_keeps_its_errors():
    array = aligned_floats(4)
    assert from_dlpack(array, require_alignment=np.int64(64)).data_ptr == array.ctypes.data

    class Failing:
        def __index__(self):
            raise ZeroDivisionError("from __index__")

    with pytest.raises(ZeroDivisionError, match="from __index__"):
        from_dlpack(array, require_alignment=Failing())


@pytest.mark.parametrize("args", [(), (np.zeros(2), 64)])
def test_from_dlpack_takes_exactly_one_positional_argument(args):
    with pytest.raises(TypeError, match=rf"takes 1 positional argument .* but {len(args)} were"):
        from_dlpack(*args)


def test_from_dlpack_has_its_signature_and_module():
    assert from_dlpack.__module__ == _native.__name__
    assert str(inspect.signature(from_dlpack)) == (
        "(x, /, *, require_alignment=0, require_contiguous=False)"
    )
