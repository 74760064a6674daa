"""Objects: Python classes bound to native object types, reflection, identity (issue 3, §5)."""

import gc
import pickle
import uuid

import pytest

import tvm
from tvm import ffi

echo = tvm.get_global_func("testing.echo")
make_int_pair = tvm.get_global_func("testing.make_int_pair")
int_pair_sum = tvm.get_global_func("testing.int_pair_sum")
use_count = tvm.get_global_func("testing.object_use_count")


@tvm.register_object("testing.TestIntPair")
class TestIntPair(ffi.Object):
    """The Python class of ``testing.TestIntPair`` (fields a, b, name)."""

    __test__ = False  # not a pytest test class

    def total(self):
        return self.a + self.b


def test_register_object_returns_the_class_and_records_the_key():
    assert TestIntPair._tvm_type_key == "testing.TestIntPair"
    assert TestIntPair._tvm_type_index == tvm._native.type_key_to_index("testing.TestIntPair")


def test_objects_of_a_registered_type_come_back_as_the_class():
    pair = make_int_pair(1, 2, "first")
    assert type(pair) is TestIntPair
    assert isinstance(pair, ffi.Object)
    assert pair.type_key == "testing.TestIntPair"
    assert pair.total() == 3
    assert type(echo(pair)) is TestIntPair
    assert type(echo([pair])[0]) is TestIntPair


def test_fields_are_read_through_reflection():
    pair = make_int_pair(-5, 2**40, "a label that is long")
    assert pair.a == -5
    assert pair.b == 2**40
    assert pair.name == "a label that is long"
    assert type(pair.a) is int
    assert type(pair.name) is str


def test_fields_are_read_only():
    pair = make_int_pair(1, 2, "x")
    with pytest.raises(AttributeError, match="'a'"):
        pair.a = 100
    with pytest.raises(AttributeError, match="'name'"):
        del pair.name
    assert pair.a == 1
    assert pair.name == "x"
    assert int_pair_sum(pair) == 3


def test_registered_class_keeps_ordinary_python_attributes():
    pair = make_int_pair(1, 2, "x")
    pair.note = "python side"
    assert pair.note == "python side"
    del pair.note
    with pytest.raises(AttributeError):
        pair.note


def test_registered_instances_pass_to_typed_native_functions():
    pair = make_int_pair(20, 22, "x")
    assert int_pair_sum(pair) == 42


def test_unknown_attribute_is_attribute_error_naming_it():
    pair = make_int_pair(1, 2, "x")
    with pytest.raises(AttributeError, match="no_such_field"):
        pair.no_such_field


def test_objects_compare_by_identity():
    pair = make_int_pair(1, 2, "x")
    same = echo(pair)
    twin = make_int_pair(1, 2, "x")
    assert same == pair
    assert not (same != pair)
    assert same.same_as(pair)
    assert twin != pair
    assert not twin.same_as(pair)
    assert pair != (1, 2, "x")
    assert pair != 1


def test_hash_is_consistent_with_equality():
    pair = make_int_pair(1, 2, "x")
    same = echo(pair)
    assert hash(same) == hash(pair)
    table = {pair: "value"}
    assert table[same] == "value"
    assert len({pair, same, echo(same)}) == 1
    assert len({pair, make_int_pair(1, 2, "x")}) == 2


def test_repr_is_readable():
    pair = make_int_pair(3, 4, "named")
    text = repr(pair)
    assert text.startswith("testing.TestIntPair(")
    assert "a=3" in text
    assert "b=4" in text
    assert 'name="named"' in text


def test_objects_inside_containers_keep_identity():
    pair = make_int_pair(1, 2, "x")
    array = ffi.Array([pair, pair])
    assert array[0] == pair
    assert array[0] == array[1]
    assert pair in array
    mapping = ffi.Map({pair: "v"})
    assert mapping[pair] == "v"


def test_wrappers_hold_references_and_release_them():
    pair = make_int_pair(1, 2, "x")
    assert use_count(pair) == 1
    others = [echo(pair) for _ in range(10)]
    assert use_count(pair) == 11
    del others
    gc.collect()
    assert use_count(pair) == 1


def test_register_object_unknown_key_is_value_error_naming_it():
    key = f"no.such.Type{uuid.uuid4().hex}"
    with pytest.raises(ValueError) as info:

        @tvm.register_object(key)
        class Unknown(ffi.Object):
            pass

    assert key in str(info.value)


def test_register_object_without_a_key_uses_the_class_name():
    name = f"NoSuchClass{uuid.uuid4().hex}"
    cls = type(name, (ffi.Object,), {})
    with pytest.raises(ValueError, match=name):
        tvm.register_object(cls)


@pytest.mark.parametrize("cls", [int, object, Exception, type("Plain", (), {})])
def test_register_object_of_a_non_object_class_is_type_error_naming_it(cls):
    with pytest.raises(TypeError) as info:
        tvm.register_object("testing.TestIntPair")(cls)
    assert cls.__name__ in str(info.value)


def test_register_object_of_a_non_class_is_type_error():
    with pytest.raises(TypeError):
        tvm.register_object("testing.TestIntPair")(lambda: None)


def test_unbound_object_cannot_be_passed_to_native_code():
    unbound = ffi.Object()
    with pytest.raises(TypeError, match="not bound"):
        echo(unbound)


def test_objects_pickle_through_json_graphs():
    restored = pickle.loads(pickle.dumps(make_int_pair(1, 2, "x")))
    assert (restored.a, restored.b, restored.name) == (1, 2, "x")
    with pytest.raises(TypeError, match=r"ffi\.Function"):
        pickle.dumps(echo)


def test_functions_and_containers_are_objects():
    assert isinstance(tvm.get_global_func("testing.echo"), ffi.Object)
    assert isinstance(ffi.Array([1]), ffi.Object)
    assert isinstance(ffi.Map({}), ffi.Object)
    assert ffi.Array([1]).type_key == "ffi.Array"
    assert tvm.get_global_func("testing.echo").type_key == "ffi.Function"


def test_unbound_object_repr_says_so():
    assert repr(ffi.Object()) == "<unbound Object>"
