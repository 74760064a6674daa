#!/usr/bin/env python3
"""``from_dlpack`` of a framework tensor through DLPack's C exchange API, against the same
producer through ``__dlpack__`` and a capsule, and against apache-tvm-ffi on the same table, each
implementation in a process of its own (both are imported as ``libtvm_ffi.so``).

The producer is the CPython extension of the tests (``tests/python/dlpack_exchange_ext.c``,
built here with gcc): ``Buf`` carries an exchange table, ``PlainBuf`` is the same producer
without it. With torch installed, ``torch.Tensor`` is a row too.

    .venv-bench/bin/python benches/python/bench_exchange.py [--number N] [--json FILE]

Prints ns per call, the best of ``--repeat`` rounds of ``--number`` calls.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import sysconfig
import tempfile
import timeit
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
EXTENSION_SOURCE = REPO_ROOT / "tests" / "python" / "dlpack_exchange_ext.c"
IMPLS = {"tvm": "tvm.ffi", "apache-tvm-ffi": "tvm_ffi"}
ROWS = {
    "table": "from_dlpack(Buf): the exchange table",
    "dlpack": "from_dlpack(PlainBuf): __dlpack__ and a capsule",
    "torch": "from_dlpack(torch.Tensor)",
}


def build_extension(out: Path) -> Path:
    """The producer extension, built with gcc against Python's and tvm's headers."""
    target = out / f"dlpack_exchange_ext{sysconfig.get_config_var('EXT_SUFFIX')}"
    includes = [f"-I{sysconfig.get_paths()['include']}", f"-I{REPO_ROOT / 'python/tvm/include'}"]
    command = ["gcc", "-shared", "-fPIC", "-O2", *includes, "-o", str(target)]
    subprocess.run([*command, str(EXTENSION_SOURCE)], check=True)
    return target


def measure(impl: str, extension: str, number: int, repeat: int) -> dict[str, float]:
    """ns per call of each row for one implementation (run in this process)."""
    ffi = importlib.import_module(IMPLS[impl])
    spec = importlib.util.spec_from_file_location("dlpack_exchange_ext", extension)
    assert spec is not None and spec.loader is not None
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    producers = {"table": ext.Buf(16), "dlpack": ext.PlainBuf(16)}
    if importlib.util.find_spec("torch") is not None:
        import torch

        producers["torch"] = torch.arange(16, dtype=torch.float32)
    results = {}
    for row, producer in producers.items():
        namespace = {"from_dlpack": ffi.from_dlpack, "x": producer}
        timer = timeit.Timer("from_dlpack(x)", globals=namespace)
        results[row] = min(timer.repeat(repeat, number)) / number * 1e9
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument(
        "--impls", default=",".join(IMPLS), help="which to measure (comma-separated)"
    )
    parser.add_argument("--child", nargs=2, metavar=("IMPL", "EXTENSION"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        impl, extension = args.child
        print(json.dumps(measure(impl, extension, args.number, args.repeat)))
        return 0
    with tempfile.TemporaryDirectory() as work:
        extension = str(build_extension(Path(work)))
        results: dict[str, dict[str, float]] = {impl: {} for impl in IMPLS}
        for impl in args.impls.split(","):
            if impl not in IMPLS:
                parser.error(f"--impls: {impl!r} is not one of {', '.join(IMPLS)}")
            command = [sys.executable, __file__, "--number", str(args.number)]
            command += ["--repeat", str(args.repeat), "--child", impl, extension]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(f"{impl}: failed\n{done.stderr}", file=sys.stderr)
                return 1
            results[impl] = json.loads(done.stdout)

    def cell(value: float | None, width: int) -> str:
        return f"{value:>{width}.0f}" if value is not None else f"{'n/a':>{width}}"

    print(f"{'row':<48} {'tvm ns':>8} {'apache ns':>10} {'ratio':>6}")
    for row, label in ROWS.items():
        ours, theirs = results["tvm"].get(row), results["apache-tvm-ffi"].get(row)
        if ours is None and theirs is None:
            continue
        ratio = f"{ours / theirs:>6.2f}" if ours and theirs else f"{'n/a':>6}"
        print(f"{label:<48} {cell(ours, 8)} {cell(theirs, 10)} {ratio}")
    if "table" in results["tvm"]:
        table, plain = results["tvm"]["table"], results["tvm"]["dlpack"]
        print(f"tvm: the table costs {table / plain:.2f}x of the __dlpack__ path")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
