"""Graphs whose nodes are shared many times (node ``i`` holding node ``i - 1`` twice, 2 KB of
JSON for 2^64 paths): hashing, equality, ``==``, ``repr``, first mismatches, serialization and
deep copy remember shared nodes, so they take time linear in the distinct nodes and give the
results of the same graph unfolded into a tree."""

import copy
import json
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm
from isolated import run_isolated
from tvm import ffi

CHAIN_SCRIPT = """
import copy, json, pickle
import tvm
from tvm import ffi

def chain(n, leaf, kind):
    nodes = [{"type": "int", "data": leaf}, {"type": "ffi.String", "data": "a"},
             {"type": "ffi.String", "data": "b"}, {"type": "ffi.Array", "data": [0]}]
    for _ in range(n):
        prev = len(nodes) - 1
        data = [1, prev, 2, prev] if kind == "ffi.Map" else [prev, prev]
        nodes.append({"type": kind, "data": data})
    return json.dumps({"root_index": len(nodes) - 1, "nodes": nodes})

for kind in ["ffi.Array", "ffi.List", "ffi.Map"]:
    text = chain(64, 1, kind)
    a = ffi.from_json_graph_str(text)
    b = pickle.loads(pickle.dumps(ffi.from_json_graph_str(text)))
    c = ffi.from_json_graph_str(chain(64, 2, kind))
    out = [kind, len(text) < 4096]
    out.append(ffi.structural_hash(a) == ffi.structural_hash(b) != ffi.structural_hash(c))
    out.append(ffi.structural_equal(a, b) and not ffi.structural_equal(a, c))
    out.append(a == b and a != c)
    out.append(ffi.get_first_structural_mismatch(a, b) is None)
    lhs, rhs = ffi.get_first_structural_mismatch(a, c)
    out.append(repr(lhs).count("[") >= 64)
    rec_eq = tvm.get_global_func("ffi.RecursiveEq")
    rec_hash = tvm.get_global_func("ffi.RecursiveHash")
    out.append(rec_eq(a, b) and not rec_eq(a, c) and rec_hash(a) == rec_hash(b))
    for text_of in (repr, str, tvm.get_global_func("ffi.ReprPrint")):
        printed = text_of(a)
        out.append(len(printed) < 64 * 200 and "<same as <root>[" in printed)
    out.append(len(ffi.to_json_graph_str(a)) < 4096 and len(pickle.dumps(a)) < 4096)
    out.append(ffi.structural_equal(copy.deepcopy(a), a))
    print(*out)
"""


def test_a_64_node_chain_from_json_or_pickle_returns_at_once() -> None:
    # Each walk unfolded would take 2^64 steps: a hang, which the timeout turns into a failure.
    lines = run_isolated(CHAIN_SCRIPT, timeout=120).splitlines()
    assert [line.split()[0] for line in lines] == ["ffi.Array", "ffi.List", "ffi.Map"]
    for line in lines:
        assert set(line.split()[1:]) == {"True"}, line


# The longest text of a shared value printed again in full (`tvm_ffi::extra::repr::REPEAT_LIMIT`).
REPEAT_LIMIT = 80

# A DAG: node k is a container of leaves and of earlier nodes (by index, so shared at will).
leaves = st.integers(-3, 3) | st.sampled_from(["a", "b", 1.5, None])
dag_specs = st.lists(
    st.tuples(
        st.sampled_from(["array", "list", "map"]),
        st.lists(st.one_of(leaves.map(lambda v: ("leaf", v)), st.integers(0, 30)), max_size=4),
    ),
    min_size=1,
    max_size=12,
)


def build(spec: list, shared: bool, change: object = None) -> object:
    """The last node of ``spec``: with each node built once and shared where ``shared``, else
    unfolded into a fresh tree; ``change`` replaces the first leaf met."""
    made: dict = {}
    changed = [False]

    def node(k: int) -> object:
        if shared and k in made:
            return made[k]
        kind, items = spec[k]
        values = []
        for item in items:
            if isinstance(item, tuple):
                value = item[1]
                if change is not None and not changed[0]:
                    value, changed[0] = change, True
                values.append(value)
            elif k > 0:
                values.append(node(item % k))
        if kind == "array":
            built: object = ffi.Array(values)
        elif kind == "list":
            built = ffi.List(values)
        else:
            built = ffi.Map({f"k{i}": v for i, v in enumerate(values)})
        made[k] = built
        return built

    return node(len(spec) - 1)


@settings(max_examples=80, deadline=None)
@given(dag_specs)
def test_a_random_dag_hashes_and_compares_as_its_unfolded_tree(spec: list) -> None:
    dag, tree = build(spec, shared=True), build(spec, shared=False)
    assert ffi.structural_hash(dag) == ffi.structural_hash(tree)
    assert ffi.structural_equal(dag, tree) and ffi.structural_equal(tree, dag)
    assert ffi.get_first_structural_mismatch(dag, tree) is None
    assert dag == tree and tree == dag
    rec_eq = tvm.get_global_func("ffi.RecursiveEq")
    rec_hash = tvm.get_global_func("ffi.RecursiveHash")
    assert rec_eq(dag, tree) and rec_hash(dag) == rec_hash(tree)
    # Printed text differs only where a long shared value is named by its path.
    if len(repr(tree)) <= REPEAT_LIMIT:
        assert repr(dag) == repr(tree)
    assert ffi.structural_equal(pickle.loads(pickle.dumps(dag)), tree)
    assert ffi.structural_equal(copy.deepcopy(dag), tree)
    # A change of a leaf is found at the same place in both.
    has_leaf = any(isinstance(item, tuple) for _, items in spec for item in items)
    if has_leaf:
        other = build(spec, shared=False, change="changed")
        if not ffi.structural_equal(tree, other):
            found = ffi.get_first_structural_mismatch(dag, other)
            expected = ffi.get_first_structural_mismatch(tree, other)
            assert found is not None and expected is not None
            assert [repr(p) for p in found] == [repr(p) for p in expected]
            assert ffi.structural_hash(dag) != ffi.structural_hash(other)


def test_a_long_shared_value_prints_once_then_as_its_path() -> None:
    small = ffi.Array([1, 2])
    assert repr(ffi.List([small, small])) == "[[1, 2], [1, 2]]"
    big = ffi.Array(list(range(40)))
    text = repr(ffi.List([big, {"k": big}]))
    assert text == f"[{list(range(40))}, {{'k': <same as <root>[0]>}}]"
    printed = tvm.get_global_func("ffi.ReprPrint")(ffi.Map({"a": big, "b": ffi.Array([big])}))
    assert printed.count("39") == 1
    assert '<same as <root>["a"]>' in printed or '<same as <root>["b"][0]>' in printed


def test_json_graph_devices_out_of_range_and_deep_graphs_are_refused_by_name() -> None:
    graph = '{{"root_index": 0, "nodes": [{{"type": "Device", "data": [{}, 0]}}]}}'
    assert str(ffi.from_json_graph_str(graph.format(2))) == "cuda:0"
    with pytest.raises(ValueError, match="device type 4294967298 is out of range"):
        ffi.from_json_graph_str(graph.format(2**32 + 2))
    nodes = [{"type": "ffi.Array", "data": [i + 1]} for i in range(10_001)]
    nodes.append({"type": "int", "data": 1})
    with pytest.raises(ValueError, match="nested too deeply") as err:
        ffi.from_json_graph_str(json.dumps({"root_index": 0, "nodes": nodes}))
    assert "refers back" not in str(err.value)


def test_shared_objects_and_cycles_in_containers_print_as_python_would() -> None:
    make_int_pair = tvm.get_global_func("testing.make_int_pair")
    pair = make_int_pair(3, 7, "p")
    assert repr(ffi.List([pair, pair])) == f"[{pair!r}, {pair!r}]"
    named = make_int_pair(3, 7, "x" * 100)
    text = repr(ffi.Map({"a": ffi.Array([named]), "b": named}))
    assert text == f"{{'a': [{named!r}], 'b': <same as <root>['a'][0]>}}"
    # A list holding itself prints as `[...]` inside itself, wherever it is met.
    looped = ffi.List([1])
    looped.append(looped)
    assert repr(ffi.Array([looped, looped])) == "[[1, [...]], [1, [...]]]"
    assert repr(looped) == "[1, [...]]"
    looped.clear()
    # An equal pair found once is equal wherever it is met again; an unequal one is not.
    shared = ffi.Array([ffi.Array([1]), ffi.Array([2])])
    other = ffi.Array([ffi.Array([1]), ffi.Array([2])])
    assert ffi.Array([shared, shared, shared]) == ffi.Array([other, other, other])
    assert ffi.Array([shared, shared]) != ffi.Array([other, ffi.Array([ffi.Array([1])])])
    assert ffi.Map({"a": shared, "b": shared}) == ffi.Map({"a": other, "b": other})
