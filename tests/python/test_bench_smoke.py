"""The benchmark command runs end to end (benches/python/bench_ffi.py on tiny iteration counts).

Not a timing test: the numbers are not checked, only that every row is measured and reported.
The reference implementation (tvm_ffi) and nanobind are not measured here (`--impl tvm`), so
their columns read n/a.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benches" / "python" / "bench_ffi.py"

#: The operations of the table, as it labels them (the spec of issue 6).
ROWS = [
    "nop() - native no-op, 0 args",
    "nop(1, 2, 3) - native no-op, 3 int args",
    "echo(1) - int",
    "echo(1.5) - float",
    'echo("hello") - short str',
    "echo(s) - 1 KiB str",
    'echo(b"hello") - bytes',
    "echo(None)",
    "nop(x) - numpy float32 array",
    "nop(t) - tensor from from_dlpack",
    "cb() - converted Python callback, from Python",
    "apply(cb) - the callback called from native",
    "apply(f, 1) - a Python function called from native",
    "convert([1, 2, 3])",
    'convert({"a": 1, "b": 2, "c": 3})',
    "nop(t0, ..., t31) - 32 tensors from from_dlpack",
    "arr[0] - Array indexing",
    'm["a"] - Map lookup',
    "from_dlpack(x) - numpy array to tensor",
    "numpy.from_dlpack(t) - tensor to numpy",
    'device("cuda", 0)',
    'dtype("float32")',
    "List() then 100,000 x append(i)",
    "Dict() then d[i] = i for 100,000 ints",
    "StructuralHash(g) - 100,000-node graph",
    "StructuralEqual(g, copy of g) - 100,000-node graph",
    "ToJSONGraphString(g) - 100,000-node graph",
    "FromJSONGraphString(text) - 100,000-node graph",
    "import tvm / import tvm_ffi - fresh interpreter",
]

#: The rows of the table against nanobind (ids of the main table's rows).
NANOBIND_ROWS = [ROWS[i] for i in (0, 1, 2, 4, 8, 12)]

#: The objects of the memory table.
MEMORY_ROWS = [
    "Array([1, 2, 3])",
    'Map({"a": 1, "b": 2, "c": 3})',
    "convert(f) - a Python function as a Function",
    "from_dlpack(x) - a tensor of a numpy array",
]


def _tables(stdout: str) -> dict[str, dict[str, list[str]]]:
    """The markdown tables of the output by the title of their first column: each a mapping
    from the first cell of a line to the other cells."""
    tables: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for line in stdout.splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if current is None:
            current = tables.setdefault(cells[0], {})
        elif not cells[0].startswith("-"):
            current[cells[0]] = cells[1:]
    return tables


def test_quick_run_of_tvm_alone_reports_every_row(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    json_path = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--impl", "tvm", "--json", str(json_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr

    tables = _tables(proc.stdout)
    nb_title = "operation (nanobind: one typed function)"
    assert list(tables) == ["operation", nb_title, "object held from Python"], proc.stdout
    table = tables["operation"]
    assert list(table) == ROWS, proc.stdout
    for operation in ROWS:
        ours, reference, ratio, target, mark = table[operation]
        assert float(ours.replace(",", "")) > 0, (operation, ours)
        assert (reference, ratio, mark) == ("n/a", "n/a", "n/a"), operation
        assert target == ("<= 0.20" if operation.startswith("import") else "<= 0.60")
    assert list(tables[nb_title]) == NANOBIND_ROWS, proc.stdout
    for operation, cells in tables[nb_title].items():
        nanobind, ours, reference, ratio, target, mark = cells
        assert float(ours.replace(",", "")) > 0, (operation, ours)
        assert (nanobind, reference, ratio, target, mark) == ("n/a", "n/a", "n/a", "<= 1.25", "n/a")
    memory = tables["object held from Python"]
    assert list(memory) == MEMORY_ROWS, proc.stdout
    for label, (ours, reference, ratio, target, mark) in memory.items():
        # "176 (64 + 112)": the total, then the Python and C heap parts.
        match = re.fullmatch(r"(-?[\d,]+) \((-?[\d,]+) \+ (-?[\d,]+)\)", ours)
        assert match, (label, ours)
        total, python, native = (int(part.replace(",", "")) for part in match.groups())
        assert abs(total - python - native) <= 1 and python > 0, (label, ours)
        assert (reference, ratio, target, mark) == ("n/a", "n/a", "<= 1.00", "n/a"), label

    document = json.loads(json_path.read_text())
    assert [row["operation"] for row in document["rows"]] == ROWS
    assert all(row["ours_ns"] > 0 and row["ref_ns"] is None for row in document["rows"])
    assert [row["object"] for row in document["memory"]] == MEMORY_ROWS
    assert all(row["ours"]["python"] > 0 and row["ref"] is None for row in document["memory"])
    assert document["errors"] == []


def test_unknown_row_is_a_usage_error() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--impl", "tvm", "--rows", "nop0,nosuchrow"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "nosuchrow" in proc.stderr


def test_the_exchange_benchmark_measures_each_row(tmp_path):
    """benches/python/bench_exchange.py on tiny counts, tvm only: its producer extension builds
    and both import paths are measured."""
    script = BENCH.parent / "bench_exchange.py"
    out = tmp_path / "exchange.json"
    command = [sys.executable, str(script), "--impls", "tvm", "--number", "50", "--repeat", "1"]
    done = subprocess.run(
        [*command, "--json", str(out)], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "from_dlpack(Buf): the exchange table" in done.stdout
    assert "of the __dlpack__ path" in done.stdout
    results = json.loads(out.read_text())["tvm"]
    assert results["table"] > 0 and results["dlpack"] > 0
