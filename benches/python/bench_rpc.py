#!/usr/bin/env python3
"""RPC on loopback: ``tvm`` (this repository) side by side with Apache TVM 0.27 (PyPI
``apache-tvm==0.27.0.post1``) and a raw loopback TCP socket, measured in the same run.

Both packages are named ``tvm``, so each is only ever imported by its own interpreter: the
driver (this script without ``--worker``) imports neither. It starts two servers per
implementation (A and B, each ``python -m tvm.exec.rpc_server`` of that implementation, in a
process group of its own), then runs the rounds interleaved: in each round a fresh client
process of ours, one of apache-tvm and one raw-socket pair, one after the other.

Rows (the table shows the median over rounds):

- ``call``: a remote no-op, ``rpc.test.addone(1)`` (the cheapest function both servers
  register; on both it is a Python function in the serving process), µs per call over a loop of
  ``--calls`` calls (the best of ``--loops`` loops per round). Raw socket: a 64-byte request
  and 64-byte reply round trip. Target: ours at most 0.5x apache-tvm's time.
- ``chain``: the same call through a chain, client -> A -> B (``session_constructor_args=
  ["rpc.Connect", host, port_B, "", False]``). Target: ours chained at most 2x ours direct.
- ``upload_<N>``: ``tvm.runtime.tensor(x, sess.cpu())`` of an N MiB uint8 array, and
  ``download_<N>``: ``t.numpy()`` of that remote tensor, in MB/s (10^6 bytes per second).
  Raw socket: ``sendall`` of N bytes, received with ``recv_into`` into a preallocated buffer
  (the upload waits for a 1-byte acknowledgement). Every column first moves one untimed
  transfer of each size both ways. Target: ours at least 0.7x the raw socket.
  Also shown under the table: the raw socket into a buffer allocated for each transfer, whose
  pages are faulted in as the bytes arrive (an RPC allocates its tensor, or the numpy array of
  a download, for each transfer too).

Rows that miss a target are marked MISS, not failures. Exit status: 0 when every row was
measured, 1 on errors (a server that did not start, a worker that failed), 2 on usage.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import os
import platform
import queue
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
MIB = 1 << 20

OURS = "ours"
APACHE = "apache"
RAW = "raw"
COLUMNS = (OURS, APACHE, RAW)

DEFAULTS = {"rounds": 5, "large_rounds": 3, "calls": 2000, "loops": 3, "sizes": (64, 256)}
QUICK = {"rounds": 2, "large_rounds": 1, "calls": 2000, "loops": 1, "sizes": (64,)}
#: Sizes above this many MiB run in the first ``--large-rounds`` rounds only.
LARGE_MIB = 64

#: Seconds a server may take to start listening, and a client worker to finish.
SERVER_DEADLINE_S = 180.0
WORKER_TIMEOUT_S = 1800.0

#: Targets: the ratio and what it is taken against.
CALL_TARGET = 0.5  # ours / apache, at most
CHAIN_TARGET = 2.0  # ours chained / ours direct, at most
TRANSFER_TARGET = 0.7  # ours / raw socket, at least

#: Raw socket: bytes of a ping-pong message each way.
PING_BYTES = 64


@dataclass(frozen=True)
class Row:
    id: str
    label: str
    unit: str  # "us" (lower is better) or "MB/s" (higher is better)
    size_mib: int = 0

    @property
    def target_text(self) -> str:
        if self.id == "call":
            return f"<= {CALL_TARGET:.2f}x apache"
        if self.id == "chain":
            return f"<= {CHAIN_TARGET:.2f}x direct"
        return f">= {TRANSFER_TARGET:.2f}x raw"


def _rows(sizes: tuple[int, ...]) -> list[Row]:
    rows = [
        Row("call", "no-op call rpc.test.addone(1), us/call", "us"),
        Row("chain", "chained call client->A->B, us/call", "us"),
    ]
    for size in sizes:
        rows.append(Row(f"upload_{size}", f"upload {size} MiB tensor, MB/s", "MB/s", size))
        rows.append(Row(f"download_{size}", f"download {size} MiB tensor, MB/s", "MB/s", size))
    return rows


# ---- RPC client worker (runs in the interpreter of one implementation) ----------------------


def _close_session(sess: Any) -> None:
    close = getattr(sess, "close", None)
    if close is not None:
        close()
    else:  # apache-tvm's RPCSession has no close(): the session module's own function
        sess._sess.get_function("CloseRPCConnection")()


def _time_calls(func: Any, calls: int, loops: int) -> float:
    """µs per call of ``func(1)``: the best of ``loops`` loops of ``calls`` calls each, after a
    warm-up."""
    if func(1) != 2:
        raise AssertionError("rpc.test.addone(1) did not return 2")
    for _ in range(max(1, calls // 10)):
        func(1)
    best = float("inf")
    for _ in range(loops):
        start = time.perf_counter()
        for _ in range(calls):
            func(1)
        best = min(best, time.perf_counter() - start)
    return best / calls * 1e6


def rpc_worker(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    import tvm
    from tvm import rpc

    out: dict[str, Any] = {
        "version": getattr(tvm, "__version__", "?"),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "results": {},
    }
    tensor = tvm.runtime.tensor

    sess = rpc.connect(HOST, args.port)
    try:
        dev = sess.cpu()
        addone = sess.get_function("rpc.test.addone")
        out["results"]["call"] = _time_calls(addone, args.calls, args.loops)
        del addone
        # Warm-up of the tensor path: a small tensor both ways.
        small = np.arange(MIB, dtype="uint8")
        if not np.array_equal(tensor(small, dev).numpy(), small):
            raise AssertionError("a 1 MiB tensor came back different")
        for size in args.sizes:
            data = np.arange(size * MIB, dtype="uint8")  # written: every page is touched
            # One untimed transfer of this size each way first, as the raw socket has.
            tensor(data, dev).numpy()
            gc.collect()
            start = time.perf_counter()
            remote = tensor(data, dev)
            up = time.perf_counter() - start
            start = time.perf_counter()
            back = remote.numpy()
            down = time.perf_counter() - start
            if back.shape != data.shape or not np.array_equal(back, data):
                raise AssertionError(f"the {size} MiB tensor came back different")
            out["results"][f"upload_{size}"] = size * MIB / up / 1e6
            out["results"][f"download_{size}"] = size * MIB / down / 1e6
            del remote, back, data
            gc.collect()
    finally:
        gc.collect()
        _close_session(sess)
        del sess
        gc.collect()

    # apache-tvm's server serves one client at a time: the direct session is closed first.
    chained = rpc.connect(
        HOST, args.port, session_constructor_args=["rpc.Connect", HOST, args.chain_port, "", False]
    )
    try:
        addone = chained.get_function("rpc.test.addone")
        out["results"]["chain"] = _time_calls(addone, args.calls, args.loops)
        del addone
    finally:
        gc.collect()
        _close_session(chained)
    return out


# ---- raw socket worker (any interpreter) ---------------------------------------------------


def _recv_exactly(sock: socket.socket, view: memoryview) -> None:
    while view:
        got = sock.recv_into(view)
        if got == 0:
            raise ConnectionError("the peer closed the connection")
        view = view[got:]


def _touched(size: int) -> bytearray:
    buf = bytearray(size)
    buf[::4096] = b"\x01" * len(range(0, size, 4096))  # fault every page in now
    return buf


def raw_peer(port: int, max_bytes: int) -> int:
    """The serving end of the raw socket pair: answers commands until told to quit."""
    sock = socket.create_connection((HOST, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = _touched(max_bytes)
    view = memoryview(buf)
    header = bytearray(9)
    ping = bytearray(PING_BYTES)
    while True:
        _recv_exactly(sock, memoryview(header))
        op, n = header[:1], struct.unpack("<Q", header[1:])[0]
        if op == b"U":
            _recv_exactly(sock, view[:n])
            sock.sendall(b"k")
        elif op == b"u":  # into a fresh buffer: its pages are faulted in as the bytes arrive
            _recv_exactly(sock, memoryview(bytearray(n)))
            sock.sendall(b"k")
        elif op == b"D":
            sock.sendall(view[:n])
        elif op == b"P":
            pv = memoryview(ping)
            for _ in range(n):
                _recv_exactly(sock, pv)
                sock.sendall(pv)
        else:
            sock.close()
            return 0


def raw_worker(args: argparse.Namespace) -> dict[str, Any]:
    max_bytes = max(args.sizes, default=1) * MIB
    listener = socket.create_server((HOST, 0))
    peer = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--raw-peer",
            str(listener.getsockname()[1]),
            "--raw-bytes",
            str(max_bytes),
        ]
    )
    try:
        listener.settimeout(60)
        sock, _ = listener.accept()
        listener.close()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = _touched(max_bytes)
        view = memoryview(buf)
        ack = bytearray(1)
        ping = memoryview(bytearray(PING_BYTES))

        def upload(n: int) -> float:
            start = time.perf_counter()
            sock.sendall(b"U" + struct.pack("<Q", n))
            sock.sendall(view[:n])
            _recv_exactly(sock, memoryview(ack))
            return time.perf_counter() - start

        def download(n: int) -> float:
            start = time.perf_counter()
            sock.sendall(b"D" + struct.pack("<Q", n))
            _recv_exactly(sock, view[:n])
            return time.perf_counter() - start

        def fresh_upload(n: int) -> float:
            start = time.perf_counter()
            sock.sendall(b"u" + struct.pack("<Q", n))
            sock.sendall(view[:n])
            _recv_exactly(sock, memoryview(ack))
            return time.perf_counter() - start

        def fresh_download(n: int) -> float:
            start = time.perf_counter()
            sock.sendall(b"D" + struct.pack("<Q", n))
            _recv_exactly(sock, memoryview(bytearray(n)))
            return time.perf_counter() - start

        def ping_pong(count: int) -> float:
            sock.sendall(b"P" + struct.pack("<Q", count))
            start = time.perf_counter()
            for _ in range(count):
                sock.sendall(ping)
                _recv_exactly(sock, ping)
            return (time.perf_counter() - start) / count * 1e6

        results: dict[str, float] = {}
        ping_pong(max(1, args.calls // 10))  # warm-up
        results["call"] = min(ping_pong(args.calls) for _ in range(args.loops))
        for size in args.sizes:
            n = size * MIB
            upload(n), download(n)  # warm-up: socket buffers, the peer's pages
            results[f"upload_{size}"] = n / upload(n) / 1e6
            results[f"download_{size}"] = n / download(n) / 1e6
            # Into a buffer allocated for the transfer, as an RPC's tensor is: informative.
            results[f"upload_{size}_fresh"] = n / fresh_upload(n) / 1e6
            results[f"download_{size}_fresh"] = n / fresh_download(n) / 1e6
        sock.sendall(b"Q" + struct.pack("<Q", 0))
        sock.close()
        if peer.wait(timeout=60) != 0:
            raise RuntimeError(f"the raw socket peer exited with {peer.returncode}")
    finally:
        if peer.poll() is None:
            peer.kill()
            peer.wait()
    return {"version": "socket", "python": platform.python_version(), "results": results}


def worker(args: argparse.Namespace) -> int:
    try:
        out = raw_worker(args) if args.worker == RAW else rpc_worker(args)
    except Exception as exc:
        out = {"fatal": f"{type(exc).__name__}: {exc}"}
    Path(args.result_file).write_text(json.dumps(out))
    return 0


# ---- servers --------------------------------------------------------------------------------


class ServerError(RuntimeError):
    pass


@dataclass
class Server:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    def log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Ends the server's whole process group (the server, its session processes)."""
        for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        # Children of the group may outlive the leader for a moment; SIGKILL them too.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)


def _spawn(command: list[str], log: Path, stdout: int | None) -> subprocess.Popen[bytes]:
    with open(log, "wb") as log_file:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=stdout if stdout is not None else log_file,
            stderr=log_file,
            start_new_session=True,  # a process group of its own: stopped as a whole
        )


def start_ours(python: str, name: str, tmp: Path) -> Server:
    """``python -m tvm.exec.rpc_server --port 0``; the port comes from the line it prints."""
    log = tmp / f"{name}.log"
    proc = _spawn(
        [python, "-m", "tvm.exec.rpc_server", "--host", HOST, "--port", "0"],
        log,
        subprocess.PIPE,
    )
    lines: queue.Queue[bytes] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    server = Server(name, proc, 0, log)
    try:
        line = lines.get(timeout=SERVER_DEADLINE_S).decode(errors="replace").strip()
    except queue.Empty:
        server.stop()
        raise ServerError(f"{name}: no address printed in {SERVER_DEADLINE_S:.0f} s") from None
    prefix = "RPC server listening on "
    if not line.startswith(prefix):
        server.stop()
        raise ServerError(f"{name}: unexpected first line {line!r}\n{server.log_tail()}")
    server.port = int(line.rsplit(":", 1)[1])
    return server


def _free_ports(count: int) -> list[int]:
    """Ports that were free a moment ago, each followed by 50 more (apache's search range)."""
    socks, ports = [], []
    try:
        while len(ports) < count:
            sock = socket.socket()
            sock.bind((HOST, 0))
            socks.append(sock)
            port = sock.getsockname()[1]
            if port + 50 < 65536 and all(abs(port - p) > 50 for p in ports):
                ports.append(port)
    finally:
        for sock in socks:
            sock.close()
    return ports


def start_apache(python: str, name: str, port: int, tmp: Path) -> Server:
    """``python -m tvm.exec.rpc_server --host H --port P --port-end P+50``; it prints nothing
    useful, so its port is polled until it accepts connections (a connection closed before the
    handshake is dropped by the server), against a deadline."""
    log = tmp / f"{name}.log"
    command = [python, "-m", "tvm.exec.rpc_server", "--host", HOST]
    command += ["--port", str(port), "--port-end", str(port + 50), "--silent"]
    server = Server(name, _spawn(command, log, None), port, log)
    deadline = time.monotonic() + SERVER_DEADLINE_S
    while True:
        if server.proc.poll() is not None:
            raise ServerError(
                f"{name} exited with {server.proc.returncode} before listening:\n"
                + server.log_tail()
            )
        try:
            with socket.create_connection((HOST, port), timeout=1):
                return server
        except OSError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise ServerError(f"{name}: port {port} not accepting after {SERVER_DEADLINE_S:.0f} s")
        time.sleep(0.05)  # poll interval; the deadline bounds the wait


# ---- driver ---------------------------------------------------------------------------------


@contextlib.contextmanager
def busy_cpus(enabled: bool) -> Iterator[int]:
    """One lowest-priority (nice 19) spinning process per CPU while the rounds run, so no CPU
    goes idle. On a virtual machine, waking an idle vCPU costs tens of µs (a loopback ping-pong
    measured 72-82 µs here with idle vCPUs, 16 µs with spinners): without them the call rows
    measure the hypervisor. The spinners take about 1.5% of a CPU that has other work."""
    spinners: list[subprocess.Popen[bytes]] = []
    if enabled:
        for _ in range(len(os.sched_getaffinity(0))):
            spinners.append(
                subprocess.Popen(
                    [sys.executable, "-c", "import os\nos.nice(19)\nwhile True: pass"],
                    stdin=subprocess.DEVNULL,
                )
            )
    try:
        yield len(spinners)
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()


def _run_worker(
    kind: str, python: str, sizes: tuple[int, ...], args: argparse.Namespace, ports: tuple[int, int]
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench_rpc.") as tmp:
        result_file = Path(tmp) / "result.json"
        command = [python, str(Path(__file__).resolve()), "--worker", kind]
        command += ["--sizes", ",".join(map(str, sizes)), "--calls", str(args.calls)]
        command += ["--loops", str(args.loops)]
        command += ["--port", str(ports[0]), "--chain-port", str(ports[1])]
        command += ["--result-file", str(result_file)]
        try:
            proc = subprocess.run(
                command, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            return {"fatal": f"worker timed out after {WORKER_TIMEOUT_S:.0f} s"}
        if proc.returncode != 0 or not result_file.exists():
            tail = (proc.stdout + proc.stderr).strip()[-2000:]
            return {"fatal": f"worker exited with {proc.returncode}:\n{tail}"}
        result = json.loads(result_file.read_text())
        if proc.stderr.strip():
            result["stderr"] = proc.stderr.strip()[-2000:]
        return result


def _fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


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


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _summarize(rows: list[Row], per: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    summary: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry: dict[str, Any] = {}
        for column in COLUMNS:
            values = [
                r["results"][row.id] for r in per.get(column, []) if row.id in r.get("results", {})
            ]
            entry[f"{column}_rounds"] = values
            entry[column] = statistics.median(values) if values else None
        summary[row.id] = entry

    for row in rows:
        entry = summary[row.id]
        ours = entry[OURS]
        if row.id == "call":
            base, target, higher_better = entry[APACHE], CALL_TARGET, False
        elif row.id == "chain":
            base, target, higher_better = summary["call"][OURS], CHAIN_TARGET, False
        else:
            base, target, higher_better = entry[RAW], TRANSFER_TARGET, True
        ratio = ours / base if ours is not None and base else None
        if ratio is None:
            mark = "n/a"
        elif higher_better:
            mark = "pass" if ratio >= target else "MISS"
        else:
            mark = "pass" if ratio <= target else "MISS"
        entry.update(ratio=ratio, target=target, mark=mark)
        apache = entry[APACHE]
        if ours is not None and apache:
            # How many times better ours is than apache-tvm's (above 1: ours is better).
            entry["vs_apache"] = ours / apache if higher_better else apache / ours
        else:
            entry["vs_apache"] = None
    return summary


def driver(args: argparse.Namespace) -> int:
    rows = _rows(args.sizes)
    errors: list[str] = []
    notes: list[str] = []
    impls = {OURS: args.ours}
    if args.apache:
        impls[APACHE] = args.apache
    else:
        notes.append("no --apache interpreter: the apache-tvm column shows n/a")

    servers: dict[str, tuple[Server, Server]] = {}
    per: dict[str, list[dict[str, Any]]] = {c: [] for c in COLUMNS}
    started = time.monotonic()
    with (
        busy_cpus(not args.idle_cpus) as spinners,
        tempfile.TemporaryDirectory(prefix="bench_rpc.servers.") as tmp_name,
    ):
        tmp = Path(tmp_name)
        try:
            for impl, python in impls.items():
                try:
                    if impl == OURS:
                        pair = (
                            start_ours(python, "ours-A", tmp),
                            start_ours(python, "ours-B", tmp),
                        )
                    else:
                        port_a, port_b = _free_ports(2)
                        a = start_apache(python, "apache-A", port_a, tmp)
                        try:
                            b = start_apache(python, "apache-B", port_b, tmp)
                        except ServerError:
                            a.stop()
                            raise
                        pair = (a, b)
                    servers[impl] = pair
                    if args.verbose:
                        print(
                            f"{impl} servers on ports {pair[0].port}, {pair[1].port}",
                            file=sys.stderr,
                        )
                except (ServerError, OSError) as exc:
                    errors.append(f"{impl}: server did not start: {exc}")

            for round_index in range(args.rounds):
                sizes = tuple(
                    s for s in args.sizes if s <= LARGE_MIB or round_index < args.large_rounds
                )
                order = [(impl, impls[impl]) for impl in impls if impl in servers]
                order.append((RAW, sys.executable))
                for column, python in order:
                    ports = (
                        (servers[column][0].port, servers[column][1].port)
                        if column != RAW
                        else (0, 0)
                    )
                    kind = RAW if column == RAW else "rpc"
                    result = _run_worker(kind, python, sizes, args, ports)
                    if "fatal" in result:
                        errors.append(f"{column}, round {round_index + 1}: {result['fatal']}")
                    else:
                        per[column].append(result)
                    if args.verbose:
                        done = ", ".join(
                            f"{k} {_fmt(v)}" for k, v in result.get("results", {}).items()
                        )
                        print(
                            f"round {round_index + 1}/{args.rounds} {column} "
                            f"({time.monotonic() - started:.0f} s): {done or result.get('fatal')}",
                            file=sys.stderr,
                        )
        finally:
            for pair in servers.values():
                for server in pair:
                    server.stop()

    summary = _summarize(rows, per)

    def version(column: str) -> str:
        found = [r.get("version") for r in per[column] if r.get("version")]
        return found[0] if found else "n/a"

    meta = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "ours": f"tvm {version(OURS)} ({args.ours})",
        "apache": f"apache-tvm {version(APACHE)} ({args.apache})" if args.apache else "n/a",
        "numpy": next((r["numpy"] for rs in per.values() for r in rs if "numpy" in r), "n/a"),
        "rounds": args.rounds,
        "large_rounds": args.large_rounds,
        "calls": args.calls,
        "sizes_mib": list(args.sizes),
        "quick": args.quick,
        "spinners": spinners,
        "seconds": round(time.monotonic() - started, 1),
    }
    print(
        f"ours: {meta['ours']}   apache-tvm: {meta['apache']}   CPython {meta['python']} "
        f"({meta['machine']})   numpy {meta['numpy']}   {meta['date']}"
    )
    print(
        f"{args.rounds} round(s) ({args.large_rounds} for sizes above {LARGE_MIB} MiB), each a "
        f"fresh client process per column in the order {' '.join([*impls, RAW])}; a row is the "
        f"median over rounds. Calls: per round the best of {args.loops} loop(s) of "
        f"{args.calls:,} calls. "
        "MB/s = 10^6 bytes/s."
    )
    if spinners:
        print(
            f"{spinners} nice-19 spinning process(es) kept the CPUs from idling "
            "(--idle-cpus: without; on a VM the call rows then time vCPU wakeups)."
        )
    for note in notes:
        print(f"note: {note}")
    print()
    header = ("row", "ours", "apache-tvm", "raw socket", "ratio", "target", "", "ours vs apache")
    lines = []
    for row in rows:
        s = summary[row.id]
        lines.append(
            (
                row.label,
                _fmt(s[OURS]),
                _fmt(s[APACHE]),
                _fmt(s[RAW]) if row.id != "chain" else "-",
                "n/a" if s["ratio"] is None else f"{s['ratio']:.2f}",
                row.target_text,
                s["mark"],
                "n/a"
                if s["vs_apache"] is None
                else f"{s['vs_apache']:.1f}x better"
                if s["vs_apache"] >= 1
                else f"{1 / s['vs_apache']:.1f}x worse",
            )
        )
    print(_table(header, lines, (False, True, True, True, True, False, False, True)))
    print()
    marked = [row for row in rows if summary[row.id]["mark"] in ("pass", "MISS")]
    missed = [row for row in marked if summary[row.id]["mark"] == "MISS"]
    fresh = []
    for size in args.sizes:
        up = _median([r["results"].get(f"upload_{size}_fresh") for r in per[RAW]])
        down = _median([r["results"].get(f"download_{size}_fresh") for r in per[RAW]])
        if up is not None and down is not None:
            fresh.append(f"{size} MiB up {_fmt(up)}, down {_fmt(down)}")
    if fresh:
        print(
            "raw socket into a buffer allocated per transfer (as a tensor is), MB/s: "
            + "; ".join(fresh)
        )
    print(f"{len(marked) - len(missed)} of {len(marked)} rows meet their target.")
    for row in missed:
        s = summary[row.id]
        print(f"  MISS {row.id}: ratio {s['ratio']:.2f}, target {row.target_text}")
    print(f"{meta['seconds']:.0f} s in all.")

    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "meta": meta,
            "notes": notes,
            "errors": errors,
            "rows": [
                {"id": row.id, "label": row.label, "unit": row.unit, "target_text": row.target_text}
                | summary[row.id]
                for row in rows
            ],
            "raw_fresh_buffer_mb_s": {
                f"{d}_{size}": _median([r["results"].get(f"{d}_{size}_fresh") for r in per[RAW]])
                for size in args.sizes
                for d in ("upload", "download")
            },
            "worker_stderr": [
                f"{column}: {r['stderr']}"
                for column, rs in per.items()
                for r in rs
                if "stderr" in r
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
    if not sizes or min(sizes) < 1:
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
        "--sizes", type=_sizes, help="transfer sizes in MiB, comma-separated (default 64,256)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="2 rounds, one loop of 2,000 calls, 64 MiB only"
    )
    parser.add_argument(
        "--idle-cpus",
        action="store_true",
        help="no nice-19 spinners keeping the CPUs busy (see busy_cpus)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    parser.add_argument("--worker", choices=("rpc", RAW), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--chain-port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--result-file", help=argparse.SUPPRESS)
    parser.add_argument("--raw-peer", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--raw-bytes", type=int, default=MIB, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.raw_peer is not None:
        return raw_peer(args.raw_peer, args.raw_bytes)
    for key, default in DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, QUICK[key] if args.quick else default)
    args.large_rounds = min(args.large_rounds, args.rounds)
    if args.worker:
        if not args.result_file:
            parser.error("--worker needs --result-file")
        return worker(args)
    return driver(args)


if __name__ == "__main__":
    sys.exit(main())
