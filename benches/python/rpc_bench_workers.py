#!/usr/bin/env python3
"""The client side of benches/python/bench_rpc.py: each measurement runs in a process of its
own, started by the driver with the interpreter of one implementation (or any, for the raw
socket), and writes its results as JSON to ``--result-file``.

Kinds (the first argument):

- ``rpc``: connect time, the no-op call, first and later transfers (a fresh session per size),
  the chained call. Results are written after every step, so a step that hangs until the
  driver's timeout still leaves the earlier ones; a step that fails is recorded in ``errors``
  and the next steps run.
- ``client``: one of the concurrent clients. It imports ``tvm``, prints ``imported`` and waits
  for ``connect`` on stdin; connects, prints ``ready`` and waits for ``go``; then times
  ``--calls`` calls between two ``time.monotonic()`` readings (one clock for all processes on
  Linux, so the driver can tell whether the loops overlapped).
- ``raw``: the raw socket pair (``raw-peer`` is its serving end).

Only the standard library is imported at module level: the same file runs under both packages'
interpreters, each of which names its package ``tvm``.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import socket
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
MIB = 1 << 20

#: Raw socket: bytes of a ping-pong message each way.
PING_BYTES = 64
#: Seconds between two timed connects, so that each finds the server idle (Apache TVM's serves
#: one session at a time and ends the last one's process first).
CONNECT_PAUSE_S = 0.2


def close_session(sess: Any) -> None:
    close = getattr(sess, "close", None)
    if close is not None:
        close()
    else:  # Apache TVM's RPCSession has no close(): the session module's own function
        sess._sess.get_function("CloseRPCConnection")()


def time_calls(func: Any, calls: int, loops: int) -> float:
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


def _connect_and_call(rpc: Any, port: int) -> tuple[float, Any, Any]:
    """ms from ``rpc.connect`` until ``rpc.test.addone(1)`` returned, the session, the function."""
    start = time.perf_counter()
    sess = rpc.connect(HOST, port)
    addone = sess.get_function("rpc.test.addone")
    if addone(1) != 2:
        raise AssertionError("rpc.test.addone(1) did not return 2")
    return (time.perf_counter() - start) * 1e3, sess, addone


class Steps:
    """Runs the steps of a worker, recording each failure, and writes the results after each."""

    def __init__(self, path: Path, out: dict[str, Any]) -> None:
        self.path, self.out = path, out
        out.setdefault("results", {})
        out.setdefault("errors", {})
        self.write()

    def write(self) -> None:
        self.path.write_text(json.dumps(self.out))

    def run(self, name: str, step: Callable[[], None]) -> None:
        self.out["step"] = name
        self.write()
        try:
            step()
        except Exception as exc:
            self.out["errors"][name] = f"{type(exc).__name__}: {exc}"[:1000]
        finally:
            gc.collect()
        self.out.pop("step")
        self.write()


def rpc_worker(args: argparse.Namespace) -> None:
    import numpy as np

    import tvm
    from tvm import rpc

    out: dict[str, Any] = {
        "version": getattr(tvm, "__version__", "?"),
        "numpy": np.__version__,
        "python": platform.python_version(),
    }
    steps = Steps(Path(args.result_file), out)
    results = out["results"]
    tensor = tvm.runtime.tensor

    def connect() -> None:
        samples = []
        for _ in range(args.connects):
            elapsed, sess, addone = _connect_and_call(rpc, args.port)
            del addone
            close_session(sess)
            del sess
            gc.collect()
            samples.append(elapsed)
            time.sleep(CONNECT_PAUSE_S)
        out["connect_samples_ms"] = samples
        results["connect"] = statistics.median(samples)

    def calls_on(sess: Any) -> float:
        """µs per call in ``sess``, which is then closed."""
        try:
            addone = sess.get_function("rpc.test.addone")
            return time_calls(addone, args.calls, args.loops)
        finally:
            addone = None
            gc.collect()
            close_session(sess)

    def call() -> None:
        results["call"] = calls_on(rpc.connect(HOST, args.port))

    def transfers(size: int) -> None:
        """The first transfer of a fresh session each way, then a later one."""
        data = np.arange(size * MIB, dtype="uint8")  # written: every page is touched
        time.sleep(CONNECT_PAUSE_S)
        sess = rpc.connect(HOST, args.port)
        try:
            dev = sess.cpu()
            for suffix in ("_first", ""):
                start = time.perf_counter()
                remote = tensor(data, dev)
                up = time.perf_counter() - start
                start = time.perf_counter()
                back = remote.numpy()
                down = time.perf_counter() - start
                if back.shape != data.shape or not np.array_equal(back, data):
                    raise AssertionError(f"the {size} MiB tensor came back different")
                results[f"upload_{size}{suffix}"] = size * MIB / up / 1e6
                results[f"download_{size}{suffix}"] = size * MIB / down / 1e6
                del remote, back
                gc.collect()
        finally:
            close_session(sess)

    def chain() -> None:
        # Apache TVM's server serves one client at a time: the other sessions are closed first.
        through = ["rpc.Connect", HOST, args.chain_port, "", False]
        results["chain"] = calls_on(rpc.connect(HOST, args.port, session_constructor_args=through))

    if args.connects:
        steps.run("connect", connect)
    steps.run("call", call)
    for size in args.sizes:
        steps.run(f"transfer_{size}", lambda size=size: transfers(size))
    if args.chain_port:
        time.sleep(CONNECT_PAUSE_S)
        steps.run("chain", chain)


def client_worker(args: argparse.Namespace) -> None:
    """One of the concurrent clients (see the module's docstring)."""
    import tvm
    from tvm import rpc

    out: dict[str, Any] = {"version": getattr(tvm, "__version__", "?")}
    steps = Steps(Path(args.result_file), out)

    def wait_for(word: str) -> None:
        if sys.stdin.readline().strip() != word:
            raise RuntimeError(f"no {word!r} from the driver")

    def serve() -> None:
        print("imported", flush=True)
        wait_for("connect")
        elapsed, sess, addone = _connect_and_call(rpc, args.port)
        out["connect_ms"] = elapsed
        try:
            for _ in range(max(1, args.calls // 10)):
                addone(1)
            print("ready", flush=True)
            wait_for("go")
            start = time.monotonic()
            for _ in range(args.calls):
                addone(1)
            end = time.monotonic()
            out["results"] = {"start": start, "end": end, "calls": args.calls}
            del addone
        finally:
            gc.collect()
            close_session(sess)

    steps.run("client", serve)


# ---- raw socket (any interpreter) ----------------------------------------------------------


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


def raw_peer(port: int, max_bytes: int) -> None:
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
            return


def raw_worker(args: argparse.Namespace) -> None:
    max_bytes = max(args.sizes, default=1) * MIB
    listener = socket.create_server((HOST, 0))
    command = [sys.executable, str(Path(__file__).resolve()), "raw-peer"]
    command += ["--port", str(listener.getsockname()[1]), "--raw-bytes", str(max_bytes)]
    peer = subprocess.Popen(command)
    try:
        listener.settimeout(60)
        sock, _ = listener.accept()
        listener.close()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = _touched(max_bytes)
        view = memoryview(buf)
        ack = memoryview(bytearray(1))
        ping = memoryview(bytearray(PING_BYTES))

        def timed(op: bytes, n: int, receive: Callable[[], None]) -> float:
            start = time.perf_counter()
            sock.sendall(op + struct.pack("<Q", n))
            if op in (b"U", b"u"):
                sock.sendall(view[:n])
            receive()
            return n / (time.perf_counter() - start) / 1e6

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

            def into_buffer(n: int = n) -> None:
                _recv_exactly(sock, view[:n])

            def into_fresh(n: int = n) -> None:
                _recv_exactly(sock, memoryview(bytearray(n)))

            def acked() -> None:
                _recv_exactly(sock, ack)

            # Into a buffer allocated for the transfer, as an RPC's tensor is: informative. First
            # the first transfer of this size on the fresh pair, then (below) a later one.
            results[f"upload_{size}_first_fresh"] = timed(b"u", n, acked)
            results[f"download_{size}_first_fresh"] = timed(b"D", n, into_fresh)
            timed(b"U", n, acked)  # warm-up: socket buffers, the peer's pages
            timed(b"D", n, into_buffer)
            results[f"upload_{size}"] = timed(b"U", n, acked)
            results[f"download_{size}"] = timed(b"D", n, into_buffer)
            results[f"upload_{size}_fresh"] = timed(b"u", n, acked)
            results[f"download_{size}_fresh"] = timed(b"D", n, into_fresh)
        sock.sendall(b"Q" + struct.pack("<Q", 0))
        sock.close()
        if peer.wait(timeout=60) != 0:
            raise RuntimeError(f"the raw socket peer exited with {peer.returncode}")
    finally:
        if peer.poll() is None:
            peer.kill()
            peer.wait()
    out = {"version": "socket", "python": platform.python_version(), "results": results}
    Path(args.result_file).write_text(json.dumps(out))


# ---- command line ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=("rpc", "client", "raw", "raw-peer"))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--chain-port", type=int, default=0, help="0: no chained call")
    parser.add_argument("--sizes", default="", help="MiB, comma-separated")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--loops", type=int, default=1)
    parser.add_argument("--connects", type=int, default=0, help="timed connects (rpc)")
    parser.add_argument("--result-file")
    parser.add_argument("--raw-bytes", type=int, default=MIB)
    args = parser.parse_args(argv)
    args.sizes = tuple(int(part) for part in args.sizes.split(",") if part.strip())
    if args.kind == "raw-peer":
        raw_peer(args.port, args.raw_bytes)
        return 0
    if not args.result_file:
        parser.error(f"{args.kind} needs --result-file")
    try:
        {"rpc": rpc_worker, "client": client_worker, "raw": raw_worker}[args.kind](args)
    except Exception as exc:
        path = Path(args.result_file)
        out = json.loads(path.read_text()) if path.exists() else {}
        out["fatal"] = f"{type(exc).__name__}: {exc}"[:2000]
        path.write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
