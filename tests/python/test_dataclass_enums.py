"""Enums defined in Python (`tvm.ffi.dataclasses.Enum`, `IntEnum`, `StrEnum`) as the runtime sees
them: an IntEnum entry's int index is its value, a StrEnum entry's str index is its value."""

from __future__ import annotations

import copy
import itertools
import pickle
import uuid

import pytest

import tvm
from tvm.ffi.dataclasses import Enum, IntEnum, StrEnum, auto, entry
from tvm.ffi.serialization import from_json_graph_str, to_json_graph_str

_run = uuid.uuid4().hex[:8]
_keys = itertools.count()


def key(name: str) -> str:
    """A type key no other test uses (the type table lives as long as the process)."""
    return f"test.enums.{_run}.{name}{next(_keys)}"


def test_int_enum_entries_are_indexed_by_value_across_the_int64_range():
    class Limit(IntEnum, type_key=key("Limit")):
        LOW = -(2**63)
        ZERO = 0
        HIGH = 2**63 - 1

    assert Limit.get(2**63 - 1) is Limit.HIGH and Limit(-(2**63)) is Limit.LOW
    assert [entry.index for entry in Limit] == [-(2**63), 0, 2**63 - 1]
    assert [entry.name for entry in Limit] == ["LOW", "ZERO", "HIGH"]
    assert repr(Limit.ZERO) == f"{Limit._tvm_type_key}.ZERO"
    with pytest.raises(KeyError, match="no entry 1"):
        Limit.get(1)


def test_str_enum_entries_are_found_by_value_and_by_name():
    class Mode(StrEnum, type_key=key("Mode")):
        FAST = "fast-path"
        SAFE = auto()

    assert Mode.get("fast-path") is Mode.FAST and Mode.get("FAST") is Mode.FAST
    assert Mode("safe") is Mode.SAFE and Mode["SAFE"] is Mode.SAFE
    assert (Mode.FAST.name, Mode.FAST.value, str(Mode.FAST)) == ("FAST", "fast-path", "fast-path")
    assert [entry.index for entry in Mode] == [0, 1]
    # Native code knows the entry by its value.
    assert repr(Mode.FAST) == f"{Mode._tvm_type_key}.fast-path"


def test_entries_come_back_as_themselves_from_everywhere():
    class Shade(Enum, type_key=key("Shade")):
        DARK = entry(code=1)
        LIGHT = auto()

    class Weight(IntEnum, type_key=key("Weight")):
        LIGHT = 3
        HEAVY = 30

    echo = tvm.get_global_func("testing.echo")
    for item in [Shade.DARK, Shade.LIGHT, Weight.HEAVY]:
        assert echo(item).same_as(item)
        assert copy.deepcopy(item).same_as(item)
        assert pickle.loads(pickle.dumps(item)).same_as(item)
        assert from_json_graph_str(to_json_graph_str(item)).same_as(item)
    assert Shade.DARK.code == 1
    with pytest.raises(AttributeError, match="LIGHT has no attribute 'code'"):
        _ = Shade.LIGHT.code


def test_clashing_int_values_and_str_values_are_refused():
    with pytest.raises(ValueError, match="already defined"):

        class Twice(IntEnum, type_key=key("Twice")):
            ONE = 1
            UNO = 1

    with pytest.raises(ValueError, match="already defined"):

        class Echoed(StrEnum, type_key=key("Echoed")):
            A = "same"
            B = "same"
