"""Apache TVM on two ``libtvm_ffi.so`` side by side: apache-tvm-ffi's and ours.

The interpreter of :mod:`apache_tvm_env` (apache-tvm 0.27 with apache-tvm-ffi) runs the workloads of
``tests/apache_tvm/workloads.py``, one case per process, on two sides:

- ``apache``: the environment as pip installed it;
- ``ours``: the same environment with ``PYTHONPATH`` naming a private site directory that holds a
  copy of the ``tvm_ffi`` package and its dist-info (whose RECORD is how the package finds
  ``lib/libtvm_ffi.so``) with our library in place of ``tvm_ffi/lib/libtvm_ffi.so``. Apache TVM's
  own libraries (``libtvm_runtime.so``, ``libtvm_compiler.so``) need ``libtvm_ffi.so`` by SONAME,
  so they bind to whichever the ``tvm_ffi`` package loaded first: ours.

The site directory is cached under ``target/apache-tvm/`` (git-ignored), one per library file
(path, size and modification time), and made again when the library changes.

Our library is ``TVM_TEST_LIBTVM_FFI`` when set (for example ``target/debug/libtvm_ffi_shared.so``
after ``cargo build -p tvm-ffi-shared``), else ``tvm/lib/libtvm_ffi.so`` of the ``tvm`` package
under test (the dev wheel).

Run as a script (``scripts/apache-tvm-suite.sh``), it runs every case on both sides and prints a
table of the outcomes and the counts.
"""

from __future__ import annotations

import argparse
import ast
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import apache_tvm_env

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = REPO_ROOT / "tests" / "apache_tvm" / "workloads.py"
CACHE_DIR = REPO_ROOT / "target" / "apache-tvm"
LIBRARY_ENV_VAR = "TVM_TEST_LIBTVM_FFI"
SIDES = ("apache", "ours")
#: Seconds one case may run (the compiler's first use of LLVM, a debug build of our library).
CASE_TIMEOUT = 600
#: Outcomes of a case: it returned, it raised, it died by a signal (or exited without a result),
#: it ran out of time.
OUTCOMES = ("passed", "failed", "crashed", "timeout")


def case_names() -> list[str]:
    """The cases of ``workloads.py`` in file order, read without running it."""
    tree = ast.parse(WORKLOADS.read_text())
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(isinstance(d, ast.Name) and d.id == "case" for d in node.decorator_list)
    ]


def our_library() -> Path:
    """The ``libtvm_ffi.so`` to put under Apache TVM (see the module's documentation)."""
    named = os.environ.get(LIBRARY_ENV_VAR)
    if named:
        return Path(named).resolve()
    import tvm

    return (Path(tvm.__file__).resolve().parent / "lib" / "libtvm_ffi.so").resolve()


def _site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        env=apache_tvm_env.apache_tvm_environ(),
    )
    return Path(out.stdout.strip())


def our_site(python: Path, library: Path) -> Path:
    """The site directory in which the ``tvm_ffi`` package loads ``library`` (made once)."""
    if not library.is_file():
        raise FileNotFoundError(f"our library {library} does not exist")
    stat = library.stat()
    key = hashlib.sha256(f"{library}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    site = CACHE_DIR / f"site-ours-{key}"
    done = site / ".complete"
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with open(CACHE_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(site, ignore_errors=True)
            packages = _site_packages(python)
            dist_infos = sorted(packages.glob("apache_tvm_ffi-*.dist-info"))
            if len(dist_infos) != 1 or not (packages / "tvm_ffi").is_dir():
                raise RuntimeError(f"no single apache-tvm-ffi installed in {packages}")
            site.mkdir()
            shutil.copytree(packages / "tvm_ffi", site / "tvm_ffi", symlinks=True)
            shutil.copytree(dist_infos[0], site / dist_infos[0].name, symlinks=True)
            target = site / "tvm_ffi" / "lib" / "libtvm_ffi.so"
            target.unlink()
            shutil.copy2(library, target)
            (site / "SOURCE").write_text(f"{library}\n")
            done.write_text("")
        site.touch()
        # Sites of libraries replaced since go: those older than a day, and all but the three
        # used last (another session may be running on one of those).
        others = sorted(
            (old for old in CACHE_DIR.glob("site-ours-*") if old != site),
            key=lambda old: old.stat().st_mtime,
            reverse=True,
        )
        for rank, old in enumerate(others):
            if rank >= 3 or time.time() - old.stat().st_mtime > 86400:
                shutil.rmtree(old, ignore_errors=True)
    return site


def library_in(site: Path | None, python: Path) -> Path:
    """The ``libtvm_ffi.so`` a side's ``tvm_ffi`` package loads."""
    base = site if site is not None else _site_packages(python)
    return base / "tvm_ffi" / "lib" / "libtvm_ffi.so"


def run_case(python: Path, case: str, site: Path | None, timeout: int = CASE_TIMEOUT) -> dict:
    """Runs one case in a process of its own; ``site`` is ours, ``None`` apache-tvm-ffi.

    Returns the case's JSON result with ``status`` one of :data:`OUTCOMES`, the process's
    ``returncode`` and the tail of its output (``log``).
    """
    environ = apache_tvm_env.apache_tvm_environ()
    if site is not None:
        environ["PYTHONPATH"] = str(site)
    environ["TVM_NUM_THREADS"] = "2"  # the parallel case: a small pool on a small machine
    with tempfile.TemporaryDirectory(prefix="apache-tvm-case-") as cwd:
        try:
            proc = subprocess.run(
                [str(python), str(WORKLOADS), case],
                cwd=cwd,
                env=environ,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as expired:
            output = expired.stdout or ""
            output = output.decode(errors="replace") if isinstance(output, bytes) else output
            return {
                "case": case,
                "status": "timeout",
                "detail": f"no result after {timeout} s",
                "returncode": None,
                "log": output[-4000:],
            }
    result: dict = {}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            try:
                result = json.loads(line)
                break
            except json.JSONDecodeError:
                continue
    log = (proc.stdout + proc.stderr)[-6000:]
    result.setdefault("case", case)
    result["returncode"] = proc.returncode
    result["log"] = log
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        when = f"after the case {result['status']}" if "status" in result else "during the case"
        result["status"] = "crashed"
        result["detail"] = f"{name} {when}{_innermost_frame(proc.stderr)}"
    elif "status" not in result:
        result["status"] = "crashed"
        result["detail"] = f"exit {proc.returncode} without a result"
    elif result["status"] == "passed" and proc.returncode != 0:
        result["status"] = "crashed"
        result["detail"] = f"exit {proc.returncode} after the case passed"
    return result


def _innermost_frame(stderr: str) -> str:
    """`` in FUNCTION``: the innermost TVM frame of the crash report Apache TVM prints, if any."""
    for line in stderr.splitlines():
        if line.strip().startswith("File ") and ", in tvm::" in line:
            return " in " + line.split(", in ", 1)[1].strip()
    return ""


def run_both(python: Path, case: str, site: Path) -> dict[str, dict]:
    """Runs a case on apache-tvm-ffi and on ours at the same time."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        apache = pool.submit(run_case, python, case, None)
        ours = pool.submit(run_case, python, case, site)
        return {"apache": apache.result(), "ours": ours.result()}


def save_result(side: str, result: dict) -> None:
    """Keeps a case's last result under ``target/apache-tvm/results/<side>/`` for the table."""
    folder = CACHE_DIR / "results" / side
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{result['case']}.json").write_text(json.dumps(result, indent=1))


def table(results: dict[str, dict[str, dict]]) -> str:
    """The per-case table of both sides, then the counts of each outcome."""
    width = max(len(c) for c in results) + 2
    lines = [f"{'case':<{width}}{'apache':<10}{'ours':<10}notes"]
    for case, sides in results.items():
        notes = [
            f"{side}: {sides[side].get('detail', '')[:110]}"
            for side in SIDES
            if sides[side]["status"] != "passed"
        ]
        cells = "".join(f"{sides[side]['status']:<10}" for side in SIDES)
        lines.append(f"{case:<{width}}{cells}{'; '.join(notes)}".rstrip())
    lines.append("")
    for side in SIDES:
        counts = {o: sum(r[side]["status"] == o for r in results.values()) for o in OUTCOMES}
        summary = ", ".join(f"{n} {o}" for o, n in counts.items())
        lines.append(f"{side:<9} {summary} (of {len(results)})")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description="Apache TVM's workloads on both libraries.")
    parser.add_argument(
        "--lib",
        type=Path,
        help=f"our library (default: ${LIBRARY_ENV_VAR}, else the tvm package's lib/libtvm_ffi.so)",
    )
    parser.add_argument("--json", type=Path, help="also write every result to this file")
    parser.add_argument("cases", nargs="*", help="cases to run (default: all)")
    args = parser.parse_args()
    if args.lib:
        os.environ[LIBRARY_ENV_VAR] = str(args.lib)
    names = case_names()
    unknown = sorted(set(args.cases) - set(names))
    if unknown:
        parser.error(f"unknown cases {unknown}; the cases are {', '.join(names)}")
    try:
        python = apache_tvm_env.apache_tvm_python()
    except (pytest.skip.Exception, pytest.fail.Exception) as outcome:
        print(f"apache-tvm-suite: no Apache TVM environment: {outcome}", file=sys.stderr)
        return 2
    library = our_library()
    site = our_site(python, library)
    print(f"apache: {library_in(None, python)}")
    print(f"ours:     {library} (as {library_in(site, python)})")
    results = {}
    for case in args.cases or names:
        results[case] = run_both(python, case, site)
        for side in SIDES:
            save_result(side, results[case][side])
        line = "  ".join(f"{side} {results[case][side]['status']}" for side in SIDES)
        print(f"  {case}: {line}", flush=True)
    print()
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0 if all(r["ours"]["status"] == "passed" for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
