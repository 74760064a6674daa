"""``tvm.ffi.dataclasses``: object types and enums defined from Python."""

from __future__ import annotations

import copy
import itertools
import pickle
import sys
import uuid
from dataclasses import FrozenInstanceError
from typing import Annotated, Any, Final, Optional

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm
from isolated import run_isolated
from tvm.ffi import Array, Map
from tvm.ffi.dataclasses import (
    MISSING,
    Enum,
    IntEnum,
    StrEnum,
    asdict,
    astuple,
    auto,
    entry,
    field,
    fields,
    is_dataclass,
    py_class,
    replace,
)
from tvm.ffi.serialization import from_json_graph_str, to_json_graph_str

echo = tvm.get_global_func("testing.echo")
make_object = tvm.get_global_func("ffi.MakeObjectFromPackedArgs")
_keys = itertools.count()


_run = uuid.uuid4().hex[:8]


def key(name: str) -> str:
    """A type key no other test uses, even if this module is imported again (the type table
    lives as long as the process)."""
    return f"test.dataclasses.{_run}.{name}{next(_keys)}"


@py_class(key("Point"))
class Point:
    x: int
    y: float = 2.5
    name: str = "p"
    tags: list[int] = field(default_factory=list)


@py_class(key("Node"))
class Node:
    value: int
    next: Optional[Node] = None  # noqa: UP045 - the Optional spelling is under test


@py_class(key("Leaf"), eq=True, frozen=True)
class Leaf:
    label: str
    weight: float = 1.0
    note: str = field(default="", compare=False, repr=False)


def test_init_reads_arguments_and_defaults():
    p = Point(1, name="q")
    assert (p.x, p.y, p.name, list(p.tags)) == (1, 2.5, "q", [])
    assert isinstance(p, tvm.ffi.Object)
    assert p.type_key == type(p)._tvm_type_key
    assert isinstance(p.tags, Array)


def test_default_factory_makes_a_new_value_each_time():
    calls = []

    @py_class(key("Factory"))
    class Factory:
        items: dict[str, int] = field(default_factory=lambda: calls.append(1) or {"a": 1})

    first, second = Factory(), Factory()
    assert len(calls) == 2
    assert dict(first.items) == {"a": 1} and isinstance(second.items, Map)


def test_init_type_errors_name_the_field_and_the_value():
    with pytest.raises(TypeError, match=r"\.__init__\(\) field 'x': expected int, got str"):
        Point("a")
    with pytest.raises(TypeError, match=r"field 'tags': expected int, got str"):
        Point(1, tags=[1, "two"])
    with pytest.raises(TypeError, match=r"field 'x': expected int \(64-bit\), got int"):
        Point(2**70)
    with pytest.raises(TypeError, match=r"field 'next': expected .*Node.*, got Point"):
        Node(1, Point(1))


def test_init_coerces_compatible_values():
    p = Point(np.int64(3), 1, tags=(np.int32(4), True))
    assert (p.x, p.y, list(p.tags)) == (3, 1.0, [4, 1])
    assert isinstance(p.y, float)


def test_init_argument_errors():
    with pytest.raises(TypeError, match=r"__init__\(\).*missing a required argument: 'x'"):
        Point()
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'z'"):
        Point(1, z=2)
    with pytest.raises(TypeError, match="too many positional arguments"):
        Point(1, 2.0, "n", [], 5)


def test_kw_only_init_false_and_post_init():
    @py_class(key("Options"))
    class Options:
        size: int
        mode: str = field(default="fast", kw_only=True)
        derived: int = field(default=0, init=False)

        def __post_init__(self) -> None:
            self.derived = self.size * 2

    o = Options(3, mode="slow")
    assert (o.size, o.mode, o.derived) == (3, "slow", 6)
    with pytest.raises(TypeError, match="too many positional arguments"):
        Options(3, "slow")
    with pytest.raises(TypeError, match="unexpected keyword argument 'derived'"):
        Options(3, derived=1)
    with pytest.raises(TypeError, match="init=False needs a default"):

        @py_class(key("NoDefault"))
        class NoDefault:
            hidden: int = field(init=False)


def test_assignment_checks_types_and_frozen_fields_refuse_it():
    p = Point(1)
    p.x = 7
    p.tags = [1, 2]
    assert p.x == 7 and list(p.tags) == [1, 2]
    with pytest.raises(TypeError, match=r"Point\d+ assignment to field 'x': expected int, got str"):
        p.x = "seven"
    leaf = Leaf("a")
    with pytest.raises(FrozenInstanceError):
        leaf.label = "b"

    @py_class(key("PartlyFrozen"))
    class PartlyFrozen:
        fixed: int = field(frozen=True)
        free: int = 0

    obj = PartlyFrozen(1)
    obj.free = 2
    with pytest.raises(FrozenInstanceError, match="frozen field 'fixed'"):
        obj.fixed = 3
    assert (obj.fixed, obj.free) == (1, 2)


def test_final_fields_are_frozen_and_annotated_fields_store_the_annotated_type():
    @py_class(key("Qualified"))
    class Qualified:
        ident: Final[int]
        label: Annotated[str, "shown in reports"]
        limits: list[Annotated[float, "unit: s"]] = field(default_factory=list)
        anything: Final = None
        both: Annotated[Final[int], "meta"] = 0

    obj = Qualified(1, "a", [0.5], anything="x")
    assert (obj.ident, obj.label, list(obj.limits), obj.anything, obj.both) == (
        1,
        "a",
        [0.5],
        "x",
        0,
    )
    obj.label = "b"
    obj.limits = [1.0, 2]
    assert list(obj.limits) == [1.0, 2.0]
    for name in ("ident", "anything", "both"):
        with pytest.raises(FrozenInstanceError, match=f"frozen field '{name}'"):
            setattr(obj, name, 2)
    with pytest.raises(TypeError, match="field 'label': expected str, got int"):
        obj.label = 3
    with pytest.raises(TypeError, match="field 'limits'"):
        obj.limits = ["slow"]
    with pytest.raises(TypeError, match="field 'ident': expected int, got str"):
        Qualified("one", "a")
    assert [f.type for f in fields(Qualified)][:2] == [
        Final[int],
        Annotated[str, "shown in reports"],
    ]
    assert echo(obj).same_as(obj)
    loaded = from_json_graph_str(to_json_graph_str(obj))
    assert (loaded.ident, loaded.label, list(loaded.limits), loaded.both) == (1, "b", [1.0, 2.0], 0)


def test_the_private_setter_refuses_values_of_another_type_naming_field_type_and_value():
    point = Point(1, name="kept")
    cases = [
        ("name", 5, r"field `name` of `.*Point\d+` expects `ffi.String`, got `int` \(5\)"),
        ("name", None, r"field `name` .* expects `ffi.String`, got `None`"),
        ("name", b"raw", r"field `name` .* expects `ffi.String`, got `ffi.SmallBytes`"),
        ("x", "seven", r"field `x` .*: a field stored as Int cannot hold .*ffi.SmallStr"),
        ("tags", "ab", r"field `tags` .* expects `ffi.Array`, got `ffi.SmallStr` \(\"ab\"\)"),
    ]
    for name, value, message in cases:
        with pytest.raises(TypeError, match=message):
            tvm._native._object_set_field(point, name, value)
    assert (point.x, point.name, list(point.tags)) == (1, "kept", [])
    tvm._native._object_set_field(point, "name", "a name longer than an inline string")
    assert point.name == "a name longer than an inline string"


def test_native_field_writes_respect_frozen_and_read_only_fields():
    leaf = Leaf("a")
    with pytest.raises(AttributeError, match="read-only"):
        tvm._native._object_set_field(leaf, "label", "b")
    pair = tvm.get_global_func("testing.make_int_pair")(1, 2, "pair")
    with pytest.raises(AttributeError, match="read-only"):
        tvm._native._object_set_field(pair, "a", 5)
    with pytest.raises(AttributeError, match="no field 'zzz'"):
        tvm._native._object_set_field(Point(1), "zzz", 5)
    unbound = Point.__new__(Point)
    with pytest.raises(AttributeError):
        unbound.x = 1
    with pytest.raises(AttributeError):
        _ = unbound.x
    with pytest.raises(TypeError, match="already initialized"):
        Point.__ffi_init__(Point(1), 2)
    assert leaf.label == "a" and pair.a == 1


def test_instances_are_runtime_objects_that_come_back_as_themselves():
    p = Point(4, tags=[1])
    back = echo(p)
    assert type(back) is Point and back.same_as(p)
    arr = Array([p, Node(1)])
    assert type(arr[0]) is Point and type(arr[1]) is Node
    assert tvm.get_global_func("ffi.ReprPrint")(p) == repr(p)


def test_repr_goes_through_the_runtime_printer():
    assert repr(Node(1, Node(2))) == (
        f"{Node._tvm_type_key}(value=1, next={Node._tvm_type_key}(value=2, next=None))"
    )
    assert "note" not in repr(Leaf("x", note="hidden"))


def test_native_creation_uses_defaults_and_factories():
    p = make_object(Point._tvm_type_key, "x", 9)
    assert type(p) is Point
    assert (p.x, p.y, p.name, list(p.tags)) == (9, 2.5, "p", [])
    with pytest.raises(TypeError, match="Required field `x`"):
        make_object(Point._tvm_type_key)


def test_structural_equality_and_hash_follow_fields():
    a, b = Node(1, Node(2)), Node(1, Node(2))
    assert tvm.ffi.structural_equal(a, b)
    assert tvm.ffi.structural_hash(a) == tvm.ffi.structural_hash(b)
    assert not tvm.ffi.structural_equal(a, Node(1, Node(3)))
    # A field with compare=False is ignored.
    assert tvm.ffi.structural_equal(Leaf("x", note="a"), Leaf("x", note="b"))


def test_structural_kind_none_is_not_comparable():
    @py_class(key("Opaque"), structural_eq=None)
    class Opaque:
        v: int

    with pytest.raises(TypeError):
        tvm.ffi.structural_equal(Opaque(1), Opaque(1))


def test_field_structural_eq_marks_definitions_and_ignored_fields():
    @py_class(key("Var"), structural_eq="var")
    class Var:
        name: str

    @py_class(key("Let"))
    class Let:
        var: Var = field(structural_eq="def")
        body: Any = None
        comment: str = field(default="", structural_eq="ignore")

    x, y, z = Var("x"), Var("y"), Var("z")
    assert tvm.ffi.structural_equal(Let(x, x, "a"), Let(y, y, "b"))
    assert tvm.ffi.structural_hash(Let(x, x)) == tvm.ffi.structural_hash(Let(y, y))
    assert not tvm.ffi.structural_equal(Let(x, x), Let(y, z))
    # Free variables differ unless mapped.
    assert not tvm.ffi.structural_equal(x, y)
    assert tvm.ffi.structural_equal(x, y, map_free_vars=True)
    with pytest.raises(ValueError, match="structural_eq of a field"):
        field(structural_eq="sometimes")


def test_eq_hash_and_order_options():
    assert Leaf("a", 1.0) == Leaf("a", 1.0)
    assert Leaf("a", note="x") == Leaf("a", note="y")
    assert Leaf("a") != Leaf("b")
    assert hash(Leaf("a")) == hash(Leaf("a"))
    # Without eq, instances compare by identity.
    assert Point(1) != Point(1)

    @py_class(key("Version"), eq=True, order=True)
    class Version:
        major: int
        minor: int

    assert Version(1, 2) < Version(1, 3) <= Version(1, 3) < Version(2, 0)
    assert Version(2, 0) > Version(1, 9) >= Version(1, 9)
    with pytest.raises(TypeError, match="unhashable"):
        hash(Version(1, 2))


def test_pickle_deepcopy_and_json_round_trips():
    p = Point(3, 0.5, "name", [1, 2])
    for copied in (pickle.loads(pickle.dumps(p)), copy.deepcopy(p)):
        assert type(copied) is Point and not copied.same_as(p)
        assert tvm.ffi.structural_equal(copied, p)
    node = Node(1, Node(2))
    back = from_json_graph_str(to_json_graph_str(node))
    assert type(back.next) is Node and back.next.value == 2
    shallow = copy.copy(p)
    assert type(shallow) is Point and not shallow.same_as(p)
    assert shallow.tags.same_as(p.tags) and shallow.x == p.x


def test_inheritance_extends_the_parent_fields():
    @py_class(key("Base"))
    class Base:
        a: int
        b: str = "b"

    @py_class(key("Child"))
    class Child(Base):
        c: float = 0.0
        sibling: Optional[Base] = None  # noqa: UP045 - a local class, named in a string

    child = Child(1, "x", 2.0, Base(0))
    assert isinstance(child, Base)
    assert [f.name for f in fields(child)] == ["a", "b", "c", "sibling"]
    assert child.sibling.a == 0
    assert (child.a, child.b, child.c) == (1, "x", 2.0)
    assert tvm.ffi.structural_equal(copy.deepcopy(child), child)
    with pytest.raises(ValueError, match="field 'a' is already a field of a parent"):

        @py_class(key("Clash"))
        class Clash(Base):
            a: int


def test_helpers_fields_replace_asdict_is_dataclass():
    p = Point(1, tags=[2])
    assert is_dataclass(p) and is_dataclass(Point)
    assert not is_dataclass(Array([])) and not is_dataclass(1)
    names = [(f.name, f.default) for f in fields(Point)]
    assert names == [("x", MISSING), ("y", 2.5), ("name", "p"), ("tags", MISSING)]
    q = replace(p, y=4.0)
    assert (q.x, q.y, list(q.tags)) == (1, 4.0, [2]) and not q.same_as(p)
    assert asdict(Node(1, Node(2))) == {"value": 1, "next": {"value": 2, "next": None}}
    assert asdict(p) == {"x": 1, "y": 2.5, "name": "p", "tags": [2]}
    assert astuple(Node(1, Node(2))) == (1, (2, None))
    assert astuple(p) == (1, 2.5, "p", [2])
    with pytest.raises(TypeError, match="no field"):
        replace(p, z=1)
    with pytest.raises(TypeError):
        fields(object())


def test_registration_errors_are_clear_and_leave_nothing_behind():
    with pytest.raises(ValueError, match="already registered"):
        py_class(Point._tvm_type_key)(type("Again", (), {"__annotations__": {"x": int}}))
    name = key("Broken")
    with pytest.raises(TypeError, match="unsupported field type"):
        py_class(name)(type("Broken", (), {"__annotations__": {"x": complex}}))
    # Nothing was registered: the key is free.
    fixed = py_class(name)(type("Fixed", (), {"__annotations__": {"x": int}}))
    assert fixed(1).x == 1
    with pytest.raises(TypeError, match="expected int, got str"):
        py_class(key("BadDefault"))(type("B", (), {"__annotations__": {"x": int}, "x": "s"}))
    with pytest.raises(ValueError, match="both default and default_factory"):
        field(default=1, default_factory=list)
    with pytest.raises(ValueError, match="structural_eq"):
        py_class(key("Kind"), structural_eq="circle")
    with pytest.raises(TypeError, match="decorates a class"):
        py_class(key("NotAClass"))(42)
    with pytest.raises(TypeError, match=r"derives from tvm\.ffi\.Object or another py_class"):
        bound = {"_tvm_type_index": Array([])._type_index, "_tvm_type_key": "ffi.Array"}
        native = type("Native", (tvm.ffi.Object,), bound)
        py_class(key("FromNative"))(type("FromNative", (native,), {"__annotations__": {"x": int}}))
    with pytest.raises(TypeError, match="non-default argument 'b'"):

        @py_class(key("Order"))
        class Order:
            a: int = 0
            b: int


@pytest.mark.skipif(
    sys.version_info < (3, 10), reason="`int | str` annotations evaluate on 3.10 and later"
)
def test_any_union_and_container_fields():
    @py_class(key("Mixed"))
    class Mixed:
        anything: Any = None
        number: int | str = 0
        table: dict[str, float] = field(default_factory=dict)
        maybe: Optional[int] = None  # noqa: UP045 - the Optional spelling is under test

    m = Mixed([1, "a"], "text", {"k": 1}, 5)
    assert list(m.anything) == [1, "a"]
    assert m.number == "text" and dict(m.table) == {"k": 1.0} and m.maybe == 5
    m.maybe = None
    assert m.maybe is None
    with pytest.raises(TypeError, match="field 'number': expected"):
        m.number = 1.5


class Color(IntEnum, type_key=key("Color")):
    RED = 1
    GREEN = 5
    BLUE = auto()


class Mode(StrEnum, type_key=key("Mode")):
    FAST = "fast"
    SAFE = auto()


class Phase(Enum, type_key=key("Phase")):
    START = auto()
    STOP = auto()


def test_enum_entries_are_singletons_found_by_index_and_name():
    assert list(Color) == [Color.RED, Color.GREEN, Color.BLUE]
    assert [c.value for c in Color] == [1, 5, 2]
    # An IntEnum entry's int index is its value.
    assert Color.get(5).same_as(Color.GREEN) and Color.get("BLUE").same_as(Color.BLUE)
    assert Color("RED") is Color.RED and Color(1) is Color.RED and Color["GREEN"] is Color.GREEN
    assert (Color.GREEN.index, Color.GREEN.name, int(Color.GREEN)) == (5, "GREEN", 5)
    assert [m.value for m in Mode] == ["fast", "safe"] and str(Mode.SAFE) == "safe"
    assert (Phase.STOP.index, Phase.STOP.name, len(Phase)) == (1, "STOP", 2)
    assert Phase.START in Phase and Color.RED not in Phase
    assert repr(Color.RED) == f"{Color._tvm_type_key}.RED"
    with pytest.raises(KeyError, match="no entry 'PURPLE'"):
        Color.get("PURPLE")
    with pytest.raises(KeyError):
        Color(7)
    with pytest.raises(TypeError):
        Color.get(1.5)


def test_enum_entries_carry_attributes():
    class Op(Enum, type_key=key("Op")):
        ADD = entry(symbol="+", arity=2)
        NEG = entry(symbol="-", arity=1)
        NOP = auto()

    class Code(IntEnum, type_key=key("Code")):
        OK = entry(200, text="ok")
        MISSING = entry(text="missing")

    assert (Op.ADD.symbol, Op.NEG.arity) == ("+", 1)
    assert (Code.OK.value, Code.MISSING.value, Code.MISSING.text) == (200, 1, "missing")
    with pytest.raises(AttributeError, match="NOP has no attribute 'symbol'"):
        _ = Op.NOP.symbol
    with pytest.raises(AttributeError, match="no attribute 'color'"):
        _ = Op.ADD.color


def test_user_defined_init_calls_the_generated_one():
    @py_class(key("Scaled"))
    class Scaled:
        value: float

        def __init__(self, raw: float, scale: float = 2.0) -> None:
            self.__ffi_init__(raw * scale)

    assert Scaled(1.5).value == 3.0
    assert tvm.ffi.structural_equal(copy.deepcopy(Scaled(1.0)), Scaled(1.0))


def test_enum_entries_round_trip_to_the_same_singleton():
    back = echo(Color.GREEN)
    assert type(back) is Color and back.same_as(Color.GREEN)
    assert pickle.loads(pickle.dumps(Mode.FAST)).same_as(Mode.FAST)
    assert from_json_graph_str(to_json_graph_str(Phase.STOP)).same_as(Phase.STOP)
    assert copy.deepcopy(Color.RED).same_as(Color.RED)


def test_enum_fields_and_enum_errors():
    @py_class(key("Pixel"))
    class Pixel:
        color: Color
        mode: Mode = Mode.FAST

    px = Pixel(Color.BLUE)
    assert px.color.same_as(Color.BLUE) and px.mode.same_as(Mode.FAST)
    with pytest.raises(TypeError, match="field 'color': expected Color, got Mode"):
        Pixel(Mode.SAFE)
    with pytest.raises(ValueError, match="already registered"):

        class Again(IntEnum, type_key=Color._tvm_type_key):
            A = 1


values = st.tuples(
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=5),
)


@settings(max_examples=60, deadline=None)
@given(values)
def test_serialization_and_deepcopy_round_trips(args):
    p = Point(*args)
    for copied in (
        from_json_graph_str(to_json_graph_str(p)),
        copy.deepcopy(p),
        pickle.loads(pickle.dumps(p)),
    ):
        assert type(copied) is Point
        assert tvm.ffi.structural_equal(copied, p)
        assert tvm.ffi.structural_hash(copied) == tvm.ffi.structural_hash(p)
        assert asdict(copied) == asdict(p)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(-100, 100), min_size=1, max_size=6))
def test_linked_lists_compare_structurally(items):
    def build(seq):
        head = None
        for v in reversed(seq):
            head = Node(v, head)
        return head

    a, b = build(items), build(items)
    assert tvm.ffi.structural_equal(a, b)
    assert tvm.ffi.structural_equal(copy.deepcopy(a), a)
    assert tvm.ffi.structural_equal(from_json_graph_str(to_json_graph_str(a)), a)


def test_deep_chains_and_cycles_raise_instead_of_overflowing_the_stack():
    out = run_isolated(
        """
        import copy
        from typing import Any, Optional
        import tvm
        from tvm.ffi.dataclasses import py_class

        @py_class("test.dataclasses.deep.Chain", eq=True)
        class Chain:
            value: int
            next: Optional["Chain"] = None
            other: Any = None

        head = twin = None
        for i in range(100_000):
            head, twin = Chain(i, head), Chain(i, twin)
        loop = Chain(0)
        loop.other = loop
        for same in (tvm.ffi.structural_equal, lambda a, b: a == b):
            try:
                same(head, twin)
            except ValueError:
                pass
        for value in (head, loop):
            for step in (
                tvm.ffi.structural_hash,
                tvm.ffi.to_json_graph_str,
                copy.deepcopy,
                tvm.get_global_func("ffi.RecursiveHash"),
            ):
                try:
                    step(value)
                except ValueError:
                    pass
            # Printed down to what the stack allows, the rest elided, in linear time.
            assert "..." in repr(value)
        del head, twin  # freeing a chain is a loop, not a recursion per link
        print("survived")
        """
    )
    assert out.strip() == "survived"


@pytest.mark.parametrize("name", ["", "a b", "class", "a\x00b", 1, None])
def test_field_names_that_are_not_identifiers_are_refused(name):
    name_key = key("NotIdentifier")
    with pytest.raises(ValueError, match="a field name must be an identifier"):
        py_class(name_key)(type("N", (), {"__annotations__": {name: int}}))
    assert py_class(name_key)(type("Ok", (), {"__annotations__": {"x": int}}))(1).x == 1


def test_field_names_that_would_replace_class_machinery_are_refused():
    for name in ("__init__", "__class__", "__dict__", "same_as", "type_key", "_tvm_type_index"):
        name_key = key("Reserved")
        with pytest.raises(ValueError, match=f"'{name}' cannot be a field name"):
            py_class(name_key)(type("Reserved", (), {"__annotations__": {name: int}}))
        # Refused before registration: the key is still free.
        assert py_class(name_key)(type("Ok", (), {"__annotations__": {"x": int}}))(1).x == 1


def test_frozen_and_non_frozen_py_classes_do_not_inherit_from_each_other():
    frozen = py_class(key("Frozen"), frozen=True)(type("F", (), {"__annotations__": {"x": int}}))
    thawed = py_class(key("Thawed"))(type("T", (), {"__annotations__": {"x": int}}))
    with pytest.raises(TypeError, match="non-frozen py_class from a frozen one"):
        py_class(key("Child"))(type("C", (frozen,), {"__annotations__": {"y": int}}))
    with pytest.raises(TypeError, match="frozen py_class from a non-frozen one"):
        py_class(key("Child"), frozen=True)(type("C", (thawed,), {"__annotations__": {"y": int}}))


def test_value_errors_of_fields_name_the_field_and_the_value():
    @py_class(key("Values"))
    class Values:
        f: float = 0.0
        d: tvm.ffi.dtype = "int32"
        n: Optional[Values] = None  # noqa: UP045 - the Optional spelling is under test

    v = Values()
    with pytest.raises(TypeError, match=r"field 'f': expected float \(64-bit\), got int 1000"):
        v.f = 10**400
    with pytest.raises(ValueError, match=r"assignment to field 'd': .*notadtype"):
        v.d = "notadtype"
    with pytest.raises(TypeError, match=r"field 'n': expected Optional\[.*Values\], got int"):
        v.n = 3
    with pytest.raises(TypeError, match=r"expected int \(64-bit\), got int 1180591620717411303424"):
        Point(2**70)


def test_rejected_enum_values_name_the_entry_and_leave_the_type_key_free():
    name = key("BigEnum")
    with pytest.raises(OverflowError, match=r"BigEnum\d+\.A: the value 1180591620717411303424"):
        type("Big", (IntEnum,), {"A": 2**70}, type_key=name)
    with pytest.raises(TypeError, match=r"\.B: the value must be an int, got 'x'"):
        type("Big", (IntEnum,), {"A": 1, "B": entry("x")}, type_key=name)
    with pytest.raises(TypeError, match=r"\.A: the value must be a str, got 3"):
        type("Text", (StrEnum,), {"A": entry(3)}, type_key=name)
    fixed = type("Big", (IntEnum,), {"A": 2**62}, type_key=name)
    assert fixed.A.value == 2**62


@pytest.mark.parametrize("name", ["name", "index", "value", "get", "same_as", "mro"])
def test_enum_entry_names_that_hide_enum_members_are_refused(name):
    type_key = key("Hiding")
    with pytest.raises(ValueError, match=f"'{name}' cannot be an entry name"):
        type("Hiding", (IntEnum,), {name: 5, "OTHER": 6}, type_key=type_key)
    fine = type("Fine", (IntEnum,), {"OTHER": 6}, type_key=type_key)
    # An IntEnum entry's int index is its value.
    assert (fine.OTHER.name, fine.OTHER.value, fine.OTHER.index) == ("OTHER", 6, 6)


def test_post_init_of_a_frozen_type_sets_fields_with_object_setattr():
    @py_class(key("FrozenDerived"), frozen=True)
    class FrozenDerived:
        size: int
        twice: int = field(default=0, init=False)

        def __post_init__(self) -> None:
            object.__setattr__(self, "twice", self.size * 2)

    made = FrozenDerived(4)
    assert made.twice == 8
    # Only while __post_init__ runs: afterwards the field is frozen again, in Python and for
    # native writers alike.
    with pytest.raises(FrozenInstanceError):
        object.__setattr__(made, "twice", 1)
    with pytest.raises(AttributeError, match="read-only"):
        tvm.ffi.dataclasses._py_class._native._object_set_field(made, "twice", 1)
    assert made.twice == 8


def test_mutable_defaults_are_refused_and_immutable_ones_kept():
    shared_list = tvm.ffi.List([])
    for annotation, default in (
        (tvm.ffi.List, shared_list),
        (tvm.ffi.Dict, tvm.ffi.Dict({})),
        (Any, shared_list),
        (Point, Point(1)),
    ):
        with pytest.raises(ValueError, match=r"mutable default .* use default_factory"):
            py_class(key("Mutable"))(
                type("M", (), {"__annotations__": {"x": annotation}, "x": default})
            )
    kept = py_class(key("Immutable"))(
        type("I", (), {"__annotations__": {"a": list[int], "b": Leaf}, "a": [1], "b": Leaf("x")})
    )
    assert list(kept().a) == [1] and kept().b.same_as(kept().b)


def test_fields_of_an_instance_whose_init_made_no_object_say_so():
    @py_class(key("Unbound"))
    class Unbound:
        x: int

        def __init__(self) -> None:
            pass

    u = Unbound()
    with pytest.raises(AttributeError, match=r"__init__ did not call self\.__ffi_init__"):
        _ = u.x
    with pytest.raises(AttributeError, match=r"__init__ did not call self\.__ffi_init__"):
        u.x = 1
