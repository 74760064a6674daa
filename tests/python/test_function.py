"""Global functions, Python callbacks called from native code, and bad calls (issue 3, §3)."""

import gc
import re
import uuid

import pytest

import tvm
from tvm import _native, ffi

apply = tvm.get_global_func("testing.apply")
echo = tvm.get_global_func("testing.echo")
use_count = tvm.get_global_func("testing.object_use_count")
make_int_pair = tvm.get_global_func("testing.make_int_pair")
raise_error = tvm.get_global_func("testing.test_raise_error")


@pytest.fixture
def func_name():
    """A fresh global function name, removed after the test."""
    name = f"test_function.{uuid.uuid4().hex}"
    yield name
    ffi.remove_global_func(name)


# ---- registration ----------------------------------------------------------------------------


def test_register_func_as_decorator_with_a_name(func_name):
    @tvm.register_func(func_name)
    def double(x):
        return x * 2

    assert double(4) == 8  # the decorator gives back the Python function
    func = tvm.get_global_func(func_name)
    assert isinstance(func, ffi.Function)
    assert func(21) == 42


def test_register_func_as_bare_decorator_uses_the_function_name():
    name = f"bare_{uuid.uuid4().hex}"

    def template(x):
        return -x

    template.__name__ = name
    try:
        assert ffi.register_func(template) is template
        assert tvm.get_global_func(name)(5) == -5
    finally:
        ffi.remove_global_func(name)


def test_register_func_directly(func_name):
    ffi.register_func(func_name, lambda a, b: f"{a}-{b}")
    assert tvm.get_global_func(func_name)("x", 3) == "x-3"


def test_register_an_existing_function_under_a_second_name(func_name):
    nop = tvm.get_global_func("testing.nop")
    ffi.register_func(func_name, nop)
    assert tvm.get_global_func(func_name).same_as(nop)


def test_duplicate_registration_is_runtime_error_naming_it(func_name):
    ffi.register_func(func_name, lambda: 1)
    with pytest.raises(RuntimeError) as info:
        ffi.register_func(func_name, lambda: 2)
    assert func_name in str(info.value)
    with pytest.raises(RuntimeError, match=re.escape(func_name)):

        @ffi.register_func(func_name)
        def again():
            return 3

    assert tvm.get_global_func(func_name)() == 1


def test_override_replaces_the_function(func_name):
    ffi.register_func(func_name, lambda: "old")
    ffi.register_func(func_name, lambda: "new", override=True)
    assert tvm.get_global_func(func_name)() == "new"

    @ffi.register_func(func_name, override=True)
    def newest():
        return "newest"

    assert tvm.get_global_func(func_name)() == "newest"


def test_old_function_handle_stays_callable_after_override(func_name):
    ffi.register_func(func_name, lambda: "old")
    old = tvm.get_global_func(func_name)
    ffi.register_func(func_name, lambda: "new", override=True)
    assert old() == "old"


def test_get_global_func_missing_is_value_error_naming_it():
    name = f"no.such.function.{uuid.uuid4().hex}"
    with pytest.raises(ValueError) as info:
        tvm.get_global_func(name)
    assert name in str(info.value)


def test_get_global_func_allow_missing_gives_none():
    assert tvm.get_global_func(f"no.such.{uuid.uuid4().hex}", allow_missing=True) is None
    assert isinstance(tvm.get_global_func("testing.echo", allow_missing=True), ffi.Function)


def test_list_global_func_names(func_name):
    names = ffi.list_global_func_names()
    assert all(type(n) is str for n in names)
    assert {"testing.echo", "testing.apply", "ffi.Array", "ffi.Shape"} <= set(names)
    assert func_name not in names
    assert names == sorted(names)
    ffi.register_func(func_name, lambda: None)
    assert func_name in ffi.list_global_func_names()


def test_remove_global_func(func_name):
    ffi.register_func(func_name, lambda: None)
    assert ffi.remove_global_func(func_name) is True
    assert ffi.remove_global_func(func_name) is False
    assert tvm.get_global_func(func_name, allow_missing=True) is None
    assert func_name not in ffi.list_global_func_names()
    # The name can be registered again without override.
    ffi.register_func(func_name, lambda: "again")
    assert tvm.get_global_func(func_name)() == "again"


def test_top_level_aliases():
    assert tvm.register_func is ffi.register_func
    assert tvm.get_global_func is ffi.get_global_func


# ---- calling ---------------------------------------------------------------------------------


def test_registered_python_function_called_through_native_code(func_name):
    seen = []

    @ffi.register_func(func_name)
    def record(*args):
        seen.append(args)
        return len(args)

    func = tvm.get_global_func(func_name)
    assert func(1, "a", [2]) == 3
    assert func() == 0
    assert seen[0][:2] == (1, "a")
    assert isinstance(seen[0][2], ffi.Array)
    assert seen[1] == ()


def test_python_callback_called_from_native_code():
    calls = []

    def callback(a, b, c):
        calls.append((a, b, c))
        return {"sum": a + b, "c": c}

    result = apply(callback, 1, 2, [3, 4])
    assert len(calls) == 1
    a, b, c = calls[0]
    assert (a, b) == (1, 2)
    assert isinstance(c, ffi.Array)
    assert list(c) == [3, 4]
    assert isinstance(result, ffi.Map)
    assert result["sum"] == 3


def test_callback_receives_and_returns_objects():
    pair = make_int_pair(3, 4, "p")
    returned = apply(lambda p: p, pair)
    assert returned.same_as(pair)
    assert apply(lambda p: p.a * p.b, pair) == 12


def test_callback_that_calls_native_code_again():
    def outer(inner, value):
        return apply(inner, value) + 1

    assert apply(outer, lambda v: v * 10, 4) == 41


def test_native_function_passed_to_a_callback():
    assert apply(lambda f: f([1, 2, 3]), tvm.get_global_func("ffi.ArraySize")) == 3


def test_many_arguments():
    args = list(range(40))
    assert apply(lambda *xs: sum(xs), *args) == sum(args)
    assert apply(lambda *xs: list(xs), *args) == args


def test_keyword_arguments_are_rejected():
    with pytest.raises(TypeError):
        echo(value=1)


def test_function_repr_is_readable():
    text = repr(tvm.get_global_func("testing.echo"))
    assert "Function" in text


def test_callback_runs_many_times_without_leaking():
    def callback(x):
        return x

    pair = make_int_pair(1, 2, "p")
    for _ in range(500):
        assert apply(callback, pair).same_as(pair)
    gc.collect()
    assert use_count(pair) == 1


# ---- bad calls -------------------------------------------------------------------------------


@pytest.mark.parametrize("not_callable", [5, "text", [1, 2], object()])
def test_non_callable_registered_is_type_error_naming_it(func_name, not_callable):
    with pytest.raises(TypeError) as info:
        ffi.register_func(func_name, not_callable)
    assert repr(not_callable) in str(info.value)
    assert tvm.get_global_func(func_name, allow_missing=True) is None


def test_non_callable_to_the_native_registry_is_type_error_naming_it(func_name):
    with pytest.raises(TypeError, match="12345"):
        _native.register_global_func(func_name, 12345)


def test_register_func_with_a_non_str_name_is_type_error_naming_it():
    with pytest.raises(TypeError, match=r"3\.5"):
        ffi.register_func(3.5)


def test_non_callable_where_native_code_expects_a_function_is_type_error():
    with pytest.raises(TypeError) as info:
        apply(12345, 1)
    message = str(info.value)
    assert "int" in message
    assert "Function" in message


@pytest.mark.parametrize("args", [(), ([1], [2]), ([1], 2, 3)])
def test_wrong_argument_count_to_a_typed_function(args):
    with pytest.raises(TypeError) as info:
        tvm.get_global_func("ffi.ArraySize")(*args)
    message = str(info.value)
    assert "ffi.ArraySize" in message
    assert "Expected 1" in message
    assert f"got {len(args)}" in message


def test_wrong_argument_type_to_a_typed_function():
    with pytest.raises(TypeError) as info:
        tvm.get_global_func("testing.int_pair_sum")(5)
    message = str(info.value)
    assert "testing.int_pair_sum" in message
    assert "#0" in message  # the position
    assert "testing.TestIntPair" in message  # the expected type
    assert "int" in message  # the actual type


def test_wrong_argument_type_at_a_later_position():
    with pytest.raises(TypeError) as info:
        make_int_pair(1, "two", "name")
    message = str(info.value)
    assert "testing.make_int_pair" in message
    assert "#1" in message


def test_wrong_argument_count_to_a_python_callback_is_type_error():
    with pytest.raises(TypeError):
        apply(lambda a, b: a + b, 1)


# ---- reference counts when callbacks raise ----------------------------------------------------


def test_use_counts_stay_balanced_when_a_callback_raises():
    pair = make_int_pair(1, 2, "p")
    array = ffi.Array([pair])
    assert use_count(pair) == 2
    array_count = use_count(array)

    def failing(p, a):
        raise ValueError(f"bad pair {p.a}")

    for _ in range(300):
        with pytest.raises(ValueError, match="bad pair 1"):
            apply(failing, pair, array)
    gc.collect()
    assert use_count(pair) == 2
    assert use_count(array) == array_count


def test_use_counts_stay_balanced_when_native_code_raises_inside_a_callback():
    pair = make_int_pair(1, 2, "p")

    def failing(p):
        raise_error("IndexError", "from native")

    for _ in range(200):
        with pytest.raises(IndexError, match="from native"):
            apply(failing, pair)
    gc.collect()
    assert use_count(pair) == 1


def test_use_counts_stay_balanced_when_a_callback_returns_an_unconvertible_value():
    pair = make_int_pair(1, 2, "p")
    for _ in range(200):
        with pytest.raises(OverflowError, match=str(2**70)):
            apply(lambda p: [p, 2**70], pair)
    gc.collect()
    assert use_count(pair) == 1


def test_use_counts_stay_balanced_after_typed_argument_errors():
    pair = make_int_pair(1, 2, "p")
    int_pair_sum = tvm.get_global_func("testing.int_pair_sum")
    for _ in range(200):
        with pytest.raises(TypeError):
            int_pair_sum(pair, pair)
        with pytest.raises(TypeError):
            tvm.get_global_func("ffi.ArraySize")(pair)
    gc.collect()
    assert use_count(pair) == 1
    assert int_pair_sum(pair) == 3


def test_functions_cannot_be_constructed_directly():
    with pytest.raises(TypeError, match="convert"):
        tvm.ffi.Function()
