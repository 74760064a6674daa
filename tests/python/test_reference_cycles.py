"""Reference cycles among containers (issue 31): reference counting never frees a ``List`` or
``Dict`` that contains itself and Python's ``gc`` cannot see into one, as the guide says;
``tvm.ffi.break_cycles`` breaks the cycles reachable from a value so that they are freed."""

from __future__ import annotations

import gc
import weakref

from hypothesis import given, settings
from hypothesis import strategies as st

from isolated import run_isolated
from tvm import ffi
from tvm.ffi.dataclasses import py_class


class Marker:
    """A Python object whose release a weak reference observes."""


@py_class("test.reference_cycles.Node")
class Node:
    next: Node | None = None
    payload: object = None


def test_a_list_that_contains_itself_is_never_freed_by_gc():
    # The documented behaviour, in a fresh interpreter (the cycle stays for the process).
    output = run_isolated(
        """
        import gc, weakref
        from tvm import ffi
        class Marker:
            pass
        marker = Marker()
        seen = weakref.ref(marker)
        items = ffi.List([marker])
        items.append(items)
        table = ffi.Dict({"marker": Marker()})
        table["self"] = table
        seen_too = weakref.ref(table["marker"])
        del marker, items, table
        gc.collect()
        print(seen() is not None, seen_too() is not None)
        """
    )
    assert output == "True True"


def test_break_cycles_frees_lists_and_dicts_that_contain_themselves():
    marker = Marker()
    seen = weakref.ref(marker)
    items = ffi.List([marker, 1])
    items.append(items)
    table = ffi.Dict({"items": items})
    items.append(table)
    del marker
    assert ffi.break_cycles(items) == 2
    assert (len(items), len(table)) == (0, 0)
    del items, table
    gc.collect()
    assert seen() is None


def test_break_cycles_resets_the_fields_that_close_a_cycle_of_objects():
    marker = Marker()
    seen = weakref.ref(marker)
    a = Node(payload=marker)
    b = Node(next=a)
    a.next = b
    del marker
    assert ffi.break_cycles(b) == 2
    assert a.next is None and b.next is None and seen() is a.payload
    del a, b
    gc.collect()
    assert seen() is None


def test_values_on_no_cycle_are_left_alone():
    shared = ffi.List([1, 2])
    dag = ffi.Array([shared, ffi.Dict({"again": shared})])
    assert ffi.break_cycles(dag) == 0
    assert list(shared) == [1, 2]
    assert ffi.break_cycles(5) == 0
    assert ffi.break_cycles([shared, shared]) == 0  # a Python list becomes a new Array


def test_a_cycle_through_a_python_object_is_not_seen_and_clear_breaks_it():
    # The native walk does not look inside Python objects: the guide says to clear the
    # container instead.
    holder = Marker()
    seen = weakref.ref(holder)
    items = ffi.List([holder])
    holder.items = items  # type: ignore[attr-defined]
    assert ffi.break_cycles(items) == 0
    items.clear()
    del holder, items
    gc.collect()
    assert seen() is None


def _reach(edges: dict[int, list[int]], start: int) -> set[int]:
    """The nodes reachable from ``start`` through one edge or more."""
    seen: set[int] = set()
    todo = list(edges[start])
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(edges[node])
    return seen


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 7), max_size=3), min_size=1, max_size=8))
def test_break_cycles_empties_exactly_the_lists_on_cycles_reachable_from_the_root(out_edges):
    n = len(out_edges)
    edges = {i: [j % n for j in targets] for i, targets in enumerate(out_edges)}
    lists = [ffi.List() for _ in range(n)]
    for i, targets in edges.items():
        for j in targets:
            lists[i].append(lists[j])
    reachable = {0} | _reach(edges, 0)
    on_cycle = {i for i in reachable if i in _reach(edges, i)}
    assert ffi.break_cycles(lists[0]) == len(on_cycle)
    for i in range(n):
        assert len(lists[i]) == (0 if i in on_cycle else len(edges[i])), (edges, i)
    for i in range(n):  # cycles the root does not reach: broken too, so that none leaks
        ffi.break_cycles(lists[i])
