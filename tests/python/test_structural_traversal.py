"""Structural traversal and rewriting: walk, visit, map and mutate over containers (items of
arrays and lists, values of maps and dicts) with typed callbacks, interrupts, pruning and
copy-on-write of changed paths."""

from __future__ import annotations

from typing import Any

import pytest

from tvm import ffi


def test_walk_calls_the_first_matching_callback_in_pre_and_post_order() -> None:
    root = ffi.Array([ffi.Array([1]), 2.5, "tag"])
    trace: list[str] = []
    callbacks = [
        (ffi.Array, lambda v: trace.append(f"array:{len(v)}")),
        ((int, float), lambda v: trace.append(f"number:{v}")),
        (str, lambda v: trace.append(f"str:{v}")),
    ]
    assert ffi.structural_walk(root, callbacks, order=ffi.WalkOrder.PREORDER) is None
    assert trace == ["array:3", "array:1", "number:1", "number:2.5", "str:tag"]
    trace.clear()
    assert ffi.structural_walk(root, callbacks) is None
    assert trace == ["number:1", "array:1", "number:2.5", "str:tag", "array:3"]


def test_walk_skips_children_and_map_keys_and_matches_objects_and_any() -> None:
    trace: list[str] = []
    ffi.structural_walk(
        ffi.Array([ffi.Array([1]), 2]),
        [
            (ffi.Array, lambda v: trace.append("array") or ffi.WalkResult.SKIP),
            (object, lambda v: trace.append("other")),
        ],
        order="pre",
    )
    assert trace == ["array"]

    seen: list[Any] = []
    root = ffi.Array([ffi.Map({"key": ffi.Dict({"inner": True})}), 3])
    ffi.structural_walk(
        root, [(ffi.Object, lambda v: seen.append(type(v).__name__)), (object, seen.append)]
    )
    assert seen == [True, "Dict", "Map", 3, "Array"]

    # The inline and heap forms of strings and bytes both match `str` and `bytes`.
    texts: list[Any] = []
    ffi.structural_walk(
        ffi.Array(["short", "a longer string", b"b", b"longer bytes"]),
        [(str, texts.append), (bytes, texts.append)],
    )
    assert texts == ["short", "a longer string", b"b", b"longer bytes"]


def test_walk_stops_at_an_interrupt_and_returns_it() -> None:
    def find_two(value: int) -> ffi.VisitInterrupt | None:
        return ffi.VisitInterrupt({"found": value}) if value == 2 else None

    result = ffi.structural_walk(ffi.Array([1, 2, 3]), (int, find_two), order="pre")
    assert isinstance(result, ffi.VisitInterrupt)
    assert ffi.structural_equal(result.value, {"found": 2})
    assert ffi.VisitInterrupt().value is None


def test_visit_callbacks_own_the_descent() -> None:
    trace: list[Any] = []

    def on_array(value: ffi.Array, visitor: ffi.StructuralVisitor) -> Any:
        assert isinstance(visitor, ffi.StructuralVisitor)
        assert visitor.def_region_kind() == ffi.DefRegionKind.NONE
        trace.append("array")
        return visitor.default_visit(value[0])

    def on_int(value: int, visitor: ffi.StructuralVisitor) -> Any:
        trace.append(value)
        return ffi.VisitInterrupt("done") if value == 2 else None

    root = ffi.Array([ffi.Array([1, 2, 3]), ffi.Array([4])])
    result = ffi.structural_visit(root, [(ffi.Array, on_array), (int, on_int)])
    # The root's callback asked for the default descent of its first item only: that array's
    # own callback is bypassed, its items reach theirs.
    assert trace == ["array", 1, 2]
    assert result.value == "done"

    def fail(value: int, visitor: ffi.StructuralVisitor) -> None:
        raise ValueError(f"cannot visit {value}")

    with pytest.raises(ValueError, match="cannot visit 1"):
        ffi.structural_visit(ffi.Array([1, 2]), (int, fail))


def test_region_kind_is_scoped_by_with_def_region_kind() -> None:
    kinds: list[ffi.DefRegionKind] = []

    def on_array(value: ffi.Array, visitor: ffi.StructuralVisitor) -> Any:
        def inside() -> Any:
            kinds.append(visitor.def_region_kind())
            return visitor.visit(value[0])

        result = visitor.with_def_region_kind(ffi.DefRegionKind.DEF_SIMPLE, inside)
        kinds.append(visitor.def_region_kind())
        return result

    def on_int(value: int, visitor: ffi.StructuralVisitor) -> None:
        kinds.append(visitor.def_region_kind())

    ffi.structural_visit(ffi.Array([7]), [(ffi.Array, on_array), (int, on_int)])
    simple, none = ffi.DefRegionKind.DEF_SIMPLE, ffi.DefRegionKind.NONE
    assert kinds == [simple, simple, none]


def test_map_copies_changed_paths_and_shares_the_rest() -> None:
    shared = ffi.Array([1])
    untouched = ffi.Array(["x"])
    root = ffi.Array([shared, untouched, ffi.Map({"k": ffi.Array([5])})])
    mapped = ffi.structural_map(root, (int, lambda v: v * 10))
    assert not mapped.same_as(root)
    assert list(mapped[0]) == [10] and list(shared) == [1]
    assert mapped[1].same_as(untouched)
    assert list(mapped[2]["k"]) == [50] and list(root[2]["k"]) == [5]

    # Nothing changed: the root itself comes back.
    assert ffi.structural_map(root, (str, lambda v: v)).same_as(root)
    # Keys stay; strings and bytes of both forms map.
    replaced = ffi.structural_map(ffi.Map({"key": "value"}), (str, str.upper))
    assert dict(replaced.items()) == {"key": "VALUE"}
    lengths = ffi.structural_map(
        ffi.Array(["1234567", "12345678", b"1234567", b"12345678"]), [(str, len), (bytes, len)]
    )
    assert list(lengths) == [7, 8, 7, 8]


def test_map_orders_callbacks_and_maps_pre_order_replacements() -> None:
    def run(order: str) -> list[str]:
        trace: list[str] = []

        def on_array(value: ffi.Array) -> ffi.Array:
            trace.append(f"array:{len(value)}")
            return value

        def on_int(value: int) -> int:
            trace.append(f"int:{value}")
            return value + 1

        mapped = ffi.structural_map(
            ffi.Array([ffi.Array([1]), 2]), [(ffi.Array, on_array), (int, on_int)], order=order
        )
        assert list(mapped[0]) == [2] and mapped[1] == 3
        return trace

    assert run("pre") == ["array:2", "array:1", "int:1", "int:2"]
    assert run("post") == ["int:1", "array:1", "int:2", "array:2"]

    # A pre-order replacement is itself mapped.
    mapped = ffi.structural_map(
        ffi.Array([0]), (int, lambda v: ffi.Array([1, 2]) if v == 0 else v * 10), order="pre"
    )
    assert ffi.structural_equal(mapped, [[10, 20]])


def test_map_of_lists_and_dicts_copies_them() -> None:
    items = ffi.List([1, 2])
    table = ffi.Dict({"a": 1})
    mapped = ffi.structural_map(ffi.Array([items, table]), (int, lambda v: -v))
    assert list(mapped[0]) == [-1, -2] and list(items) == [1, 2]
    assert isinstance(mapped[0], ffi.List)
    assert mapped[1]["a"] == -1 and table["a"] == 1
    assert isinstance(mapped[1], ffi.Dict)


def test_mutate_callbacks_own_the_rewrite_and_get_the_inplace_mode() -> None:
    trace: list[Any] = []

    def on_array(value: ffi.Array, mutator: ffi.StructuralMutator) -> ffi.Array:
        trace.append("array")
        return ffi.Array([mutator.mutate(value[0]), 10])

    def on_int(value: int, mutator: ffi.StructuralMutator, mode: int) -> int:
        assert type(mode) is int
        trace.append((value, ffi.InplaceMode(mode)))
        return value + 1

    mapped = ffi.structural_mutate(ffi.Array([1, 2]), [(ffi.Array, on_array), (int, on_int)])
    assert list(mapped) == [2, 10]
    assert trace == ["array", (1, ffi.InplaceMode.DISALLOW)]

    root = ffi.Array([3, 4])
    defaulted = ffi.structural_mutate(
        root,
        [
            (ffi.Array, lambda value, mutator: mutator.default_mutate(value)),
            (int, lambda value, mutator: value * 2),
        ],
    )
    assert list(defaulted) == [6, 8] and list(root) == [3, 4]
    assert ffi.structural_mutate(ffi.Array(["only"]), (ffi.Array, lambda v, m: m.mutate(v[0]))) == (
        "only"
    )


def test_mutate_remaps_variables_by_identity() -> None:
    seen: list[Any] = []

    def on_array(value: ffi.Array, mutator: ffi.StructuralMutator) -> Any:
        key = ffi.Array([])
        assert mutator.var_remap_get(key) is None
        mutator.var_remap_set(key, "mapped")
        seen.append(mutator.var_remap_get(key))
        return value

    ffi.structural_mutate(ffi.Array([1]), (ffi.Array, on_array))
    assert seen == ["mapped"]

    def bad_key(value: ffi.Array, mutator: ffi.StructuralMutator) -> Any:
        return mutator.var_remap_get(5)

    with pytest.raises(TypeError, match="object-backed"):
        ffi.structural_mutate(ffi.Array([1]), (ffi.Array, bad_key))


def test_bad_callbacks_and_results_raise_clear_errors() -> None:
    with pytest.raises(TypeError, match="callback type"):
        ffi.structural_walk([1], (complex, print))
    with pytest.raises(TypeError, match="callbacks must be"):
        ffi.structural_walk([1], 42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"\(type, callback\) tuples"):
        ffi.structural_map([1], [int])
    with pytest.raises(ValueError, match="order"):
        ffi.structural_walk([1], print, order="sideways")
    with pytest.raises(TypeError, match="WalkResult or a VisitInterrupt"):
        ffi.structural_walk(ffi.Array([1]), (int, lambda v: "go on"))
    with pytest.raises(ValueError, match="not a WalkResult"):
        ffi.structural_walk(ffi.Array([1]), (int, lambda v: 7), order="pre")
    with pytest.raises(TypeError, match="None or a VisitInterrupt"):
        ffi.structural_visit(ffi.Array([1]), (int, lambda v, visitor: 3))
    with pytest.raises(TypeError, match=r"\(value, mutator\)"):
        ffi.structural_mutate(ffi.Array([1]), (int, lambda v: v))
    with pytest.raises(ValueError, match="not a DefRegionKind"):
        ffi.structural_visit(
            ffi.Array([1]), (ffi.Array, lambda v, visitor: visitor.with_def_region_kind(9, list))
        )


def test_a_cyclic_list_is_an_error_not_a_crash() -> None:
    items = ffi.List([1])
    items.append(items)
    with pytest.raises(ValueError, match="nested too deeply"):
        ffi.structural_walk(items, (int, lambda v: None))
    with pytest.raises(ValueError, match="nested too deeply"):
        ffi.structural_map(items, (int, lambda v: v + 1))
    items.pop()
