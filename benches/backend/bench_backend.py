#!/usr/bin/env python3
"""The backend API of compiled kernels: ``tvm`` (this repository) side by side with Apache
TVM 0.27's runtime (PyPI ``apache-tvm==0.27.0.post1``), running the same kernels in the same run.

The kernels are built once by Apache TVM (``tests/apache_tvm/backend_kernels.py``, in the Apache
TVM interpreter); each implementation then loads the same ``.so`` files with its own
``tvm.runtime.load_module`` and times them with its own ``time_evaluator`` (the loop runs in
the runtime, not in Python). Both packages are named ``tvm``, so each is imported only by its
own worker process; the driver imports neither. Rounds alternate which side goes first.

Rows (seconds per call, the best repeat of a round; the table shows the median over rounds):

- ``launch``: ``tiny`` (``a += 1`` over 64 int32 in a parallel loop): a parallel launch with
  almost nothing in it, i.e. the fork-join latency plus one call.
- ``call_1thread``: the same kernel with one thread (``TVM_NUM_THREADS=1``): no launch, the cost
  of the call and the loop alone. ``launch - call_1thread`` is what the launch adds.
- ``matmul_256``: ``c = a @ b`` over 256x256 float32, rows in parallel.
- ``two_stage``: two parallel stages separated by a barrier, with workspaces.

Target: ours at or below Apache TVM's time on every row (ratio <= 1.0). Under the table: the
floor, what waking a worker costs on this machine with no runtime at all
(``fork_join_floor.c``: a spinning worker, and one asleep in a futex).

Usage: bench_backend.py --ours PY --apache PY [--threads N] [--rounds R] [--quick] [--json F]
Exit status: 0 when every row was measured, 1 on errors, 2 on usage.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BUILDER = REPO / "tests" / "apache_tvm" / "backend_kernels.py"
KERNEL_DIR = REPO / "target" / "bench" / "backend-kernels"

OURS = "ours"
APACHE = "apache"

# row -> (kernel, calls per repeat, thread count override or None for --threads)
ROWS = {
    "launch": ("tiny", 20000, None),
    "call_1thread": ("tiny", 20000, 1),
    "matmul_256": ("matmul", 20, None),
    "two_stage": ("two_stage", 2000, None),
}


def worker(kernel_dir: Path, rows: list[str], repeats: int, scale: float) -> None:
    """Times ``rows`` with the ``tvm`` this interpreter imports; prints one JSON line."""
    import numpy as np

    import tvm

    described = json.loads((kernel_dir / "kernels.json").read_text())["kernels"]
    rng = np.random.default_rng(7)
    out = {}
    for row in rows:
        kernel, calls, _ = ROWS[row]
        entry = described[kernel]
        module = tvm.runtime.load_module(str(kernel_dir / entry["file"]))
        args = []
        for arg in entry["args"]:
            shape, dtype = tuple(arg["shape"]), arg["dtype"]
            if dtype.startswith("float"):
                data = rng.standard_normal(shape).astype(dtype)
            else:
                data = rng.integers(0, 100, size=shape).astype(dtype)
            args.append(tvm.runtime.tensor(data))
        number = max(1, int(calls * scale))
        timer = module.time_evaluator(entry["function"], tvm.cpu(), number=number, repeat=repeats)
        out[row] = min(timer(*args).results)
    print(json.dumps(out))


def build_kernels(apache: str) -> Path:
    """The kernels, built by Apache TVM once (again when the builder changed)."""
    listing = KERNEL_DIR / "kernels.json"
    if listing.exists() and listing.stat().st_mtime >= BUILDER.stat().st_mtime:
        return KERNEL_DIR
    KERNEL_DIR.mkdir(parents=True, exist_ok=True)
    subprocess.run([apache, str(BUILDER), str(KERNEL_DIR)], check=True, env=_without_pythonpath())
    return KERNEL_DIR


def _without_pythonpath() -> dict[str, str]:
    environ = dict(os.environ)
    environ.pop("PYTHONPATH", None)
    return environ


def run_worker(python: str, rows: list[str], threads: int, args: argparse.Namespace) -> dict:
    environ = _without_pythonpath()
    environ["TVM_NUM_THREADS"] = str(threads)
    # numpy's OpenBLAS threads spin after start-up and would take cores from the pool.
    environ["OPENBLAS_NUM_THREADS"] = "1"
    command = [python, str(Path(__file__).resolve()), "--worker", str(args.kernels)]
    command += ["--rows", ",".join(rows), "--repeats", str(args.repeats)]
    command += ["--scale", str(args.scale)]
    done = subprocess.run(command, env=environ, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{python} worker failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def fork_join_floor() -> dict | None:
    """The floor of ``fork_join_floor.c``, or None without a C compiler."""
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "floor"
        source = HERE / "fork_join_floor.c"
        built = subprocess.run(
            ["gcc", "-O2", "-pthread", "-o", str(exe), str(source)],
            capture_output=True,
            text=True,
            check=False,
        )
        if built.returncode != 0:
            print(f"floor not measured: {built.stderr.strip()}", file=sys.stderr)
            return None
        return json.loads(subprocess.check_output([str(exe)], text=True))


def measure(args: argparse.Namespace) -> dict:
    by_threads: dict[int, list[str]] = {}
    for row, (_, _, fixed) in ROWS.items():
        by_threads.setdefault(fixed or args.threads, []).append(row)
    samples: dict[str, dict[str, list[float]]] = {OURS: {}, APACHE: {}}
    for round_index in range(args.rounds):
        sides = [(OURS, args.ours), (APACHE, args.apache)]
        if round_index % 2:
            sides.reverse()
        for side, python in sides:
            for threads, rows in by_threads.items():
                for row, seconds in run_worker(python, rows, threads, args).items():
                    samples[side].setdefault(row, []).append(seconds)
    return {
        side: {row: statistics.median(values) for row, values in rows.items()}
        for side, rows in samples.items()
    }


def show(medians: dict, floor: dict | None, threads: int) -> None:
    print(f"\nbackend API, {threads} threads (µs per call, median of rounds)")
    print(f"{'row':<14} {'ours':>10} {'apache-tvm':>11} {'ratio':>7}  target <= 1.0")
    for row in ROWS:
        ours, apache = medians[OURS][row] * 1e6, medians[APACHE][row] * 1e6
        ratio = ours / apache
        mark = "" if ratio <= 1.0 else "  MISS"
        print(f"{row:<14} {ours:>10.3f} {apache:>11.3f} {ratio:>7.2f}{mark}")
    for side in (OURS, APACHE):
        added = (medians[side]["launch"] - medians[side]["call_1thread"]) * 1e6
        print(f"launch adds {added:.3f} µs on {side}")
    if floor:
        print(
            f"floor on this machine: {floor['spin_ns'] / 1000:.3f} µs to wake a spinning worker "
            f"and hear back, {floor['futex_ns'] / 1000:.3f} µs through a futex"
        )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--rows", help=argparse.SUPPRESS)
    parser.add_argument("--ours", help="the interpreter with our tvm (a release build)")
    parser.add_argument("--apache", help="the interpreter with apache-tvm 0.27")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the calls per repeat")
    parser.add_argument("--quick", action="store_true", help="1 round, a tenth of the calls")
    parser.add_argument("--json", type=Path, help="also write the medians here")
    parser.add_argument("--kernels", type=Path, default=KERNEL_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.rows.split(","), args.repeats, args.scale)
        return 0
    if not args.ours or not args.apache:
        parser.print_usage(sys.stderr)
        return 2
    if args.quick:
        args.rounds, args.scale = 1, args.scale / 10
    try:
        args.kernels = build_kernels(args.apache)
        medians = measure(args)
    except (RuntimeError, subprocess.CalledProcessError) as error:
        print(f"bench_backend: {error}", file=sys.stderr)
        return 1
    floor = fork_join_floor()
    show(medians, floor, args.threads)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        report = {"threads": args.threads, "medians_s": medians, "floor_ns": floor}
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
