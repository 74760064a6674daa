#!/usr/bin/env python3
"""RPC on loopback: ``tvm`` (this repository) side by side with Apache TVM 0.27 (PyPI
``apache-tvm==0.27.0.post1``) and a raw loopback TCP socket, measured in the same run, with
the mixed pairings (our client with Apache TVM's server, Apache TVM's client with ours).

Both packages are named ``tvm``, so each is only ever imported by its own interpreter: the
driver (this script) imports neither. It starts two servers per implementation (A and B, each
``python -m tvm.exec.rpc_server`` of that implementation, in a process group of its own), then
runs the rounds interleaved: in each round, per implementation, a fresh client process
(rpc_bench_workers.py) and then the concurrent clients on its server A; a raw-socket pair; and
a client process of each mixed pairing on the other implementation's server A.

Rows (the table shows the median over rounds):

- ``connect``: ``rpc.connect(host, port)`` until ``rpc.test.addone(1)`` has returned, ms, the
  median of ``--connects`` connects (a pause after each, so that each finds the server idle).
  Target: ours at most Apache TVM's.
- ``call``: a remote no-op, ``rpc.test.addone(1)`` (the cheapest function both servers
  register; on both it is a Python function in the serving process), µs per call over a loop of
  ``--calls`` calls (the best of ``--loops`` loops per round). Raw socket: a 64-byte request
  and 64-byte reply round trip. Target: ours at most 0.5x Apache TVM's time.
- ``chain``: the same call through a chain, client -> A -> B (``session_constructor_args=
  ["rpc.Connect", host, port_B, "", False]``). Target: ours chained at most 2x ours direct.
- ``clients``: ``--clients`` client processes of one implementation, each connected to its
  server A and released together, calling ``rpc.test.addone(1)`` 5 x ``--calls`` times each:
  calls per second in all. No target. Apache TVM's server serves one session at a time: its
  figure is the serialized one (the table's notes say how many loops overlapped).
- ``upload_<N>``: ``tvm.runtime.tensor(x, sess.cpu())`` of an N MiB uint8 array, and
  ``download_<N>``: ``t.numpy()`` of that remote tensor, in MB/s (10^6 bytes per second), each
  size in a session of its own: ``..._first`` is the first transfer of that fresh session
  (target: ours at least 0.5x the raw socket), the plain row the next one (at least 0.7x).
  Raw socket: ``sendall`` of N bytes, received with ``recv_into`` into a preallocated buffer
  (the upload waits for a 1-byte acknowledgement), after one untimed transfer each way; both
  targets are taken against it. Also shown under the table: the raw socket into a buffer
  allocated for each transfer, whose pages are faulted in as the bytes arrive: the first
  transfer of each size on the fresh pair, and a later one.

Pairings (a second table, client -> server): connect and call for all four pairings, and in the
first ``--large-rounds`` rounds the transfers of ``--pairing-sizes`` (the smallest size; none
with ``--quick``). A pairing that cannot run shows n/a and the reason; it is not an error.

Rows that miss a target are marked MISS, not failures. Exit status: 0 when every row of the
first table was measured, 1 on errors (a server that did not start, a worker that failed), 2
on usage.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rpc_bench_procs as procs

OURS = "ours"
APACHE = "apache"
RAW = "raw"
OURS_ON_APACHE = "ours_apache"  # our client, Apache TVM's server
APACHE_ON_OURS = "apache_ours"  # Apache TVM's client, our server
COLUMNS = (OURS, APACHE, RAW)
PAIRINGS = {  # column: (client, server)
    OURS: ("ours", "ours"),
    OURS_ON_APACHE: ("ours", "Apache TVM"),
    APACHE_ON_OURS: ("Apache TVM", "ours"),
    APACHE: ("Apache TVM", "Apache TVM"),
}
NAMES = {OURS: "ours", APACHE: "Apache TVM", RAW: "raw socket"}

DEFAULTS = {
    "rounds": 5,
    "large_rounds": 3,
    "calls": 2000,
    "loops": 3,
    "connects": 5,
    "clients": 4,
    "sizes": (64, 256),
}
QUICK = DEFAULTS | {"rounds": 2, "large_rounds": 1, "loops": 1, "connects": 3, "sizes": (64,)}
#: Sizes above this many MiB run in the first ``--large-rounds`` rounds only.
LARGE_MIB = 64
#: Each concurrent client makes this many times ``--calls`` calls.
CLIENT_CALLS_FACTOR = 5

#: Seconds a client worker may take: of one implementation, of a mixed pairing.
WORKER_TIMEOUT_S = 1800.0
PAIRING_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Row:
    id: str
    label: str
    higher_better: bool
    target: float | None = None
    base: str = ""  # the ratio's divisor: APACHE's figure, RAW's, or "call" (ours direct)
    raw: str | None = None  # the raw socket's result shown in its column (None: "-")

    @property
    def target_text(self) -> str:
        if self.target is None:
            return "-"
        base = {APACHE: "Apache TVM", RAW: "raw", "call": "direct"}[self.base]
        return f"{'>=' if self.higher_better else '<='} {self.target:.2f}x {base}"


def _transfer_rows(size: int) -> list[Row]:
    rows = []
    for way in ("upload", "download"):
        raw = f"{way}_{size}"
        rows.append(
            Row(f"{raw}_first", f"{way} {size} MiB, first of a session, MB/s", True, 0.5, RAW, raw)
        )
        rows.append(Row(raw, f"{way} {size} MiB, later, MB/s", True, 0.7, RAW, raw))
    return rows


def _rows(sizes: tuple[int, ...], clients: int) -> list[Row]:
    rows = [
        Row("connect", "connect + first call, ms", False, 1.0, APACHE),
        Row("call", "no-op call rpc.test.addone(1), us/call", False, 0.5, APACHE, "call"),
        Row("chain", "chained call client->A->B, us/call", False, 2.0, "call"),
        Row("clients", f"{clients} concurrent clients, calls/s in all", True),
    ]
    for size in sizes:
        rows += _transfer_rows(size)
    return rows


def _pairing_rows(sizes: tuple[int, ...]) -> list[Row]:
    rows = [
        Row("connect", "connect + first call, ms", False),
        Row("call", "no-op call, us/call", False),
    ]
    for size in sizes:
        rows += _transfer_rows(size)
    return rows


# ---- rounds ---------------------------------------------------------------------------------


def _worker_args(
    kind: str, args: argparse.Namespace, sizes: tuple[int, ...], port: int = 0, chain_port: int = 0
) -> list[str]:
    out = [kind, "--port", str(port), "--chain-port", str(chain_port)]
    out += ["--sizes", ",".join(map(str, sizes)), "--calls", str(args.calls)]
    return [*out, "--loops", str(args.loops), "--connects", str(args.connects)]


def _progress(args: argparse.Namespace, started: float, text: str) -> None:
    if args.verbose:
        print(f"({time.monotonic() - started:.0f} s) {text}", file=sys.stderr)


def _fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def _done(result: dict[str, Any]) -> str:
    done = ", ".join(f"{k} {_fmt(v)}" for k, v in result.get("results", {}).items())
    problems = [result["fatal"]] if "fatal" in result else []
    problems += [f"{step}: {why}" for step, why in result.get("errors", {}).items()]
    return "; ".join(filter(None, [done, *problems]))


def run_rounds(
    args: argparse.Namespace,
    impls: dict[str, str],
    servers: dict[str, tuple[procs.Server, procs.Server]],
    errors: list[str],
    started: float,
) -> dict[str, list[dict[str, Any]]]:
    per: dict[str, list[dict[str, Any]]] = {c: [] for c in (*COLUMNS, *PAIRINGS)}
    client_calls = args.calls * CLIENT_CALLS_FACTOR
    for round_index in range(args.rounds):
        sizes = tuple(s for s in args.sizes if s <= LARGE_MIB or round_index < args.large_rounds)
        tag = f"round {round_index + 1}/{args.rounds}"
        for impl, python in impls.items():
            if impl not in servers:
                continue
            a, b = servers[impl]
            result = procs.run_worker(
                python,
                _worker_args("rpc", args, sizes, a.port, b.port),
                WORKER_TIMEOUT_S,
                impl == APACHE,
            )
            clients = procs.run_clients(python, a.port, args.clients, client_calls, impl == APACHE)
            if "fatal" in clients:
                result.setdefault("errors", {})["clients"] = clients["fatal"]
            else:
                result.setdefault("results", {})["clients"] = clients["calls_per_s"]
                result["clients"] = clients
            for problem in [result.get("fatal"), *result.get("errors", {}).values()]:
                if problem:
                    errors.append(f"{impl}, round {round_index + 1}: {problem}")
            per[impl].append(result)
            _progress(args, started, f"{tag} {impl}: {_done(result)}")

        raw_args = _worker_args(RAW, args, sizes)
        result = procs.run_worker(sys.executable, raw_args, WORKER_TIMEOUT_S, False)
        if "fatal" in result:
            errors.append(f"raw, round {round_index + 1}: {result['fatal']}")
        per[RAW].append(result)
        _progress(args, started, f"{tag} raw: {_done(result)}")

        for column, client, server in (
            (OURS_ON_APACHE, OURS, APACHE),
            (APACHE_ON_OURS, APACHE, OURS),
        ):
            if client not in impls or server not in servers:
                continue
            pairing_sizes = args.pairing_sizes if round_index < args.large_rounds else ()
            worker_args = _worker_args("rpc", args, pairing_sizes, servers[server][0].port)
            result = procs.run_worker(
                impls[client], worker_args, PAIRING_TIMEOUT_S, client == APACHE
            )
            per[column].append(result)
            _progress(args, started, f"{tag} {column}: {_done(result)}")
    return per


# ---- summary --------------------------------------------------------------------------------


def _values(per: dict[str, list[dict[str, Any]]], column: str, key: str | None) -> list[float]:
    if key is None:
        return []
    return [r["results"][key] for r in per.get(column, []) if key in r.get("results", {})]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _summarize(rows: list[Row], per: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    summary: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry: dict[str, Any] = {}
        for column in COLUMNS:
            values = _values(per, column, row.raw if column == RAW else row.id)
            entry[f"{column}_rounds"] = values
            entry[column] = _median(values)
        summary[row.id] = entry
    for row in rows:
        entry = summary[row.id]
        ours, apache = entry[OURS], entry[APACHE]
        base = summary["call"][OURS] if row.base == "call" else entry.get(row.base)
        ratio = ours / base if ours is not None and base and row.target is not None else None
        if ratio is None or row.target is None:
            mark = "n/a" if row.target is not None else "-"
        elif row.higher_better:
            mark = "pass" if ratio >= row.target else "MISS"
        else:
            mark = "pass" if ratio <= row.target else "MISS"
        entry.update(ratio=ratio, target=row.target, mark=mark)
        # How many times better ours is than Apache TVM's (above 1: ours is better).
        better = None
        if ours is not None and apache:
            better = ours / apache if row.higher_better else apache / ours
        entry["vs_apache"] = better
    return summary


def _pairing_summary(
    rows: list[Row], per: dict[str, list[dict[str, Any]]], impls: dict[str, str]
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The pairings' medians, and why a cell is n/a (one line per pairing and reason)."""
    summary = {
        row.id: {column: _median(_values(per, column, row.id)) for column in PAIRINGS}
        for row in rows
    }
    reasons: list[str] = []
    for column, (client, server) in PAIRINGS.items():
        if not per.get(column):
            why = "no --apache interpreter" if APACHE not in impls else "no round ran"
            reasons.append(f"{client} -> {server}: {why}")
            continue
        seen: set[str] = set()
        for result in per[column]:
            for step, why in result.get("errors", {}).items():
                first_line = why.splitlines()[0] if why else "?"
                if (step, first_line) not in seen:
                    seen.add((step, first_line))
                    reasons.append(f"{client} -> {server}, {step}: {first_line}")
            if "fatal" in result and result["fatal"] not in seen:
                seen.add(result["fatal"])
                reasons.append(f"{client} -> {server}: {result['fatal'].splitlines()[0]}")
    return summary, reasons


# ---- report ---------------------------------------------------------------------------------


def _table(header: tuple[str, ...], lines: list[tuple[str, ...]], right: tuple[bool, ...]) -> str:
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]

    def fmt(cells: tuple[str, ...]) -> str:
        padded = [
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=True)
        ]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(
        ("-" * (w + 1) + ":") if r else ("-" * (w + 2)) for w, r in zip(widths, right, strict=True)
    )
    return "\n".join([fmt(header), rule + "|", *(fmt(line) for line in lines)])


def _better_text(vs_apache: float | None) -> str:
    if vs_apache is None:
        return "n/a"
    if vs_apache >= 1:
        return f"{vs_apache:.1f}x better"
    return f"{1 / vs_apache:.1f}x worse"


def _main_table(rows: list[Row], summary: dict[str, dict[str, Any]]) -> str:
    header = (
        "row",
        "ours",
        "Apache TVM",
        "raw socket",
        "ratio",
        "target",
        "",
        "ours vs Apache TVM",
    )
    lines = []
    for row in rows:
        s = summary[row.id]
        lines.append(
            (
                row.label,
                _fmt(s[OURS]),
                _fmt(s[APACHE]),
                _fmt(s[RAW]) if row.raw else "-",
                "n/a" if s["ratio"] is None else f"{s['ratio']:.2f}",
                row.target_text,
                s["mark"],
                _better_text(s["vs_apache"]),
            )
        )
    return _table(header, lines, (False, True, True, True, True, False, False, True))


def _pairing_table(rows: list[Row], summary: dict[str, dict[str, Any]]) -> str:
    header = ("pairing, client -> server", *(f"{c} -> {s}" for c, s in PAIRINGS.values()))
    lines = [(row.label, *(_fmt(summary[row.id][column]) for column in PAIRINGS)) for row in rows]
    return _table(header, lines, (False, *(True for _ in PAIRINGS)))


def _clients_note(per: dict[str, list[dict[str, Any]]], count: int) -> str:
    parts = []
    for column in (OURS, APACHE):
        details = [r["clients"] for r in per[column] if "clients" in r]
        if not details:
            continue
        overlap = ",".join(str(d["overlap"]) for d in details)
        connected = ",".join(str(d["connected_at_go"]) for d in details)
        per_call = _median([d["per_call_us"] for d in details])
        parts.append(
            f"{NAMES[column]}: connected when released {connected} of {count}, most loops "
            f"at once {overlap} (per round), {_fmt(per_call)} us/call per client"
        )
    return "; ".join(parts)


def _raw_fresh(per: dict[str, list[dict[str, Any]]], sizes: tuple[int, ...]) -> dict[str, Any]:
    return {
        f"{way}_{size}{when}": _median(_values(per, RAW, f"{way}_{size}{when}_fresh"))
        for size in sizes
        for when in ("_first", "")
        for way in ("upload", "download")
    }


def _raw_fresh_line(fresh: dict[str, Any], sizes: tuple[int, ...]) -> str:
    parts = []
    for when, name in (("_first", "first of the pair"), ("", "later")):
        for size in sizes:
            up, down = fresh[f"upload_{size}{when}"], fresh[f"download_{size}{when}"]
            if up is not None and down is not None:
                parts.append(f"{size} MiB {name} up {_fmt(up)}, down {_fmt(down)}")
    if not parts:
        return ""
    return "raw socket into a buffer allocated per transfer (as a tensor is), MB/s: " + "; ".join(
        parts
    )


def report(
    args: argparse.Namespace,
    impls: dict[str, str],
    per: dict[str, list[dict[str, Any]]],
    meta: dict[str, Any],
    notes: list[str],
    errors: list[str],
) -> None:
    rows = _rows(args.sizes, args.clients)
    summary = _summarize(rows, per)
    pairing_rows = _pairing_rows(args.pairing_sizes)
    pairings, reasons = _pairing_summary(pairing_rows, per, impls)
    print(
        f"ours: {meta['ours']}   Apache TVM: {meta['apache']}   CPython {meta['python']} "
        f"({meta['machine']}, {meta['cpus']} CPUs)   numpy {meta['numpy']}   {meta['date']}"
    )
    print(
        f"{args.rounds} round(s) ({args.large_rounds} for sizes above {LARGE_MIB} MiB and the "
        "pairings' transfers), each a fresh client process per column; a row is the median over "
        f"rounds. Calls: per round the best of {args.loops} loop(s) of {args.calls:,} calls. "
        f"Connect: the median of {args.connects} per round. MB/s = 10^6 bytes/s."
    )
    if meta["spinners"]:
        print(
            f"{meta['spinners']} nice-19 spinning process(es) kept the CPUs from idling "
            "(--idle-cpus: without; on a VM the call rows then time vCPU wakeups)."
        )
    for note in notes:
        print(f"note: {note}")
    print()
    print(_main_table(rows, summary))
    print()
    fresh = _raw_fresh_line(_raw_fresh(per, args.sizes), args.sizes)
    if fresh:
        print(fresh)
    clients = _clients_note(per, args.clients)
    if clients:
        print(f"concurrent clients: {clients}")
    marked = [row for row in rows if summary[row.id]["mark"] in ("pass", "MISS")]
    missed = [row for row in marked if summary[row.id]["mark"] == "MISS"]
    print(f"{len(marked) - len(missed)} of {len(marked)} rows meet their target.")
    for row in missed:
        s = summary[row.id]
        print(f"  MISS {row.id}: ratio {s['ratio']:.2f}, target {row.target_text}")
    print()
    print(_pairing_table(pairing_rows, pairings))
    print()
    for reason in reasons:
        print(f"n/a: {reason}")
    print(f"{meta['seconds']:.0f} s in all.")

    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "meta": meta,
            "notes": notes,
            "errors": errors,
            "rows": [
                {"id": row.id, "label": row.label, "target_text": row.target_text} | summary[row.id]
                for row in rows
            ],
            "pairings": {
                "columns": {column: list(pair) for column, pair in PAIRINGS.items()},
                "rows": [
                    {"id": row.id, "label": row.label}
                    | pairings[row.id]
                    | {f"{c}_rounds": _values(per, c, row.id) for c in PAIRINGS}
                    for row in pairing_rows
                ],
                "na": reasons,
            },
            "clients": {c: [r.get("clients") for r in per[c]] for c in (OURS, APACHE)},
            "connect_samples_ms": {
                c: [r.get("connect_samples_ms") for r in per[c]] for c in PAIRINGS
            },
            "raw_fresh_buffer_mb_s": _raw_fresh(per, args.sizes),
            "worker_stderr": [
                f"{column}: {r['stderr']}"
                for column, rs in per.items()
                for r in rs
                if "stderr" in r
            ],
        }
        path.write_text(json.dumps(document, indent=2) + "\n")
        print(f"JSON: {path}")


def _start_pair(impl: str, python: str, tmp: Path) -> tuple[procs.Server, procs.Server]:
    """Servers A and B of one implementation."""
    if impl == OURS:
        a = procs.start_ours(python, "ours-A", tmp)
    else:
        ports = procs.free_ports(2)
        a = procs.start_apache(python, "apache-A", ports[0], tmp)
    try:
        if impl == OURS:
            return a, procs.start_ours(python, "ours-B", tmp)
        return a, procs.start_apache(python, "apache-B", ports[1], tmp)
    except (procs.ServerError, OSError):
        a.stop()
        raise


def driver(args: argparse.Namespace) -> int:
    errors: list[str] = []
    notes: list[str] = []
    impls = {OURS: args.ours}
    if args.apache:
        impls[APACHE] = args.apache
    else:
        notes.append("no --apache interpreter: the Apache TVM columns show n/a")

    servers: dict[str, tuple[procs.Server, procs.Server]] = {}
    started = time.monotonic()
    with (
        procs.busy_cpus(not args.idle_cpus) as spinners,
        tempfile.TemporaryDirectory(prefix="bench_rpc.servers.") as tmp_name,
    ):
        tmp = Path(tmp_name)
        try:
            for impl, python in impls.items():
                try:
                    servers[impl] = _start_pair(impl, python, tmp)
                    ports = ", ".join(str(server.port) for server in servers[impl])
                    _progress(args, started, f"{impl} servers on ports {ports}")
                except (procs.ServerError, OSError) as exc:
                    errors.append(f"{impl}: server did not start: {exc}")
            per = run_rounds(args, impls, servers, errors, started)
        finally:
            for pair in servers.values():
                for server in pair:
                    server.stop()

    def version(column: str) -> str:
        found = [r.get("version") for r in per[column] if r.get("version")]
        return found[0] if found else "n/a"

    meta = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": platform.machine(),
        "cpus": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "ours": f"tvm {version(OURS)} ({args.ours})",
        "apache": f"apache-tvm {version(APACHE)} ({args.apache})" if args.apache else "n/a",
        "numpy": next((r["numpy"] for rs in per.values() for r in rs if "numpy" in r), "n/a"),
        "rounds": args.rounds,
        "large_rounds": args.large_rounds,
        "calls": args.calls,
        "connects": args.connects,
        "clients": args.clients,
        "sizes_mib": list(args.sizes),
        "pairing_sizes_mib": list(args.pairing_sizes),
        "quick": args.quick,
        "spinners": spinners,
        "seconds": round(time.monotonic() - started, 1),
    }
    report(args, impls, per, meta, notes, errors)
    if errors:
        print("\nerrors:", file=sys.stderr)
        for error in errors:
            print(f"  {error}", file=sys.stderr)
        return 1
    return 0


# ---- command line ---------------------------------------------------------------------------


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of MiB counts: {text!r}") from None
    if sizes and min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"sizes must be positive MiB counts: {text!r}")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--ours",
        default=sys.executable,
        metavar="PYTHON",
        help="interpreter with this repository's tvm installed (default: this one)",
    )
    parser.add_argument(
        "--apache",
        metavar="PYTHON",
        help="interpreter with apache-tvm 0.27 (and cloudpickle, tornado, psutil) installed",
    )
    parser.add_argument("--rounds", type=_positive, help=f"rounds (default {DEFAULTS['rounds']})")
    parser.add_argument(
        "--large-rounds",
        type=_positive,
        help=f"rounds with sizes above {LARGE_MIB} MiB (default {DEFAULTS['large_rounds']})",
    )
    parser.add_argument(
        "--calls", type=_positive, help=f"calls timed per round (default {DEFAULTS['calls']:,})"
    )
    parser.add_argument(
        "--loops",
        type=_positive,
        help="timed loops of --calls calls per round, the best counts "
        f"(default {DEFAULTS['loops']})",
    )
    parser.add_argument(
        "--connects",
        type=_positive,
        help=f"timed connects per round (default {DEFAULTS['connects']})",
    )
    parser.add_argument(
        "--clients",
        type=_positive,
        help=f"concurrent clients (default {DEFAULTS['clients']})",
    )
    parser.add_argument(
        "--sizes", type=_sizes, help="transfer sizes in MiB, comma-separated (default 64,256)"
    )
    parser.add_argument(
        "--pairing-sizes",
        type=_sizes,
        help="transfer sizes of the mixed pairings ('' for none; default: the smallest of "
        "--sizes, none with --quick)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="2 rounds, one loop of 2,000 calls, 3 connects, 64 MiB only, no pairing transfers",
    )
    parser.add_argument(
        "--idle-cpus",
        action="store_true",
        help="no nice-19 spinners keeping the CPUs busy (see rpc_bench_procs.busy_cpus)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    args = parser.parse_args(argv)

    for key, default in DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, QUICK[key] if args.quick else default)
    if not args.sizes:
        parser.error("--sizes needs at least one size")
    if args.pairing_sizes is None:
        args.pairing_sizes = () if args.quick else (min(args.sizes),)
    args.large_rounds = min(args.large_rounds, args.rounds)
    return driver(args)


if __name__ == "__main__":
    sys.exit(main())
