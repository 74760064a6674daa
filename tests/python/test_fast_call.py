"""The fast path of `tvm.ffi.Function` calls (plain-value and wrapped-object arguments, raw
interpreter calls, outside PyO3's trampoline) gives the same values, errors and reference counts
as the general path it hands the other calls to."""

import gc
import sys
import weakref

import numpy as np
import pytest

import tvm
from isolated import run_isolated
from tvm import ffi

echo = tvm.get_global_func("testing.echo")
nop = tvm.get_global_func("testing.nop")
apply = tvm.get_global_func("testing.apply")
make_int_pair = tvm.get_global_func("testing.make_int_pair")
use_count = tvm.get_global_func("testing.object_use_count")
raise_error = tvm.get_global_func("testing.test_raise_error")


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -1,
        2**63 - 1,
        -(2**63),
        1.5,
        float("inf"),
        "",
        "hello",
        "sevench",
        "eight ch",
        "é" * 40,
        b"",
        b"short",
        b"sevench",
        b"longer than seven bytes",
    ],
)
def test_plain_values_round_trip(value):
    result = echo(value)
    assert result == value and type(result) is type(value)


def test_int_past_64_bits_keeps_its_overflow_error():
    with pytest.raises(OverflowError, match="does not fit in 64 bits"):
        echo(2**64)
    with pytest.raises(OverflowError, match="does not fit in 64 bits"):
        echo(1, 2**70)
    assert echo(7) == 7  # no error left behind


def test_ints_around_the_interpreters_cached_range_round_trip():
    # -5..256 are read and made by address (the interpreter's cached ints); their neighbours
    # and everything else through the interpreter's conversions. Each must give its own value,
    # as an argument, a result, a callback's argument and a callback's result.
    values = [*range(-300, 300), 2**31, -(2**31) - 1, 2**62, 2**63 - 1, -(2**63)]
    assert [echo(v) for v in values] == values
    assert [apply(lambda x: x, v) for v in values] == values
    assert [apply(lambda x: -x, v) for v in values[:-1]] == [-v for v in values[:-1]]
    assert nop(*values[:8]) is None


def test_cached_ints_keep_their_reference_counts():
    # The cached objects themselves are handed out: each handed-out reference is returned.
    values = [-5, 0, 1, 7, 255, 256]
    before = [sys.getrefcount(v) for v in values]
    kept = [echo(v) for v in values for _ in range(100)]
    assert all(a is b for a, b in zip(kept[::100], values))
    del kept
    for _ in range(100):
        for value in values:
            echo(value)
            apply(lambda x: x, value)
    del value  # the loop's own reference
    assert [sys.getrefcount(v) for v in values] == before


def test_int_subclasses_and_bools_keep_their_types():
    class MyInt(int):
        pass

    assert echo(MyInt(5)) == 5 and type(echo(MyInt(5))) is int
    assert echo(True) is True and echo(False) is False
    assert type(echo(1)) is int and type(apply(lambda x: x, 1)) is int


def test_lone_surrogates_take_the_general_path():
    assert echo("\udc80") == "\udc80"
    with pytest.raises(UnicodeEncodeError):
        echo("\ud800")
    assert echo("after") == "after"


def test_wrapped_objects_and_results_of_other_types():
    pair = make_int_pair(1, 2, "p")
    assert echo(pair).same_as(pair)
    assert list(echo(ffi.convert([1, 2]))) == [1, 2]
    assert echo(tvm.device("cpu", 0)) == tvm.device("cpu", 0)
    assert list(echo([1, "a"])) == [1, "a"]  # a list argument goes the general way
    gc.collect()
    assert use_count(pair) == 1


@pytest.mark.parametrize("n", [8, 9, 40, 64, 65, 100])
def test_many_plain_arguments(n):
    args = [f"string number {i}" for i in range(n)]
    assert list(apply(lambda *xs: list(xs), *args)) == args
    assert nop(*range(n)) is None


@pytest.mark.parametrize("n", [9, 32, 64, 65])
def test_many_tensors_and_strings_keep_their_reference_counts(n):
    tensors = [ffi.from_dlpack(np.arange(4, dtype="float32")) for _ in range(n)]
    texts = [f"a string longer than seven bytes, {i}" for i in range(n)]
    args = [v for pair in zip(tensors, texts) for v in pair][:n]
    before = [sys.getrefcount(v) for v in args]
    for _ in range(100):
        assert nop(*args) is None
    returned = apply(lambda *xs: xs[-1], *args)
    assert returned == args[-1] if isinstance(returned, str) else returned.same_as(args[-1])
    del returned
    assert [sys.getrefcount(v) for v in args] == before


def test_a_general_argument_after_fast_ones():
    x = np.arange(4, dtype="float32")
    strings = ["a long string argument"] * 5
    assert nop(*strings, x) is None
    before = sys.getrefcount(strings[0]), sys.getrefcount(x)
    for _ in range(100):
        assert nop(*strings, x) is None
    assert (sys.getrefcount(strings[0]), sys.getrefcount(x)) == before


def test_reference_counts_do_not_move():
    text = "a string longer than seven bytes"
    data = b"bytes"
    pair = make_int_pair(1, 2, "p")
    counts = [sys.getrefcount(v) for v in (text, data, pair)]
    for _ in range(1000):
        echo(text)
        echo(data)
        nop(text, data, pair, 1, 2.0, None, True)
    assert [sys.getrefcount(v) for v in (text, data, pair)] == counts


def test_native_errors_keep_their_class_and_message():
    with pytest.raises(ValueError, match="bad value"):
        raise_error("ValueError", "bad value")
    with pytest.raises(TypeError, match="bad type"):
        raise_error("TypeError", "bad type")


def test_keywords_are_refused_with_the_same_message():
    with pytest.raises(TypeError, match="takes no keyword arguments"):
        echo(1, value=2)
    assert echo(*[1], **{}) == 1


def test_release_gil_functions_still_run():
    f = ffi.convert(lambda a, b: a + b)
    f.release_gil = True
    assert f(1, 2) == 3


class Marker(Exception):
    pass


def test_callback_exception_is_released_once_caught():
    def fail():
        raise Marker("from the callback")

    f = ffi.convert(fail)
    refs = []
    try:
        f()
    except Marker as err:
        assert str(err) == "from the callback"
        refs.append(weakref.ref(err))
        err.__traceback__ = None
    gc.collect()
    assert refs[0]() is None


def test_callback_results_and_arguments_are_not_kept():
    class Box:
        pass

    refs = []

    def make(x):
        box = Box()
        refs.append(weakref.ref(box))
        return x

    f = ffi.convert(make)
    for i in range(100):
        assert f(i) == i
        assert f("a string longer than seven") == "a string longer than seven"
    assert all(ref() is None for ref in refs)


def test_deep_recursion_with_arguments_is_a_recursion_error():
    out = run_isolated(
        """
        import sys
        import tvm

        sys.setrecursionlimit(1_000_000)

        def again(n, text):
            return f(n + 1, text)

        f = tvm.ffi.convert(again)
        try:
            f(0, "a string longer than seven bytes")
        except RecursionError:
            print("RecursionError", tvm.ffi.convert(lambda a: a)(1))
        """
    )
    assert out == "RecursionError 1"


@pytest.mark.parametrize(
    "array",
    [
        np.arange(6, dtype="float32"),
        np.arange(12, dtype="int64").reshape(3, 4)[:, ::2],  # strided
        np.array(3.5),  # 0-d
        np.arange(4, dtype="float32")[::-1],  # negative stride
    ],
)
def test_numpy_arrays_share_memory_through_the_fast_path(array):
    before = sys.getrefcount(array)
    tensor = apply(lambda a, s: a, array, "a string longer than seven bytes")
    assert tensor.shape == array.shape
    np.testing.assert_array_equal(np.from_dlpack(tensor), array)
    del tensor
    gc.collect()
    assert sys.getrefcount(array) == before
