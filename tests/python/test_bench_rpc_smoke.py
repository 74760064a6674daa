"""The RPC benchmark runs end to end (benches/python/bench_rpc.py on tiny sizes and counts).

Not a timing test: the numbers are not checked, only that every row is measured and reported,
for ours alone and side by side with Apache TVM (tests/python/apache_tvm_env.py).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import apache_tvm_env

BENCH = Path(__file__).resolve().parents[2] / "benches" / "python" / "bench_rpc.py"

ROWS = [
    "connect + first call, ms",
    "no-op call rpc.test.addone(1), us/call",
    "chained call client->A->B, us/call",
    "2 concurrent clients, calls/s in all",
    "upload 1 MiB, first of a session, MB/s",
    "upload 1 MiB, later, MB/s",
    "download 1 MiB, first of a session, MB/s",
    "download 1 MiB, later, MB/s",
]
PAIRING_ROWS = ["connect + first call, ms", "no-op call, us/call", *ROWS[4:]]
PAIRING_HEADER = [
    "ours -> ours",
    "ours -> Apache TVM",
    "Apache TVM -> ours",
    "Apache TVM -> Apache TVM",
]


def _tables(stdout: str) -> list[tuple[list[str], dict[str, list[str]]]]:
    """The markdown tables of the output: the header cells, and each line's cells by its first."""

    def cells(line: str) -> list[str]:
        return [cell.strip() for cell in line.strip().strip("|").split("|")]

    tables = []
    for block in re.findall(r"(?:^\|.*\n?)+", stdout, flags=re.MULTILINE):
        header, _rule, *lines = block.splitlines()
        tables.append((cells(header), {cells(line)[0]: cells(line)[1:] for line in lines}))
    return tables


def _number(cell: str) -> float:
    return float(cell.replace(",", ""))


def _run(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    json_path = tmp_path / "bench_rpc.json"
    command = [sys.executable, str(BENCH), "--ours", sys.executable, "--rounds", "1"]
    command += ["--sizes", "1", "--calls", "200", "--loops", "1", "--connects", "1"]
    command += ["--clients", "2", "--json", str(json_path), *extra]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, json.loads(json_path.read_text())


def _check_main(stdout: str, document: dict, apache: bool) -> None:
    (header, main), (pairing_header, pairings) = _tables(stdout)
    assert header[1:4] == ["ours", "Apache TVM", "raw socket"], stdout
    assert list(main) == ROWS, stdout
    for label, cells in main.items():
        assert _number(cells[0]) > 0, (label, cells)
        assert (cells[1] != "n/a") == apache, (label, cells)
        target, mark = cells[4], cells[5]
        if target == "-":
            assert mark == "-", (label, cells)
        elif "Apache TVM" in target and not apache:
            assert mark == "n/a", (label, cells)
        else:
            assert mark in ("pass", "MISS"), (label, cells)
    assert pairing_header[1:] == PAIRING_HEADER, stdout
    assert list(pairings) == PAIRING_ROWS, stdout
    for label, cells in pairings.items():
        measured = [cell != "n/a" for cell in cells]
        assert measured == [True, apache, apache, apache], (label, cells)
    assert document["errors"] == []
    assert [row["label"] for row in document["rows"]] == ROWS


def test_ours_alone_reports_every_row(tmp_path: Path) -> None:
    proc, document = _run(tmp_path)
    _check_main(proc.stdout, document, apache=False)
    assert "n/a: ours -> Apache TVM: no --apache interpreter" in proc.stdout


@pytest.fixture(scope="module")
def apache_python() -> Path:
    return apache_tvm_env.apache_tvm_python()


def test_side_by_side_with_apache_tvm_reports_every_row(
    tmp_path: Path, apache_python: Path
) -> None:
    proc, document = _run(tmp_path, "--apache", str(apache_python))
    _check_main(proc.stdout, document, apache=True)
    # Apache TVM's server serves one session at a time: its clients never all run at once.
    assert [c["overlap"] for c in document["clients"]["apache"]] == [1]
