"""Runs a pytest suite file by file against one site directory; used by dropin-suite.sh.

Each file runs in a process of its own with a time limit, so a crash (a signal) or a hang costs
that file only. Prints one line per file (passed, failed, errors, skipped, and how it ended) and
the totals, and writes every test's outcome to LOGS/results.json. When the other side's
results.json is there (logs/apache beside logs/ours), it also prints how many of the tests
that pass on apache-tvm-ffi pass here, and the files where they do not.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
VERBOSE_LINE = re.compile(r"^(\S+::\S.*?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
SUMMARY_LINE = re.compile(r"^=+ (.*\d+ \w+.*) in [\d.]+s.* =+$")
SUMMARY_ITEM = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")


def run_file(test: Path, root: Path, site: Path, log: Path, timeout: int) -> dict:
    """Runs one test file; returns its counts, its end and each test's outcome."""
    env = dict(os.environ, PYTHONPATH=str(site), PYTHONFAULTHANDLER="1")
    command = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-o", "addopts="]
    command.append(str(test.relative_to(root)))
    try:
        proc = subprocess.run(
            command,
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            check=False,
        )
        output, code = proc.stdout.decode(errors="replace"), proc.returncode
    except subprocess.TimeoutExpired as e:
        output, code = (e.stdout or b"").decode(errors="replace"), None
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(output)

    tests = {}
    for line in output.splitlines():
        match = VERBOSE_LINE.match(line)
        if match:
            word = match.group(2).lower()
            tests[match.group(1)] = {"xfail": "xfailed", "xpass": "xpassed"}.get(word, word)
    counts = dict.fromkeys(OUTCOMES, 0)
    summary = next((m for m in map(SUMMARY_LINE.match, reversed(output.splitlines())) if m), None)
    if summary:
        for number, word in SUMMARY_ITEM.findall(summary.group(1)):
            key = "error" if word.startswith("error") else word
            if key in counts:
                counts[key] = int(number)
    else:
        for outcome in tests.values():
            counts[outcome] += 1

    if code is None:
        end = f"timeout ({timeout}s)"
    elif code < 0:
        end = f"crash ({signal.Signals(-code).name})"
    elif summary is None and code not in (0, 5):
        end = f"crash (exit {code})"
    else:
        end = "ok" if code in (0, 5) else "fail"
    return {"counts": counts, "end": end, "tests": tests}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--site", type=Path, required=True, help="the site directory to test")
    parser.add_argument("--tests", type=Path, required=True, help="the suite's tests/python")
    parser.add_argument("--logs", type=Path, required=True, help="where logs and results go")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per file")
    parser.add_argument("files", nargs="*", help="test files relative to --tests")
    args = parser.parse_args()

    root = args.tests.parent.parent
    files = [args.tests / f for f in args.files] or sorted(args.tests.rglob("test_*.py"))
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        parser.error(f"no such test file: {', '.join(missing)}")

    results = {}
    totals = dict.fromkeys(OUTCOMES, 0)
    print(f"{'file':<48} {'pass':>5} {'fail':>5} {'err':>5} {'skip':>5}  end", flush=True)
    for test in files:
        name = str(test.relative_to(args.tests))
        log = args.logs / (name.replace("/", "__") + ".log")
        result = run_file(test, root, args.site, log, args.timeout)
        results[name] = result
        c = result["counts"]
        for key in OUTCOMES:
            totals[key] += c[key]
        print(
            f"{name:<48} {c['passed']:>5} {c['failed']:>5} {c['error']:>5} {c['skipped']:>5}"
            f"  {result['end']}",
            flush=True,
        )
    crashed = sum(1 for r in results.values() if r["end"].startswith(("crash", "timeout")))
    print(
        f"{'TOTAL':<48} {totals['passed']:>5} {totals['failed']:>5} {totals['error']:>5}"
        f" {totals['skipped']:>5}  {crashed} file(s) crashed or timed out",
        flush=True,
    )
    args.logs.mkdir(parents=True, exist_ok=True)
    (args.logs / "results.json").write_text(json.dumps(results, indent=1))

    other = args.logs.parent / "apache" / "results.json"
    if args.logs.name != "apache" and other.is_file():
        compare(json.loads(other.read_text()), results)
    # A failed test, an error or a lost file fails the run (both sides pass the whole suite).
    return 1 if totals["failed"] or totals["error"] or crashed else 0


def compare(apache: dict, ours: dict) -> None:
    """Prints how many tests passing on apache-tvm-ffi pass on ours, and where the rest are."""
    passing = total = 0
    lost = {}
    for name, result in apache.items():
        mine = ours.get(name, {"tests": {}})["tests"]
        for test, outcome in result["tests"].items():
            if outcome != "passed":
                continue
            total += 1
            if mine.get(test) == "passed":
                passing += 1
            else:
                lost[name] = lost.get(name, 0) + 1
    share = 100.0 * passing / total if total else 0.0
    print(f"of {total} tests passing on apache-tvm-ffi, {passing} pass on ours ({share:.1f}%)")
    for name, count in sorted(lost.items(), key=lambda item: -item[1]):
        print(f"  {name}: {count} lost")


if __name__ == "__main__":
    sys.exit(main())
