"""Array, List, Map, Dict and Shape behave as Python sequences and mappings (issue 3, §4)."""

import collections.abc as abc
import gc

import pytest

import tvm
from tvm import ffi

echo = tvm.get_global_func("testing.echo")
use_count = tvm.get_global_func("testing.object_use_count")


def make_array(items):
    return ffi.Array(items)


def make_array_from_native(items):
    return echo(list(items))


def make_list(items):
    return ffi.List(items)


def make_list_from_native(items):
    return tvm.get_global_func("ffi.List")(*items)


SEQUENCES = [make_array, make_array_from_native, make_list, make_list_from_native]
SEQUENCE_IDS = ["Array", "Array-native", "List", "List-native"]


def make_map(source):
    return ffi.Map(source)


def make_map_from_native(source):
    return echo(dict(source))


def make_dict(source):
    return ffi.Dict(source)


def make_dict_from_native(source):
    flat = [x for pair in source.items() for x in pair]
    return tvm.get_global_func("ffi.Dict")(*flat)


MAPPINGS = [make_map, make_map_from_native, make_dict, make_dict_from_native]
MAPPING_IDS = ["Map", "Map-native", "Dict", "Dict-native"]


def missing_methods(value, abc_class):
    """The methods of ``abc_class`` (public ones and the abstract dunders) ``value`` lacks."""
    names = [name for name in dir(abc_class) if not name.startswith("_")]
    names += sorted(abc_class.__abstractmethods__)
    names += ["__iter__", "__len__"]
    return [name for name in names if not hasattr(value, name)]


# ---- sequences -------------------------------------------------------------------------------


@pytest.fixture(params=SEQUENCES, ids=SEQUENCE_IDS)
def make_seq(request):
    return request.param


def test_sequence_len_and_iteration(make_seq):
    seq = make_seq([10, "x", 2.5, None])
    assert len(seq) == 4
    assert list(seq) == [10, "x", 2.5, None]
    assert [x for x in seq] == [10, "x", 2.5, None]
    assert len(make_seq([])) == 0
    assert list(make_seq([])) == []


def test_sequence_iteration_is_repeatable(make_seq):
    seq = make_seq([1, 2, 3])
    assert list(seq) == list(seq) == [1, 2, 3]
    it = iter(seq)
    assert next(it) == 1
    assert list(it) == [2, 3]


def test_sequence_indexing_with_negative_indices(make_seq):
    seq = make_seq(["a", "b", "c"])
    assert [seq[0], seq[1], seq[2]] == ["a", "b", "c"]
    assert [seq[-1], seq[-2], seq[-3]] == ["c", "b", "a"]


@pytest.mark.parametrize("index", [3, 4, 100, -4, -100])
def test_sequence_index_out_of_range_names_the_index(make_seq, index):
    seq = make_seq(["a", "b", "c"])
    with pytest.raises(IndexError) as info:
        seq[index]
    assert str(index) in str(info.value)


def test_sequence_index_of_wrong_type_is_type_error(make_seq):
    seq = make_seq([1, 2])
    with pytest.raises(TypeError):
        seq["0"]


def test_sequence_slicing(make_seq):
    seq = make_seq([0, 1, 2, 3, 4])
    assert list(seq[1:3]) == [1, 2]
    assert list(seq[::-1]) == [4, 3, 2, 1, 0]
    assert list(seq[::2]) == [0, 2, 4]
    assert list(seq[10:]) == []


def test_sequence_contains(make_seq):
    seq = make_seq([1, "a long string value", b"bytes", None, 2.5])
    for present in [1, "a long string value", b"bytes", None, 2.5]:
        assert present in seq
    for absent in [3, "a long string valu", b"byte", 2.25, "1"]:
        assert absent not in seq


def test_sequence_contains_an_opaque_object_it_holds(make_seq):
    value = object()
    seq = make_seq([1, value])
    assert seq[1] is value
    assert value in seq
    assert object() not in seq


def test_sequence_contains_agrees_with_item_equality(make_seq):
    seq = make_seq([[1, 2], {"k": 3}])
    assert seq[0] == [1, 2]
    assert [1, 2] in seq
    assert seq[1] == {"k": 3}
    assert {"k": 3} in seq
    assert [1, 3] not in seq


def test_sequence_equals_its_contents(make_seq):
    seq = make_seq([1, "two", 3.0])
    assert seq == [1, "two", 3.0]
    assert seq == (1, "two", 3.0)
    assert [1, "two", 3.0] == seq
    assert not (seq != [1, "two", 3.0])
    assert seq != [1, "two"]
    assert seq != [1, "two", 3.5]
    assert seq != "1two3.0"
    assert seq != {0: 1, 1: "two", 2: 3.0}
    assert make_seq([]) == []


def test_nested_sequence_equals_nested_contents(make_seq):
    seq = make_seq([[1, [2]], {"a": [3]}])
    assert seq == [[1, [2]], {"a": [3]}]
    assert seq != [[1, [9]], {"a": [3]}]


def test_sequence_index_and_count(make_seq):
    seq = make_seq(["a", "b", "a", 1])
    assert seq.index("b") == 1
    assert seq.index("a") == 0
    assert seq.count("a") == 2
    assert seq.count("zzz") == 0
    with pytest.raises(ValueError, match="zzz"):
        seq.index("zzz")


def test_sequence_reversed(make_seq):
    assert list(reversed(make_seq([1, 2, 3]))) == [3, 2, 1]


def test_sequence_truthiness(make_seq):
    assert not make_seq([])
    assert make_seq([0])


@pytest.mark.parametrize(
    ("factory", "abc_class"),
    [
        (make_array, abc.Sequence),
        (make_array_from_native, abc.Sequence),
        (make_list, abc.MutableSequence),
        (make_list_from_native, abc.MutableSequence),
        (lambda items: ffi.Shape(items), abc.Sequence),
    ],
)
def test_sequences_are_collections_abc_sequences(factory, abc_class):
    seq = factory([1, 2])
    assert isinstance(seq, abc.Sequence)
    assert isinstance(seq, abc_class)
    assert not isinstance(seq, abc.Mapping)
    # Every public method the ABC promises exists (reversed() is checked by behaviour).
    assert missing_methods(seq, abc_class) == []


def test_array_is_immutable():
    array = ffi.Array([1, 2])
    with pytest.raises(TypeError):
        array[0] = 5
    with pytest.raises((TypeError, AttributeError)):
        array.append(3)
    assert list(array) == [1, 2]


def test_array_elements_keep_their_types():
    array = ffi.Array([True, 1, 1.0, "s", b"b", None, [1], {"k": 1}, tvm.cpu()])
    assert [type(x) for x in array[:6]] == [bool, int, float, str, bytes, type(None)]
    assert isinstance(array[6], ffi.Array)
    assert isinstance(array[7], ffi.Map)
    assert isinstance(array[8], ffi.Device)


def test_array_from_any_iterable():
    assert list(ffi.Array(range(4))) == [0, 1, 2, 3]
    assert list(ffi.Array(x * 2 for x in range(3))) == [0, 2, 4]
    assert list(ffi.Array()) == []


def test_array_size_from_native_matches_len():
    array_size = tvm.get_global_func("ffi.ArraySize")
    array = ffi.Array(range(17))
    assert array_size(array) == len(array) == 17
    assert array_size([1, 2, 3]) == 3


# ---- List mutation ---------------------------------------------------------------------------


@pytest.fixture(params=[make_list, make_list_from_native], ids=["List", "List-native"])
def make_mutable_seq(request):
    return request.param


def test_list_mutation(make_mutable_seq):
    lst = make_mutable_seq([1, 2])
    lst.append(3)
    lst.extend([4, 5])
    lst.insert(0, 0)
    assert list(lst) == [0, 1, 2, 3, 4, 5]
    lst[1] = "one"
    lst[-1] = "five"
    assert list(lst) == [0, "one", 2, 3, 4, "five"]
    del lst[0]
    del lst[-1]
    assert list(lst) == ["one", 2, 3, 4]
    assert lst.pop() == 4
    assert lst.pop(0) == "one"
    assert list(lst) == [2, 3]
    lst.clear()
    assert len(lst) == 0


def test_list_remove_reverse_and_iadd(make_mutable_seq):
    lst = make_mutable_seq([1, 2, 3, 2])
    lst.remove(2)
    assert list(lst) == [1, 3, 2]
    with pytest.raises(ValueError, match="42"):
        lst.remove(42)
    lst.reverse()
    assert list(lst) == [2, 3, 1]
    alias = lst
    lst += [7, 8]
    assert lst is alias
    assert list(lst) == [2, 3, 1, 7, 8]


def test_list_insert_clamps_like_python(make_mutable_seq):
    lst = make_mutable_seq([1, 2])
    lst.insert(100, "end")
    lst.insert(-100, "start")
    assert list(lst) == ["start", 1, 2, "end"]


@pytest.mark.parametrize("index", [2, 5, -3])
def test_list_assignment_out_of_range_names_the_index(make_mutable_seq, index):
    lst = make_mutable_seq([1, 2])
    with pytest.raises(IndexError, match=str(index)):
        lst[index] = 0
    with pytest.raises(IndexError, match=str(index)):
        del lst[index]
    assert list(lst) == [1, 2]


def test_list_pop_from_empty_is_index_error(make_mutable_seq):
    with pytest.raises(IndexError):
        make_mutable_seq([]).pop()


def test_list_mutation_is_shared_across_references(make_mutable_seq):
    lst = make_mutable_seq([1])
    other = echo(lst)
    assert other is not lst
    assert other.same_as(lst)
    other.append(2)
    lst[0] = "first"
    assert list(lst) == ["first", 2]
    assert list(other) == ["first", 2]
    # Native code sees the same list.
    tvm.get_global_func("ffi.ListAppend")(lst, 3)
    assert list(other) == ["first", 2, 3]
    assert tvm.get_global_func("ffi.ListSize")(other) == 3


def test_list_mutation_inside_a_callback_is_visible_to_the_caller():
    lst = ffi.List([1])
    tvm.get_global_func("testing.apply")(lambda x: x.append("from callback"), lst)
    assert list(lst) == [1, "from callback"]


def test_list_holding_itself_does_not_crash():
    lst = ffi.List([1])
    lst.append(lst)
    assert len(lst) == 2
    assert lst[1].same_as(lst)
    lst.clear()


# ---- mappings --------------------------------------------------------------------------------


@pytest.fixture(params=MAPPINGS, ids=MAPPING_IDS)
def make_mapping(request):
    return request.param


def test_mapping_len_getitem_and_iteration(make_mapping):
    mapping = make_mapping({"b": 1, "a": 2, "c": 3})
    assert len(mapping) == 3
    assert mapping["a"] == 2
    assert list(mapping) == ["b", "a", "c"]
    assert len(make_mapping({})) == 0


def test_mapping_keys_values_items_keep_insertion_order(make_mapping):
    source = {"zz": 1, "aa": 2, 10: 3, None: 4, "mm": 5, 2.5: 6}
    mapping = make_mapping(source)
    assert list(mapping.keys()) == list(source.keys())
    assert list(mapping.values()) == list(source.values())
    assert list(mapping.items()) == list(source.items())
    assert list(mapping) == list(source)


def test_mapping_order_kept_for_many_keys(make_mapping):
    keys = [f"k{(i * 7919) % 1000}" for i in range(300)]
    source = {k: i for i, k in enumerate(keys)}
    mapping = make_mapping(source)
    assert list(mapping.keys()) == list(source.keys())


def test_mapping_contains(make_mapping):
    mapping = make_mapping({"a": 1, 2: "two", "a much longer key": None})
    assert "a" in mapping
    assert 2 in mapping
    assert "a much longer key" in mapping
    assert "b" not in mapping
    assert 1 not in mapping
    assert None not in mapping


def test_mapping_missing_key_is_key_error_naming_it(make_mapping):
    mapping = make_mapping({"a": 1})
    with pytest.raises(KeyError) as info:
        mapping["no such key"]
    assert "no such key" in str(info.value)


def test_mapping_get(make_mapping):
    mapping = make_mapping({"a": 1, "n": None})
    assert mapping.get("a") == 1
    assert mapping.get("missing") is None
    assert mapping.get("missing", 42) == 42
    assert mapping.get("n", 42) is None


def test_mapping_equals_its_contents(make_mapping):
    mapping = make_mapping({"a": 1, "b": [2, 3]})
    assert mapping == {"a": 1, "b": [2, 3]}
    assert mapping == {"b": [2, 3], "a": 1}
    assert {"a": 1, "b": [2, 3]} == mapping
    assert not (mapping != {"a": 1, "b": [2, 3]})
    assert mapping != {"a": 1}
    assert mapping != {"a": 1, "b": [2, 4]}
    assert mapping != {"a": 1, "c": [2, 3]}
    assert mapping != [("a", 1), ("b", [2, 3])]
    assert make_mapping({}) == {}


def test_mapping_key_order_does_not_matter_for_equality(make_mapping):
    assert make_mapping({"x": 1, "y": 2}) == make_mapping({"y": 2, "x": 1})


def test_mapping_dict_conversion(make_mapping):
    mapping = make_mapping({"x": 1, "y": 2})
    assert dict(mapping) == {"x": 1, "y": 2}
    assert dict(mapping.items()) == {"x": 1, "y": 2}


@pytest.mark.parametrize(
    ("factory", "abc_class"),
    [
        (make_map, abc.Mapping),
        (make_map_from_native, abc.Mapping),
        (make_dict, abc.MutableMapping),
        (make_dict_from_native, abc.MutableMapping),
    ],
)
def test_mappings_are_collections_abc_mappings(factory, abc_class):
    mapping = factory({"a": 1})
    assert isinstance(mapping, abc.Mapping)
    assert isinstance(mapping, abc_class)
    assert not isinstance(mapping, abc.Sequence)
    assert missing_methods(mapping, abc_class) == []


def test_map_is_immutable():
    mapping = ffi.Map({"a": 1})
    with pytest.raises(TypeError):
        mapping["b"] = 2
    with pytest.raises(TypeError):
        del mapping["a"]
    assert dict(mapping) == {"a": 1}


def test_map_with_opaque_object_keys():
    key = object()
    mapping = echo({key: "value"})
    assert next(iter(mapping.keys())) is key
    assert key in mapping
    assert mapping[key] == "value"


def test_map_from_pairs():
    mapping = ffi.Map([("x", 1), ("y", 2)])
    assert list(mapping.items()) == [("x", 1), ("y", 2)]


# ---- Dict mutation ---------------------------------------------------------------------------


@pytest.fixture(params=[make_dict, make_dict_from_native], ids=["Dict", "Dict-native"])
def make_mutable_mapping(request):
    return request.param


def test_dict_mutation(make_mutable_mapping):
    d = make_mutable_mapping({"a": 1})
    d["b"] = 2
    d["a"] = "replaced"
    assert list(d.items()) == [("a", "replaced"), ("b", 2)]
    del d["a"]
    assert list(d.items()) == [("b", 2)]
    assert d.pop("b") == 2
    assert d.pop("b", "default") == "default"
    with pytest.raises(KeyError, match="b"):
        d.pop("b")
    with pytest.raises(KeyError, match="nope"):
        del d["nope"]
    d["x"] = 1
    d.clear()
    assert len(d) == 0


def test_dict_update_setdefault_popitem(make_mutable_mapping):
    d = make_mutable_mapping({"a": 1})
    d.update({"b": 2}, c=3)
    d.update([("d", 4)])
    assert list(d.items()) == [("a", 1), ("b", 2), ("c", 3), ("d", 4)]
    assert d.setdefault("a", 100) == 1
    assert d.setdefault("e", 5) == 5
    assert d["e"] == 5
    key, value = d.popitem()
    assert (key, value) not in d.items()
    assert len(d) == 4
    d.clear()
    with pytest.raises(KeyError):
        d.popitem()


def test_dict_keeps_insertion_order_across_deletes(make_mutable_mapping):
    d = make_mutable_mapping({})
    for key in ["q", "w", "e", "r", "t"]:
        d[key] = key.upper()
    del d["w"]
    d["y"] = "Y"
    d["q"] = "changed"
    assert list(d.keys()) == ["q", "e", "r", "t", "y"]


def test_dict_mutation_is_shared_across_references(make_mutable_mapping):
    d = make_mutable_mapping({"a": 1})
    other = echo(d)
    assert other is not d
    assert other.same_as(d)
    other["b"] = 2
    del d["a"]
    assert dict(d) == {"b": 2}
    assert dict(other) == {"b": 2}
    tvm.get_global_func("testing.apply")(lambda m: m.__setitem__("c", 3), d)
    assert dict(other) == {"b": 2, "c": 3}
    assert tvm.get_global_func("ffi.DictSize")(other) == 2


# ---- Shape -----------------------------------------------------------------------------------


def test_shape_is_a_sequence_of_ints():
    shape = ffi.Shape([2, 3, 4])
    assert len(shape) == 3
    assert list(shape) == [2, 3, 4]
    assert shape[0] == 2
    assert shape[-1] == 4
    assert shape == (2, 3, 4)
    assert shape == [2, 3, 4]
    assert shape != (2, 3)
    assert 3 in shape
    assert 5 not in shape
    assert list(ffi.Shape()) == []


@pytest.mark.parametrize("index", [3, -4])
def test_shape_index_out_of_range_names_the_index(index):
    with pytest.raises(IndexError, match=str(index)):
        ffi.Shape([2, 3, 4])[index]


def test_shape_hash_follows_value():
    assert hash(ffi.Shape([2, 3])) == hash(ffi.Shape([2, 3]))
    assert {ffi.Shape([2, 3]): "x"}[ffi.Shape([2, 3])] == "x"


def test_shape_from_native():
    shape = tvm.get_global_func("ffi.Shape")(5, 6)
    assert isinstance(shape, ffi.Shape)
    assert shape == (5, 6)
    assert echo(shape).same_as(shape)


def test_shape_rejects_non_ints():
    with pytest.raises(TypeError):
        ffi.Shape(["a"])


# ---- reference counts ------------------------------------------------------------------------


def test_containers_hold_one_reference_per_slot():
    pair = tvm.get_global_func("testing.make_int_pair")(1, 2, "p")
    assert use_count(pair) == 1
    array = ffi.Array([pair, pair, pair])
    assert use_count(pair) == 4
    d = ffi.Dict({"a": pair})
    assert use_count(pair) == 5
    del array, d
    gc.collect()
    assert use_count(pair) == 1


def test_reading_items_does_not_leak_references():
    pair = tvm.get_global_func("testing.make_int_pair")(1, 2, "p")
    array = ffi.Array([pair])
    mapping = ffi.Map({"k": pair})
    for _ in range(200):
        array[0]
        list(array)
        mapping["k"]
        list(mapping.items())
        pair in array
    gc.collect()
    assert use_count(pair) == 3


def test_huge_indices_are_index_errors_and_pop_takes_one_default():
    arr = tvm.ffi.Array([1, 2, 3])
    with pytest.raises(IndexError, match=str(2**70)):
        arr[2**70]
    with pytest.raises(TypeError, match="indices must be integers or slices, not str"):
        arr["0"]
    d = tvm.ffi.Dict()
    with pytest.raises(TypeError, match="at most 2 arguments, got 3"):
        d.pop("x", 1, 2)
    assert d.pop("x", 1) == 1


def test_repr_of_containers_holding_themselves_marks_the_cycle():
    items = ffi.List([1])
    items.append(items)
    assert repr(items) == "[1, [...]]"
    table = ffi.Dict({"n": 1})
    table["self"] = table
    assert repr(table) == "{'n': 1, 'self': {...}}"
    # The same container twice side by side is not a cycle.
    inner = ffi.List([2])
    assert repr(ffi.Array([inner, inner])) == "[[2], [2]]"
    # A cycle through two containers, and the repr works again afterwards.
    outer = ffi.List()
    middle = ffi.Dict({"back": outer})
    outer.append(middle)
    assert repr(outer) == "[{'back': [...]}]"
    assert repr(outer) == "[{'back': [...]}]"
    items.pop()
    table.pop("self")
    outer.clear()
