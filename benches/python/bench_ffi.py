#!/usr/bin/env python3
"""Call overheads of ``tvm`` (this repository) side by side with the reference implementation,
``tvm_ffi`` (PyPI ``apache-tvm-ffi==0.1.15.post2``), measured in the same run.

Every row times one statement on equivalent objects in both implementations: calls of the
``testing.*`` global functions both testing libraries register (``testing.nop``, ``testing.echo``,
``testing.apply``; ours is ``libtvm_ffi_testing.so``, named by ``TVM_FFI_TESTING_LIB``),
conversions, container access, DLPack, devices and dtypes, and the import itself.

A third column times the same operations bound statically with nanobind (the extension
``tvm_bench_nanobind``, built from ``nanobind_rows.cpp`` by ``nanobind_ext.py`` when the
``nanobind`` package is installed), one typed function per row.

Driver (the default): runs the implementations interleaved, A B C A B C ... for ``--rounds``
rounds, each round a fresh worker process per implementation (so none warms another), takes the
median over rounds of each round's best-of-``--repeat`` timeit of ``--number`` calls, and prints
three tables: ns per call of ours and the reference with the ratio ours/reference, its target and
a pass/MISS mark; the nanobind rows with the ratio ours/nanobind; and the bytes per object held
from Python (ours and the reference). ``--impl tvm`` (or another) measures one implementation
alone; a missing implementation shows ``n/a`` instead of failing. ``--json PATH`` also writes the
results as JSON.

Worker (``--worker --impl NAME``): one measurement of the given rows in this process, written
as JSON to ``--result-file``. The import row starts fresh interpreters (``python -P -c``) that
time ``import NAME`` with ``time.perf_counter`` inside the child.

Exit status: 0 when every row was measured (missed targets included), 1 on errors, 2 on usage.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import timeit
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import held_memory
import nanobind_ext

#: Implementations by name: the module to import and the column they fill.
OURS = "tvm"
REFERENCE = "tvm_ffi"
NANOBIND = "nanobind"
IMPLS = (OURS, REFERENCE, NANOBIND)
#: The prefix of each implementation's keys in the results (``ours_ns``, ``ref_error``, ...).
KEY = {OURS: "ours", REFERENCE: "ref", NANOBIND: "nanobind"}

#: Targets for the ratio ours/reference.
CALL_TARGET = 0.6
IMPORT_TARGET = 0.2
#: Target for the ratio ours/nanobind.
NANOBIND_TARGET = 1.25
#: Target for the ratio of bytes per held object, ours/reference.
MEMORY_TARGET = 1.0

DEFAULTS = {"rounds": 9, "number": 100_000, "repeat": 7, "import_runs": 5, "objects": 10_000}
QUICK = {"rounds": 1, "number": 200, "repeat": 1, "import_runs": 1, "objects": 100}

Check = Callable[[Any, dict[str, Any]], bool]


@dataclass(frozen=True)
class Row:
    """One line of the table: a statement timed with the same names bound in both workers."""

    id: str
    label: str
    stmt: str
    #: Whether the result of one execution is the expected one (result, namespace).
    check: Check
    kind: str = "call"
    #: Executions per timed run, for statements far slower than a call (default: ``--number``).
    number: int | None = None
    #: The statement of the nanobind column (its functions of ``nanobind_rows.cpp``), if any.
    nanobind: str | None = None

    @property
    def uses_graph(self) -> bool:
        """Whether the statement needs the 100,000-node graph of the namespace."""
        return "graph" in self.stmt

    @property
    def target(self) -> float:
        return IMPORT_TARGET if self.kind == "import" else CALL_TARGET


def _is_none(result: Any, ns: dict[str, Any]) -> bool:
    return result is None


def _equals(value: Any) -> Check:
    return lambda result, ns: result == value and type(result) is not bool


ROWS: tuple[Row, ...] = (
    Row("nop0", "nop() - native no-op, 0 args", "nop()", _is_none, nanobind="nop0()"),
    Row(
        "nop3",
        "nop(1, 2, 3) - native no-op, 3 int args",
        "nop(1, 2, 3)",
        _is_none,
        nanobind="nop3(1, 2, 3)",
    ),
    Row("echo_int", "echo(1) - int", "echo(1)", _equals(1), nanobind="echo_int(1)"),
    Row("echo_float", "echo(1.5) - float", "echo(1.5)", _equals(1.5)),
    Row(
        "echo_str",
        'echo("hello") - short str',
        'echo("hello")',
        _equals("hello"),
        nanobind='echo_str("hello")',
    ),
    Row("echo_str1k", "echo(s) - 1 KiB str", "echo(s1k)", lambda r, ns: r == ns["s1k"]),
    Row("echo_bytes", 'echo(b"hello") - bytes', 'echo(b"hello")', _equals(b"hello")),
    Row("echo_none", "echo(None)", "echo(None)", _is_none),
    Row(
        "nop_numpy",
        "nop(x) - numpy float32 array",
        "nop(x_np)",
        _is_none,
        nanobind="nop_array(x_np)",
    ),
    Row("nop_tensor", "nop(t) - tensor from from_dlpack", "nop(x_tensor)", _is_none),
    Row("callback", "cb() - converted Python callback, from Python", "cb()", _is_none),
    Row("apply", "apply(cb) - the callback called from native", "apply(cb)", _is_none),
    Row(
        "apply_py",
        "apply(f, 1) - a Python function called from native",
        "apply(py_cb, 1)",
        _equals(1),
        nanobind="apply(py_cb, 1)",
    ),
    Row(
        "convert_list",
        "convert([1, 2, 3])",
        "convert(list3)",
        lambda r, ns: isinstance(r, ns["Array"]) and list(r) == [1, 2, 3],
    ),
    Row(
        "convert_dict",
        'convert({"a": 1, "b": 2, "c": 3})',
        "convert(dict3)",
        lambda r, ns: isinstance(r, ns["Map"]) and len(r) == 3 and r["c"] == 3,
    ),
    Row(
        "nop_tensor32",
        "nop(t0, ..., t31) - 32 tensors from from_dlpack",
        "nop(*tensors32)",
        _is_none,
    ),
    Row("array_index", "arr[0] - Array indexing", "arr[0]", _equals(1)),
    Row("map_lookup", 'm["a"] - Map lookup', 'm["a"]', _equals(1)),
    Row(
        "from_dlpack",
        "from_dlpack(x) - numpy array to tensor",
        "from_dlpack(x_np)",
        lambda r, ns: isinstance(r, ns["Tensor"]) and tuple(r.shape) == (16,),
    ),
    Row(
        "numpy_from_dlpack",
        "numpy.from_dlpack(t) - tensor to numpy",
        "np_from_dlpack(x_tensor)",
        lambda r, ns: r.shape == (16,) and str(r.dtype) == "float32",
    ),
    Row(
        "device",
        'device("cuda", 0)',
        'device("cuda", 0)',
        lambda r, ns: str(r) == "cuda:0",
    ),
    Row(
        "dtype",
        'dtype("float32")',
        'dtype("float32")',
        lambda r, ns: str(r) == "float32" and isinstance(r, ns["dtype"]),
    ),
    Row(
        "list_append_100k",
        "List() then 100,000 x append(i)",
        "fill_list(100_000)",
        lambda r, ns: len(r) == 100_000 and r[99_999] == 99_999,
        number=3,
    ),
    Row(
        "dict_set_100k",
        "Dict() then d[i] = i for 100,000 ints",
        "fill_dict(100_000)",
        lambda r, ns: len(r) == 100_000 and r[99_999] == 99_999,
        number=3,
    ),
    Row(
        "shash_100k",
        "StructuralHash(g) - 100,000-node graph",
        "s_hash(graph, False, False)",
        lambda r, ns: isinstance(r, int),
        number=5,
    ),
    Row(
        "sequal_100k",
        "StructuralEqual(g, copy of g) - 100,000-node graph",
        "s_equal(graph, graph_copy, False, False)",
        lambda r, ns: r is True,
        number=5,
    ),
    Row(
        "to_json_100k",
        "ToJSONGraphString(g) - 100,000-node graph",
        "to_json(graph, None)",
        lambda r, ns: isinstance(r, str) and r.startswith('{"root_index"'),
        number=3,
    ),
    Row(
        "from_json_100k",
        "FromJSONGraphString(text) - 100,000-node graph",
        "from_json(graph_json)",
        lambda r, ns: len(r) == len(ns["graph"]),
        number=3,
    ),
    Row(
        "import",
        "import tvm / import tvm_ffi - fresh interpreter",
        "",
        lambda r, ns: True,
        kind="import",
    ),
)
ROWS_BY_ID = {row.id: row for row in ROWS}


@dataclass(frozen=True)
class MemoryRow:
    """One line of the memory table: an object made by ``make`` and held from Python."""

    id: str
    label: str
    make: str


MEMORY_ROWS: tuple[MemoryRow, ...] = (
    MemoryRow("array3", "Array([1, 2, 3])", "Array([1, 2, 3])"),
    MemoryRow("map3", 'Map({"a": 1, "b": 2, "c": 3})', 'Map({"a": 1, "b": 2, "c": 3})'),
    MemoryRow("function", "convert(f) - a Python function as a Function", "convert(py_cb)"),
    MemoryRow("tensor", "from_dlpack(x) - a tensor of a numpy array", "from_dlpack(x_np)"),
)


# ---- worker ---------------------------------------------------------------------------------


def _api(impl: str) -> dict[str, Any]:
    """The public entry points of one implementation, under the names the statements use."""
    if impl == OURS:
        import tvm

        # The testing.* functions live in a library of their own (scripts/bench.sh builds it).
        testing_lib = os.environ.get("TVM_FFI_TESTING_LIB")
        if not testing_lib:
            raise RuntimeError("set TVM_FFI_TESTING_LIB to libtvm_ffi_testing.so (bench.sh does)")
        tvm.base.load_backend_libs(testing_lib)
        return {
            "version": tvm.__version__,
            "get_global_func": tvm.get_global_func,
            "convert": tvm.ffi.convert,
            "from_dlpack": tvm.ffi.from_dlpack,
            "device": tvm.device,
            "dtype": tvm.ffi.dtype,
            "Array": tvm.ffi.Array,
            "Map": tvm.ffi.Map,
            "List": tvm.ffi.List,
            "Dict": tvm.ffi.Dict,
            "Tensor": tvm.ffi.Tensor,
            "Function": tvm.ffi.Function,
        }
    import tvm_ffi

    return {
        "version": tvm_ffi.__version__,
        "get_global_func": tvm_ffi.get_global_func,
        "convert": tvm_ffi.convert,
        "from_dlpack": tvm_ffi.from_dlpack,
        "device": tvm_ffi.device,
        "dtype": tvm_ffi.dtype,
        "Array": tvm_ffi.Array,
        "Map": tvm_ffi.Map,
        "List": tvm_ffi.List,
        "Dict": tvm_ffi.Dict,
        "Tensor": tvm_ffi.Tensor,
        "Function": tvm_ffi.Function,
    }


def _py_cb(x: Any) -> Any:
    """The plain Python function of the ``apply(f, 1)`` row."""
    return x


def _nanobind_namespace() -> dict[str, Any]:
    """The globals of the nanobind column: the functions of ``nanobind_rows.cpp``."""
    import nanobind
    import numpy as np
    import tvm_bench_nanobind as nb_rows

    names = ("nop0", "nop3", "echo_int", "echo_str", "nop_array", "apply")
    return {
        "version": nanobind.__version__,
        **{name: getattr(nb_rows, name) for name in names},
        "x_np": np.arange(16, dtype="float32"),
        "py_cb": _py_cb,
    }


def _namespace(impl: str, graph: bool = True) -> tuple[dict[str, Any], list[str]]:
    """The globals of the timed statements (the 100,000-node graph only if ``graph``). A step
    that fails is reported, and the rows that need its name fail on their own (NameError) while
    the others still run."""
    if impl == NANOBIND:
        return _nanobind_namespace(), []
    ns: dict[str, Any] = {}
    problems: list[str] = []

    def step(name: str, make: Callable[[], Any]) -> None:
        try:
            ns[name] = make()
        except Exception as exc:  # reported with the rows that need it
            problems.append(f"setup of {name!r}: {type(exc).__name__}: {exc}")

    ns.update(_api(impl))
    import numpy as np

    ns["np_from_dlpack"] = np.from_dlpack
    ns["py_cb"] = _py_cb
    step("nop", lambda: ns["get_global_func"]("testing.nop"))
    step("echo", lambda: ns["get_global_func"]("testing.echo"))
    step("apply", lambda: ns["get_global_func"]("testing.apply"))
    step("s1k", lambda: "x" * 1024)
    step("x_np", lambda: np.arange(16, dtype="float32"))
    step("x_tensor", lambda: ns["from_dlpack"](ns["x_np"]))
    step("tensors32", lambda: [ns["from_dlpack"](ns["x_np"]) for _ in range(32)])

    def fill_list(n: int) -> Any:
        filled = ns["List"]()
        append = filled.append
        for i in range(n):
            append(i)
        return filled

    def fill_dict(n: int) -> Any:
        filled = ns["Dict"]()
        for i in range(n):
            filled[i] = i
        return filled

    ns["fill_list"] = fill_list
    ns["fill_dict"] = fill_dict

    def callback() -> None:
        return None

    def make_cb() -> Any:
        cb = ns["convert"](callback)
        if not isinstance(cb, ns["Function"]):
            raise TypeError(f"convert(callback) gave {type(cb).__name__}, not a Function")
        return cb

    step("cb", make_cb)
    step("list3", lambda: [1, 2, 3])
    step("dict3", lambda: {"a": 1, "b": 2, "c": 3})
    step("arr", lambda: ns["convert"](ns["list3"]))
    step("m", lambda: ns["convert"](ns["dict3"]))
    # A graph of 100,000 values (60,000 objects): per item an array, a string, a nested array
    # holding a float, and an int.
    step("s_hash", lambda: ns["get_global_func"]("ffi.StructuralHash"))
    step("s_equal", lambda: ns["get_global_func"]("ffi.StructuralEqual"))
    step("to_json", lambda: ns["get_global_func"]("ffi.ToJSONGraphString"))
    step("from_json", lambda: ns["get_global_func"]("ffi.FromJSONGraphString"))
    if not graph:
        return ns, problems
    items = [[i, f"node-{i:08d}", [float(i)]] for i in range(20_000)]
    step("graph", lambda: ns["convert"](items))
    step("graph_copy", lambda: ns["convert"](items))
    step("graph_json", lambda: ns["to_json"](ns["graph"], None))
    return ns, problems


def _time_row(row: Row, stmt: str, ns: dict[str, Any], number: int, repeat: int) -> float:
    """Best of ``repeat`` runs of ``number`` executions of ``stmt`` (the row's statement in this
    implementation), in ns per execution."""
    result = eval(stmt, ns)  # one call first: the statement works and gives the right value
    if not row.check(result, ns):
        raise AssertionError(f"{stmt} gave an unexpected value: {result!r}")
    if row.number is not None:
        number = min(number, row.number)
    timer = timeit.Timer(stmt, globals=ns)
    timer.timeit(number=max(1, number // 10))  # warm-up: caches, branch predictors, lazy setup
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e9


def _import_times(module: str, runs: int, warm_up: bool) -> list[float]:
    """Seconds that ``import module`` takes in fresh interpreters, timed inside the child.
    ``-P`` keeps the working directory off ``sys.path``: the installed package is imported."""
    code = (
        "import time\n"
        "t0 = time.perf_counter()\n"
        f"import {module}\n"
        "t1 = time.perf_counter()\n"
        "print(repr(t1 - t0))\n"
    )
    times = []
    for index in range(runs + (1 if warm_up else 0)):
        proc = subprocess.run(
            [sys.executable, "-P", "-c", code], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise RuntimeError(f"import {module} failed in a fresh interpreter:\n{proc.stderr}")
        if warm_up and index == 0:
            continue  # bytecode caches and the page cache, not the import, on a first run
        times.append(float(proc.stdout.strip().splitlines()[-1]))
    return times


def worker(args: argparse.Namespace) -> int:
    rows = [ROWS_BY_ID[r] for r in args.rows]
    if args.impl == NANOBIND:
        rows = [row for row in rows if row.nanobind is not None]
    out: dict[str, Any] = {"impl": args.impl, "results": {}, "errors": {}, "memory": {}}
    try:
        ns, problems = _namespace(args.impl, graph=any(row.uses_graph for row in rows))
    except Exception as exc:
        out["fatal"] = f"{type(exc).__name__}: {exc}"
        Path(args.result_file).write_text(json.dumps(out))
        return 0
    import numpy as np

    out["version"] = ns["version"]
    out["numpy"] = np.__version__
    # The cost of timeit's own loop, part of every row on both sides alike.
    empty = timeit.Timer("pass").repeat(repeat=args.repeat, number=args.number)
    out["loop_ns"] = min(empty) / args.number * 1e9
    for row in rows:
        try:
            if row.kind == "import":
                times = _import_times(args.impl, args.import_runs, warm_up=args.import_warm_up)
                out["results"][row.id] = statistics.median(times) * 1e9
                out.setdefault("import_runs_ns", {})[row.id] = [t * 1e9 for t in times]
            else:
                stmt = row.nanobind if args.impl == NANOBIND else row.stmt
                assert stmt is not None
                out["results"][row.id] = _time_row(row, stmt, ns, args.number, args.repeat)
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, NameError) and problems:
                message += " (" + "; ".join(problems) + ")"
            out["errors"][row.id] = message
    if args.impl != NANOBIND:
        for mem in MEMORY_ROWS:
            try:
                make = eval(f"lambda: {mem.make}", ns)
                python_bytes, native_bytes = held_memory.held_bytes(make, args.objects)
                out["memory"][mem.id] = {"python": python_bytes, "native": native_bytes}
            except Exception as exc:
                out["errors"][f"memory:{mem.id}"] = f"{type(exc).__name__}: {exc}"
    Path(args.result_file).write_text(json.dumps(out))
    return 0


# ---- driver ---------------------------------------------------------------------------------


def _run_worker(impl: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench_ffi.") as tmp:
        result_file = Path(tmp) / "result.json"
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            "--impl",
            impl,
            "--rows",
            ",".join(args.rows),
            "--number",
            str(args.number),
            "--repeat",
            str(args.repeat),
            "--import-runs",
            str(args.import_runs),
            "--objects",
            str(args.objects),
            "--result-file",
            str(result_file),
        ]
        if not args.quick:
            command.append("--import-warm-up")
        # A fixed hash seed: the same dict layouts in every round.
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0 or not result_file.exists():
            tail = (proc.stdout + proc.stderr).strip()[-2000:]
            return {"impl": impl, "fatal": f"worker exited with {proc.returncode}:\n{tail}"}
        return json.loads(result_file.read_text())


def _fmt_ns(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.1f}" if value < 10 else f"{value:,.0f}"


def _fmt_ratio(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f}"


def _mark(ratio: float | None, target: float, error: bool) -> str:
    if error:
        return "error"
    if ratio is None:
        return "n/a"
    return "pass" if ratio <= target else "MISS"


def _markdown(header: tuple[str, ...], lines: list[tuple[str, ...]]) -> str:
    """A markdown table: the first column and the last (the mark) left-aligned, the rest right."""
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    right = [0 < i < len(header) - 1 for i in range(len(header))]

    def fmt(cells: tuple[str, ...]) -> str:
        padded = [
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=True)
        ]
        return "| " + " | ".join(padded) + " |"

    rule = (
        "|"
        + "|".join(
            ("-" * (w + 1) + ":") if r else ("-" * (w + 2))
            for w, r in zip(widths, right, strict=True)
        )
        + "|"
    )
    return "\n".join([fmt(header), rule, *(fmt(line) for line in lines)])


def _cell(summary: dict[str, Any], impl: str) -> str:
    key = KEY[impl]
    return "error" if summary[f"{key}_error"] else _fmt_ns(summary[f"{key}_ns"])


def _table(rows: list[Row], summary: dict[str, dict[str, Any]]) -> str:
    header = ("operation", "ns/call ours", "ns/call reference", "ours/ref", "target", "")
    lines = [
        (
            row.label,
            _cell(summary[row.id], OURS),
            _cell(summary[row.id], REFERENCE),
            _fmt_ratio(summary[row.id]["ratio"]),
            f"<= {row.target:.2f}",
            summary[row.id]["mark"],
        )
        for row in rows
    ]
    return _markdown(header, lines)


def _nanobind_table(rows: list[Row], summary: dict[str, dict[str, Any]]) -> str:
    header = (
        "operation (nanobind: one typed function)",
        "ns nanobind",
        "ns ours",
        "ns reference",
        "ours/nanobind",
        "target",
        "",
    )
    lines = [
        (
            row.label,
            _cell(summary[row.id], NANOBIND),
            _cell(summary[row.id], OURS),
            _cell(summary[row.id], REFERENCE),
            _fmt_ratio(summary[row.id]["nanobind_ratio"]),
            f"<= {NANOBIND_TARGET:.2f}",
            summary[row.id]["nanobind_mark"],
        )
        for row in rows
    ]
    return _markdown(header, lines)


def _fmt_bytes(entry: dict[str, float] | None) -> str:
    if entry is None:
        return "n/a"
    return f"{entry['total']:,.0f} ({entry['python']:,.0f} + {entry['native']:,.0f})"


def _memory_table(memory: dict[str, dict[str, Any]]) -> str:
    header = (
        "object held from Python",
        "bytes ours (Python + C heap)",
        "bytes reference",
        "ours/ref",
        "target",
        "",
    )
    lines = [
        (
            mem.label,
            "error" if memory[mem.id]["ours_error"] else _fmt_bytes(memory[mem.id]["ours"]),
            "error" if memory[mem.id]["ref_error"] else _fmt_bytes(memory[mem.id]["ref"]),
            _fmt_ratio(memory[mem.id]["ratio"]),
            f"<= {MEMORY_TARGET:.2f}",
            memory[mem.id]["mark"],
        )
        for mem in MEMORY_ROWS
    ]
    return _markdown(header, lines)


def _present(impl: str, notes: list[str]) -> bool:
    """Whether ``impl`` can be measured here (the nanobind extension is built now if needed)."""
    if impl != NANOBIND:
        return importlib.util.find_spec(impl) is not None
    if not nanobind_ext.available():
        notes.append(f"nanobind (or g++) is not installed for {sys.executable}: n/a")
        return False
    try:
        nanobind_ext.build()
    except Exception as exc:
        notes.append(f"the nanobind extension did not build ({exc}): n/a")
        return False
    return True


def driver(args: argparse.Namespace) -> int:
    wanted = IMPLS if args.impl == "all" else (args.impl,)
    notes: list[str] = []
    if OURS in wanted and importlib.util.find_spec(OURS) is None:
        print(f"bench_ffi: {OURS} is not installed for {sys.executable}", file=sys.stderr)
        return 1
    impls = []
    for impl in wanted:
        if impl != NANOBIND and importlib.util.find_spec(impl) is None:
            notes.append(f"{impl} is not installed for {sys.executable}: its column shows n/a")
        elif _present(impl, notes):
            impls.append(impl)
    rows = [ROWS_BY_ID[r] for r in args.rows]

    per_impl: dict[str, list[dict[str, Any]]] = {impl: [] for impl in impls}
    for round_index in range(args.rounds):
        for impl in impls:  # A B C, A B C, ...: each round a fresh process per implementation
            result = _run_worker(impl, args)
            per_impl[impl].append(result)
            if args.verbose:
                print(f"round {round_index + 1}/{args.rounds} {impl}: done", file=sys.stderr)

    fatal = {
        impl: r["fatal"] for impl, results in per_impl.items() for r in results if "fatal" in r
    }
    errors: list[str] = [f"{impl}: {message}" for impl, message in fatal.items()]

    def column(impl: str, row_id: str) -> tuple[float | None, list[float], str | None]:
        results = [r for r in per_impl.get(impl, []) if "fatal" not in r]
        values = [r["results"][row_id] for r in results if row_id in r["results"]]
        error = next((r["errors"][row_id] for r in results if row_id in r["errors"]), None)
        if impl in fatal:
            error = error or fatal[impl]
        if error is not None and impl not in fatal:
            errors.append(f"{row_id} ({impl}): {error}")
        median = statistics.median(values) if values and error is None else None
        return median, values, error

    summary: dict[str, dict[str, Any]] = {}
    for row in rows:
        s: dict[str, Any] = {}
        for impl in IMPLS if row.nanobind is not None else (OURS, REFERENCE):
            key = KEY[impl]
            s[f"{key}_ns"], s[f"{key}_rounds_ns"], s[f"{key}_error"] = column(impl, row.id)
        ours, ref = s["ours_ns"], s["ref_ns"]
        s["ratio"] = ours / ref if ours is not None and ref else None
        s["mark"] = _mark(s["ratio"], row.target, bool(s["ours_error"] or s["ref_error"]))
        if row.nanobind is not None:
            nb = s["nanobind_ns"]
            s["nanobind_ratio"] = ours / nb if ours is not None and nb else None
            failed = bool(s["ours_error"] or s["nanobind_error"])
            s["nanobind_mark"] = _mark(s["nanobind_ratio"], NANOBIND_TARGET, failed)
        summary[row.id] = s

    memory: dict[str, dict[str, Any]] = {}
    for mem in MEMORY_ROWS:
        entry: dict[str, Any] = {}
        for impl in (OURS, REFERENCE):
            key = KEY[impl]
            results = [r for r in per_impl.get(impl, []) if "fatal" not in r]
            found = [r["memory"][mem.id] for r in results if mem.id in r.get("memory", {})]
            error = next(
                (
                    r["errors"][f"memory:{mem.id}"]
                    for r in results
                    if f"memory:{mem.id}" in r["errors"]
                ),
                None,
            )
            if error is not None:
                errors.append(f"memory {mem.id} ({impl}): {error}")
            entry[f"{key}_error"] = error
            entry[key] = None
            if found and error is None:
                # Whole bytes: allocations shared by many objects (list growth, caches) leave
                # fractions that say nothing about one object.
                python_bytes = round(statistics.median(f["python"] for f in found))
                native_bytes = round(statistics.median(f["native"] for f in found))
                entry[key] = {
                    "python": python_bytes,
                    "native": native_bytes,
                    "total": python_bytes + native_bytes,
                }
        ours_mem, ref_mem = entry["ours"], entry["ref"]
        entry["ratio"] = ours_mem["total"] / ref_mem["total"] if ours_mem and ref_mem else None
        entry["mark"] = _mark(
            entry["ratio"], MEMORY_TARGET, bool(entry["ours_error"] or entry["ref_error"])
        )
        memory[mem.id] = entry

    def version(impl: str) -> str:
        found = [r.get("version") for r in per_impl.get(impl, []) if r.get("version")]
        return found[0] if found else "n/a"

    numpy_versions = [r.get("numpy") for rs in per_impl.values() for r in rs if r.get("numpy")]
    loops = [r["loop_ns"] for rs in per_impl.values() for r in rs if "loop_ns" in r]
    meta = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "ours": f"{OURS} {version(OURS)}",
        "reference": f"{REFERENCE} {version(REFERENCE)}",
        "nanobind": f"{NANOBIND} {version(NANOBIND)}",
        "numpy": numpy_versions[0] if numpy_versions else "n/a",
        "rounds": args.rounds,
        "number": args.number,
        "repeat": args.repeat,
        "import_runs": args.import_runs,
        "objects": args.objects,
        "order": " ".join(impls) + (" (interleaved)" if len(impls) > 1 else ""),
        "quick": args.quick,
        "loop_ns": statistics.median(loops) if loops else None,
    }

    print(
        f"ours: {meta['ours']}   reference: {meta['reference']}   {meta['nanobind']}   "
        f"CPython {meta['python']} ({meta['machine']})   numpy {meta['numpy']}   {meta['date']}"
    )
    print(
        f"{args.rounds} round(s), each a fresh process per implementation in the order "
        f"{meta['order']}; a row is the median over rounds of the best of {args.repeat} x "
        f"{args.number:,} calls (timeit). import: median of {args.import_runs} fresh "
        "interpreter(s) per round, median over rounds."
    )
    if meta["loop_ns"] is not None:
        print(
            f"Every call row includes timeit's loop, {meta['loop_ns']:.1f} ns per iteration here, "
            "on all sides alike."
        )
    for note in notes:
        print(f"note: {note}")
    print()
    print(_table(rows, summary))
    print()
    missed = [row for row in rows if summary[row.id]["mark"] == "MISS"]
    compared = [row for row in rows if summary[row.id]["ratio"] is not None]
    if compared:
        print(
            f"{len(compared) - len(missed)} of {len(compared)} rows meet their target "
            f"(ours/ref <= {CALL_TARGET} for calls, <= {IMPORT_TARGET} for the import)."
        )
        for row in missed:
            s = summary[row.id]
            print(
                f"  MISS {row.id}: ours {_fmt_ns(s['ours_ns'])} ns, reference "
                f"{_fmt_ns(s['ref_ns'])} ns, ratio {s['ratio']:.2f} > {row.target:.2f}"
            )
    else:
        print("no ratios: only one implementation was measured.")
    nanobind_rows = [row for row in rows if row.nanobind is not None]
    if nanobind_rows:
        print()
        print(
            f"Against nanobind (static bindings, target ours/nanobind <= {NANOBIND_TARGET}); "
            "the nanobind statements are those of nanobind_rows.cpp."
        )
        print()
        print(_nanobind_table(nanobind_rows, summary))
    if OURS in impls or REFERENCE in impls:
        print()
        print(
            f"Memory: bytes per object, {args.objects:,} objects held in a list; Python heap by "
            "tracemalloc, C heap by glibc's mallinfo2 (median over rounds)."
        )
        print()
        print(_memory_table(memory))

    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "meta": meta,
            "notes": notes,
            "errors": errors,
            "rows": [
                {"id": row.id, "operation": row.label, "kind": row.kind, "target": row.target}
                | summary[row.id]
                for row in rows
            ],
            "memory": [
                {"id": mem.id, "object": mem.label, "target": MEMORY_TARGET} | memory[mem.id]
                for mem in MEMORY_ROWS
            ],
        }
        path.write_text(json.dumps(document, indent=2) + "\n")
        print(f"JSON: {path}")

    if errors:
        print("\nerrors:", file=sys.stderr)
        for error in errors:
            print(f"  {error}", file=sys.stderr)
        return 1
    return 0


# ---- command line -------------------------------------------------------------------------


def _parse_rows(text: str) -> list[str]:
    if text == "all":
        return [row.id for row in ROWS]
    ids = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [i for i in ids if i not in ROWS_BY_ID]
    if unknown or not ids:
        raise argparse.ArgumentTypeError(
            f"unknown row(s) {', '.join(unknown) or '(none)'}; rows: {', '.join(ROWS_BY_ID)}"
        )
    return ids


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="rows: " + ", ".join(ROWS_BY_ID),
    )
    parser.add_argument(
        "--impl",
        choices=(*IMPLS, "all"),
        default="all",
        help="all (default: interleaved, side by side) or one implementation alone",
    )
    parser.add_argument(
        "--rows",
        type=_parse_rows,
        default=_parse_rows("all"),
        help="comma-separated row ids (default: all)",
    )
    parser.add_argument(
        "--number", type=_positive, help=f"calls per timing (default {DEFAULTS['number']:,})"
    )
    parser.add_argument(
        "--repeat",
        type=_positive,
        help=f"timings per round, the best counts (default {DEFAULTS['repeat']})",
    )
    parser.add_argument(
        "--rounds", type=_positive, help=f"rounds, the median counts (default {DEFAULTS['rounds']})"
    )
    parser.add_argument(
        "--import-runs",
        type=_positive,
        help=f"fresh interpreters per round for the import row (default {DEFAULTS['import_runs']})",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="one round of tiny iteration counts (checks that it runs)",
    )
    parser.add_argument(
        "--objects",
        type=_positive,
        help=f"objects held per memory row (default {DEFAULTS['objects']:,})",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--result-file", help=argparse.SUPPRESS)
    parser.add_argument("--import-warm-up", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    for key, default in DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, QUICK[key] if args.quick else default)

    if args.worker:
        if args.impl == "all" or not args.result_file:
            parser.error("--worker needs --impl tvm|tvm_ffi|nanobind and --result-file")
        return worker(args)
    return driver(args)


if __name__ == "__main__":
    sys.exit(main())
