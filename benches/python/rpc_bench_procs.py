"""Processes of benches/python/bench_rpc.py: the servers of both implementations, the nice-19
spinners, and the client workers of rpc_bench_workers.py (one at a time, or several at once
released together)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

HOST = "127.0.0.1"
WORKERS = Path(__file__).resolve().with_name("rpc_bench_workers.py")

#: Seconds a server may take to start listening.
SERVER_DEADLINE_S = 180.0
#: Concurrent clients: seconds for all to import ``tvm``; after the first has connected, how
#: long the others may take (at least READY_GRACE_S, or READY_FACTOR times the first's time).
IMPORT_DEADLINE_S = 120.0
READY_GRACE_S = 1.0
READY_FACTOR = 5.0


def environ(apache: bool) -> dict[str, str]:
    """The environment of a process: Apache TVM's runs without ``PYTHONPATH``, so that the
    ``tvm`` it imports is its own."""
    env = dict(os.environ)
    if apache:
        env.pop("PYTHONPATH", None)
    return env


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


def _spawn(
    command: list[str], log: Path, stdout: int | None, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    with open(log, "wb") as log_file:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=stdout if stdout is not None else log_file,
            stderr=log_file,
            env=env,
            start_new_session=True,  # a process group of its own: stopped as a whole
        )


def start_ours(python: str, name: str, tmp: Path) -> Server:
    """``python -m tvm.exec.rpc_server --port 0``; the port comes from the line it prints."""
    log = tmp / f"{name}.log"
    command = [python, "-m", "tvm.exec.rpc_server", "--host", HOST, "--port", "0"]
    proc = _spawn(command, log, subprocess.PIPE, environ(False))
    lines: queue.Queue[bytes] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout

    def read() -> None:  # the first line, then the rest unread, so that the pipe never fills
        lines.put(stdout.readline())
        for _ in stdout:
            pass

    threading.Thread(target=read, daemon=True).start()
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


def free_ports(count: int) -> list[int]:
    """Ports that were free a moment ago, each followed by 50 more (Apache TVM's search range)."""
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
    server = Server(name, _spawn(command, log, None, environ(True)), port, log)
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


# ---- client workers -------------------------------------------------------------------------


def run_worker(python: str, worker_args: list[str], timeout_s: float, apache: bool) -> dict:
    """One worker of rpc_bench_workers.py to its end: its JSON, with ``fatal`` when it failed
    or timed out (then with the results of the steps it finished)."""
    with tempfile.TemporaryDirectory(prefix="bench_rpc.") as tmp:
        result_file = Path(tmp) / "result.json"
        command = [python, str(WORKERS), *worker_args, "--result-file", str(result_file)]
        fatal = None
        try:
            proc = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
                env=environ(apache),
            )
            output = (proc.stdout + proc.stderr).strip()
            if proc.returncode != 0:
                fatal = f"worker exited with {proc.returncode}:\n{output[-2000:]}"
        except subprocess.TimeoutExpired:
            fatal, output = f"worker timed out after {timeout_s:.0f} s", ""
        result: dict[str, Any] = {}
        if result_file.exists():
            with contextlib.suppress(ValueError):
                result = json.loads(result_file.read_text())
        elif fatal is None:
            fatal = f"worker wrote no results:\n{output[-2000:]}"
        if fatal is not None:
            step = result.pop("step", None)
            result["fatal"] = fatal + (f" (in step {step})" if step else "")
        if output and "fatal" not in result:
            result["stderr"] = output[-2000:]
        return result


def _overlap(windows: list[tuple[float, float]]) -> int:
    """The most windows open at one instant."""
    events = sorted([(start, 1) for start, _ in windows] + [(end, -1) for _, end in windows])
    most = current = 0
    for _, step in events:  # at equal times an end (-1) sorts before a start
        current += step
        most = max(most, current)
    return most


def _lines_to(stream: IO[str], index: int, lines: queue.Queue[tuple[int, str]]) -> None:
    for line in stream:
        lines.put((index, line.strip()))


def _wait_for(
    lines: queue.Queue[tuple[int, str]], word: str, count: int, first_s: float, grace: bool
) -> set[int]:
    """The clients that printed ``word``: all ``count``, or those that did within ``first_s``
    (and, with ``grace``, the others within the grace after the first)."""
    started = time.monotonic()
    deadline = started + first_s
    seen: set[int] = set()
    while len(seen) < count:
        try:
            index, line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line != word:
            continue
        if not seen and grace:
            first = time.monotonic() - started
            deadline = time.monotonic() + max(READY_GRACE_S, READY_FACTOR * first)
        seen.add(index)
    return seen


def run_clients(python: str, port: int, count: int, calls: int, apache: bool) -> dict[str, Any]:
    """``count`` client processes on one server, released at once: their calls per second in
    all (every call over the time from the first loop's start to the last one's end), the
    median µs per call of one client, how many had connected when they were released, and the
    most timed loops that ran at the same time (1: the server served them one after another)."""
    with tempfile.TemporaryDirectory(prefix="bench_rpc.clients.") as tmp:
        procs: list[subprocess.Popen[str]] = []
        files = [Path(tmp) / f"client{i}.json" for i in range(count)]
        lines: queue.Queue[tuple[int, str]] = queue.Queue()
        try:
            for index, result_file in enumerate(files):
                command = [python, str(WORKERS), "client", "--port", str(port)]
                command += ["--calls", str(calls), "--result-file", str(result_file)]
                with open(Path(tmp) / f"client{index}.log", "w") as log:
                    proc = subprocess.Popen(
                        command,
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=log,
                        text=True,
                        env=environ(apache),
                    )
                procs.append(proc)
                assert proc.stdout is not None
                threading.Thread(
                    target=_lines_to, args=(proc.stdout, index, lines), daemon=True
                ).start()

            def tell(word: str) -> None:
                for proc in procs:
                    with contextlib.suppress(OSError):
                        assert proc.stdin is not None
                        proc.stdin.write(word + "\n")
                        proc.stdin.flush()

            _wait_for(lines, "imported", count, IMPORT_DEADLINE_S, grace=False)
            tell("connect")
            connected = _wait_for(lines, "ready", count, IMPORT_DEADLINE_S, grace=True)
            tell("go")
            for proc in procs:
                with contextlib.suppress(OSError):
                    assert proc.stdin is not None
                    proc.stdin.close()
            for proc in procs:
                try:
                    proc.wait(timeout=IMPORT_DEADLINE_S + 60 * count)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()

        windows, per_call, failures = [], [], []
        for index, result_file in enumerate(files):
            result = json.loads(result_file.read_text()) if result_file.exists() else {}
            got = result.get("results", {})
            if "start" in got:
                windows.append((got["start"], got["end"]))
                per_call.append((got["end"] - got["start"]) / got["calls"] * 1e6)
            else:
                log = (Path(tmp) / f"client{index}.log").read_text(errors="replace")
                reason = result.get("fatal") or "; ".join(result.get("errors", {}).values())
                failures.append(f"client {index}: {reason or log[-1000:] or 'no result'}")
    if failures:
        return {"fatal": "\n".join(failures)}
    span = max(end for _, end in windows) - min(start for start, _ in windows)
    return {
        "calls_per_s": count * calls / span,
        "per_call_us": statistics.median(per_call),
        "connected_at_go": len(connected),
        "overlap": _overlap(windows),
    }
