"""Reference cycles among containers (issue 31): reference counting never frees a ``List`` or
``Dict`` that contains itself and Python's ``gc`` cannot see into one, as the guide says;
``tvm.ffi.break_cycles`` breaks the cycles reachable from a value so that they are freed."""

from __future__ import annotations

import gc
import weakref

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
