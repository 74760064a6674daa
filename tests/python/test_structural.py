"""Structural equality and hashing, first mismatch, JSON-graph serialization, pickling, deep copy
and repr of values and objects (the reflection-powered features of the core)."""

import copy
import json
import math
import pickle
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm
from tvm import ffi

make_int_pair = tvm.get_global_func("testing.make_int_pair")

leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
)
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=60, deadline=None)
@given(values)
def test_json_graph_round_trip_is_structurally_equal(value: object) -> None:
    converted = ffi.convert(value)
    text = ffi.to_json_graph_str(converted)
    assert ffi.structural_equal(ffi.from_json_graph_str(text), converted)
    assert ffi.structural_equal(pickle.loads(pickle.dumps(ffi.convert([converted])))[0], converted)


@settings(max_examples=60, deadline=None)
@given(values)
def test_deep_copy_is_equal_and_hashes_alike(value: object) -> None:
    converted = ffi.convert([value])
    copied = copy.deepcopy(converted)
    assert ffi.structural_equal(copied, converted)
    assert ffi.structural_hash(copied) == ffi.structural_hash(converted)


def test_hash_is_stable_across_processes() -> None:
    value = {"items": [1, 2.5, "x", None, True], "nested": {"k": [3]}}
    code = f"from tvm import ffi; print(ffi.structural_hash({value!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout.strip()) == ffi.structural_hash(value)


def test_maps_compare_in_any_order_and_dicts_differ_from_maps() -> None:
    lhs = {"items": [1, 2, {"k": 3}], "meta": {"tag": "x"}}
    rhs = {"meta": {"tag": "x"}, "items": [1, 2, {"k": 3}]}
    assert ffi.structural_equal(lhs, rhs)
    assert ffi.structural_hash(lhs) == ffi.structural_hash(rhs)
    assert not ffi.structural_equal(ffi.Map({"a": 1}), ffi.Dict({"a": 1}))
    assert not ffi.structural_equal(1, 1.0)
    assert ffi.structural_equal(math.nan, math.nan)


def test_first_mismatch_reports_paths() -> None:
    assert ffi.get_first_structural_mismatch([1, 2], [1, 2]) is None
    lhs, rhs = ffi.get_first_structural_mismatch([1, [2, 3]], [1, [2, 4]])
    assert repr(lhs) == repr(rhs) == "<root>[1][1]"
    lhs, rhs = ffi.get_first_structural_mismatch([1, 2, 3], [1, 2])
    assert (repr(lhs), repr(rhs)) == ("<root>[2]", "<root>[<missing:2>]")
    steps = lhs.to_steps()
    assert [(s.kind, s.key) for s in steps] == [(ffi.AccessKind.ARRAY_ITEM, 2)]
    assert lhs.parent.is_prefix_of(lhs) and not lhs.is_prefix_of(lhs.parent)


def test_structural_key_in_dict_and_map() -> None:
    k1 = ffi.StructuralKey({"a": [1, 2], "b": 3})
    k2 = ffi.StructuralKey({"b": 3, "a": [1, 2]})
    k3 = ffi.StructuralKey({"a": [1, 2], "b": 4})
    assert k1 == k2 and k1 != k3 and hash(k1) == hash(k2)
    assert {k1: "x", k3: "y"}[k2] == "x"
    assert len(ffi.Map({k1: 1, k2: 2, k3: 3})) == 2


def test_objects_pickle_copy_and_print() -> None:
    pair = make_int_pair(3, 7, "p")
    assert repr(pair) == 'testing.TestIntPair(a=3, b=7, name="p")'
    graph = json.loads(ffi.to_json_graph_str(pair))
    root = graph["nodes"][graph["root_index"]]
    assert root["type"] == "testing.TestIntPair"
    assert root["data"]["a"] == 3 and root["data"]["b"] == 7
    restored = pickle.loads(pickle.dumps(pair))
    assert ffi.structural_equal(restored, pair) and not restored.same_as(pair)
    shared = ffi.Array([pair, pair])
    copied = copy.deepcopy(shared)
    assert copied[0].same_as(copied[1]) and not copied[0].same_as(pair)


def test_bad_input_raises_clear_errors() -> None:
    with pytest.raises(ValueError, match="Expecting value"):
        ffi.from_json_graph_str("not json")
    parse = tvm.get_global_func("ffi.json.Parse")
    with pytest.raises(ValueError, match=r"Number 1e99999 is out of range .* line 1 column 1"):
        parse("1e99999")
    with pytest.raises(ValueError, match=r"Number -2E400 is out of range .* \(char 4\)"):
        parse("[1, -2E400]")
    with pytest.raises(ValueError, match="root_index"):
        ffi.from_json_graph_str('{"nodes": []}')
    with pytest.raises(ValueError, match="out of range"):
        ffi.from_json_graph_str('{"root_index": 5, "nodes": []}')
    with pytest.raises(KeyError, match=r"no\.such\.Type"):
        ffi.from_json_graph_str(
            '{"root_index": 0, "nodes": [{"type": "no.such.Type", "data": {}}]}'
        )
    with pytest.raises(ValueError, match="refers back"):
        ffi.from_json_graph_str('{"root_index": 0, "nodes": [{"type": "ffi.Array", "data": [0]}]}')
    cyclic = ffi.List([1])
    cyclic.append(ffi.Array([cyclic]))
    with pytest.raises(ValueError, match="cyclic"):
        ffi.to_json_graph_str(cyclic)
    cyclic.clear()
    with pytest.raises(TypeError, match=r"ffi\.Function"):
        ffi.structural_hash(make_int_pair)
    with pytest.raises(TypeError, match=r"ffi\.Function"):
        ffi.to_json_graph_str(make_int_pair)
