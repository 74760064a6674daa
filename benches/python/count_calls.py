#!/usr/bin/env python3
"""Instructions per execution of rows of ``bench_ffi.py``, counted with callgrind: the statement
of each row runs ``--low`` and then ``--high`` times in two fresh interpreters under
``valgrind --tool=callgrind`` (same set-up in both), and the difference of the two totals divided
by the difference of the counts is the cost of one execution, timeit's loop included. Unlike
timings, the counts do not move with the load of the machine; they are what changes in the
Python call path are judged by.

    .venv-bench/bin/python benches/python/count_calls.py --rows nop0,apply_py
    .venv-bench/bin/python benches/python/count_calls.py --impl nanobind --rows apply_py

Ours needs ``TVM_FFI_TESTING_LIB`` as for ``bench_ffi.py`` (default: the repository's
``target/release/libtvm_ffi_testing.so``, if built). ``--keep DIR`` keeps the callgrind output
files (for ``callgrind_annotate``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path

import bench_ffi


def _run(impl: str, row_id: str, number: int, out_file: Path) -> int:
    """Total instructions of one interpreter that sets up ``impl`` and runs the row ``number``
    times."""
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out_file}",
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        "--impl",
        impl,
        "--rows",
        row_id,
        "--low",
        str(number),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    testing_lib = Path(__file__).resolve().parents[2] / "target/release/libtvm_ffi_testing.so"
    if "TVM_FFI_TESTING_LIB" not in env and testing_lib.exists():
        env["TVM_FFI_TESTING_LIB"] = str(testing_lib)
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{proc.stderr[-3000:]}")
    match = re.search(r"Collected : (\d+)", proc.stderr)
    if match is None:
        raise RuntimeError(f"no instruction count in callgrind's output:\n{proc.stderr[-3000:]}")
    return int(match.group(1))


def _child(impl: str, row_id: str, number: int) -> None:
    row = bench_ffi.ROWS_BY_ID[row_id]
    ns, problems = bench_ffi._namespace(impl, graph=row.uses_graph)
    stmt = row.nanobind if impl == bench_ffi.NANOBIND else row.stmt
    if stmt is None:
        raise SystemExit(f"row {row_id} has no statement for {impl}")
    if not row.check(eval(stmt, ns), ns):
        raise SystemExit(f"{stmt} gave an unexpected value ({problems})")
    timer = timeit.Timer(stmt, globals=ns)
    timer.timeit(number=100)  # first use: lazy set-up, caches
    timer.timeit(number=number)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impl", choices=bench_ffi.IMPLS, default=bench_ffi.OURS)
    parser.add_argument("--rows", default="nop0", help="comma-separated row ids of bench_ffi.py")
    parser.add_argument("--low", type=int, default=2_000, help="executions of the first run")
    parser.add_argument("--high", type=int, default=12_000, help="executions of the second run")
    parser.add_argument("--keep", metavar="DIR", help="keep the callgrind output files here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = [r for r in rows if r not in bench_ffi.ROWS_BY_ID]
    if unknown:
        parser.error(f"unknown rows {unknown}; rows: {', '.join(bench_ffi.ROWS_BY_ID)}")
    if args.child:
        _child(args.impl, rows[0], args.low)
        return 0
    if shutil.which("valgrind") is None:
        print("count_calls: valgrind is not installed", file=sys.stderr)
        return 1
    if args.impl == bench_ffi.NANOBIND:
        bench_ffi.nanobind_ext.build()
    with tempfile.TemporaryDirectory(prefix="count_calls.") as tmp:
        out_dir = Path(args.keep or tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        print(f"{'row':<14} {'instructions per execution':>28}  ({args.impl})")
        for row_id in rows:
            low = _run(args.impl, row_id, args.low, out_dir / f"{args.impl}.{row_id}.low.out")
            high = _run(args.impl, row_id, args.high, out_dir / f"{args.impl}.{row_id}.high.out")
            print(f"{row_id:<14} {(high - low) / (args.high - args.low):>28,.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
