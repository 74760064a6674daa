"""The C ABI benchmark: instructions per operation of `tvm` against apache-tvm-ffi.

One harness, `benches/c/abi_ops.c`, is compiled against each side's header and linked to each
side's `libtvm_ffi.so` (ours: the `c-abi-bench` cdylib, which exports every `TVMFFI*` function of
`tvm-ffi-capi`; the reference: `tvm_ffi/lib` of the installed wheel). Each operation is counted
with `valgrind --tool=callgrind`: (instructions of a run of 2N operations - of a run of N) / N,
so start-up and first-use costs cancel out. The time per operation (best of 5 loops) is printed
beside it for information, never compared with a target.

    python benches/c/bench_c_abi.py --ours-lib target/release/libtvm_ffi_c_abi_bench.so
    python benches/c/bench_c_abi.py --ours-lib ... --rows array8,map8 --no-time

Instruction counts do not depend on the load of the machine; times do.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
HARNESS = HERE / "abi_ops.c"

# Row name -> description, in table order. The names are the harness's operations.
ROWS = {
    "call_nop0": "TVMFFIFunctionCall, testing.nop, 0 args",
    "call_nop3": "same, 3 int args",
    "call_typed_nop3": "typed Rust no-op, 3 int args (ref: testing.nop)",
    "get_global": "TVMFFIFunctionGetGlobal + DecRef",
    "string5": "string from 5 bytes + release",
    "string100": "string from 100 bytes + release",
    "raw_str_to_owned": 'TVMFFIAnyViewToOwnedAny of raw "hello" + release',
    "array8": "ffi.Array of 8 ints + release",
    "map8": "ffi.Map of 8 int pairs + release",
    "array_get_item": "ffi.ArrayGetItem",
    "map_get_item": "ffi.MapGetItem",
    "dlpack_roundtrip": "DLPack versioned import + export + release",
    "dtype_from_string": 'TVMFFIDataTypeFromString("float32")',
    "error_raise": "raise + fetch + release an error",
    "error_fetch_none": "TVMFFIErrorMoveFromRaised, no error",
    "incref_decref": "TVMFFIObjectIncRef + DecRef",
}
TARGET = 0.8


def build(cc: str, out: Path, include: Path, libdir: Path, extra_libs: list[str]) -> Path:
    """Compiles the harness against `include`, linked to `libdir`/libtvm_ffi.so."""
    out.mkdir(parents=True, exist_ok=True)
    exe = out / "abi_ops"
    cmd = [cc, "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(HARNESS)]
    cmd += [f"-I{include}", f"-L{libdir}", "-Wl,--no-as-needed", "-ltvm_ffi"]
    cmd += [f"-l{lib}" for lib in extra_libs] + [f"-Wl,-rpath,{libdir}"]
    subprocess.run(cmd, check=True)
    return exe


def instructions(exe: Path, op: str, n: int) -> int:
    """The callgrind total of one run of `op` repeated `n` times."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={tmp}/cg.out",
                str(exe),
                op,
                str(n),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"{exe} {op} {n} under callgrind failed:\n{proc.stderr[-2000:]}")
    return int(found.group(1))


def per_op(exe: Path, op: str, n: int) -> float:
    """Instructions per operation: (run of 2n - run of n) / n."""
    return (instructions(exe, op, 2 * n) - instructions(exe, op, n)) / n


def time_ns(exe: Path, op: str, n: int) -> float:
    """Best of 5 loops of `n` operations, in ns per operation."""
    out = subprocess.run(
        [str(exe), op, str(n), "--time"], capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ours-lib", type=Path, required=True, help="our cdylib exporting TVMFFI*")
    parser.add_argument("--rows", help="comma-separated row names (default: all)")
    parser.add_argument(
        "--iterations", type=int, default=10_000, help="N of the callgrind runs (N and 2N)"
    )
    parser.add_argument(
        "--time-iterations", type=int, default=200_000, help="operations per timed loop"
    )
    parser.add_argument("--no-time", action="store_true", help="skip the ns column")
    parser.add_argument("--jobs", type=int, default=2, help="callgrind runs at once")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--cc", default=os.environ.get("CC", "cc"))
    args = parser.parse_args()

    rows = list(ROWS) if not args.rows else args.rows.split(",")
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        parser.error(f"unknown rows {unknown}; known: {', '.join(ROWS)}")
    if shutil.which("valgrind") is None:
        print("bench_c_abi.py: valgrind is not installed", file=sys.stderr)
        return 1
    import tvm_ffi  # the reference wheel, only to find its files

    ref_root = Path(tvm_ffi.__file__).resolve().parent
    work = ROOT / "target" / "bench" / "c-abi"
    ours_dir = work / "ours"
    ours_dir.mkdir(parents=True, exist_ok=True)
    # The harness links -ltvm_ffi on both sides; the cdylib's SONAME is libtvm_ffi.so already.
    shutil.copyfile(args.ours_lib, ours_dir / "libtvm_ffi.so")
    exes = {
        "ours": build(args.cc, ours_dir, ROOT / "python" / "tvm" / "include", ours_dir, []),
        "ref": build(
            args.cc, work / "ref", ref_root / "include", ref_root / "lib", ["tvm_ffi_testing"]
        ),
    }

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        counts = {
            (side, op): pool.submit(per_op, exe, op, args.iterations)
            for side, exe in exes.items()
            for op in rows
        }
        counts = {key: future.result() for key, future in counts.items()}
    times = {}
    if not args.no_time:
        for op in rows:
            for side, exe in exes.items():
                times[side, op] = time_ns(exe, op, args.time_iterations)

    n = args.iterations
    print(f"instructions per operation: (callgrind of {2 * n:,} - of {n:,}) / {n:,}")
    print(f"reference: apache-tvm-ffi {tvm_ffi.__version__} ({ref_root / 'lib' / 'libtvm_ffi.so'})")
    print(f"ours: {args.ours_lib}")
    print()
    cells = ("ours", "ref", "ratio", "ns ours", "ns ref")
    head = f"| {'operation':<50} | " + " | ".join(f"{c:>8}" for c in cells) + " |"
    print(head)
    print("|" + "|".join("-" * (len(cell)) for cell in head.split("|")[1:-1]) + "|")
    results = []
    for op in rows:
        ours, ref = counts["ours", op], counts["ref", op]
        ratio = ours / ref if ref else float("nan")
        ns = {s: (f"{times[s, op]:.1f}" if times else "-") for s in ("ours", "ref")}
        values = (f"{ours:,.0f}", f"{ref:,.0f}", f"{ratio:.2f}", ns["ours"], ns["ref"])
        print(f"| {ROWS[op]:<50} | " + " | ".join(f"{v:>8}" for v in values) + " |")
        results.append({"row": op, "ours": ours, "ref": ref, "ratio": ratio, "ns": ns})
    above = [r for r in results if r["ratio"] > TARGET]
    met = len(results) - len(above)
    print(f"\n{met} of {len(results)} rows at <= {TARGET} of the reference's instructions.")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
