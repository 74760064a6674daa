"""RPC and the interpreter lock: connecting and remote calls let other Python threads run, a
silent server is given up on within the handshake timeout, a process exits cleanly with
sessions, daemon threads inside remote calls and servers alive, and a server answers malformed
packets without a traceback."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tvm import rpc

HOST = "127.0.0.1"


class Counter:
    """A Python thread that counts while the test runs: it stalls if another thread holds the
    interpreter lock."""

    def __init__(self) -> None:
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.count += 1
            time.sleep(0.001)

    def advance_during(self, seconds: float) -> int:
        before = self.count
        time.sleep(seconds)
        return self.count - before

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture
def counter() -> Iterator[Counter]:
    running = Counter()
    yield running
    running.stop()


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A listening socket that accepts (in the kernel) and never answers; yields its port."""
    sock = socket.socket()
    sock.bind((HOST, 0))
    sock.listen(16)
    yield sock.getsockname()[1]
    sock.close()


def in_thread(func: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Runs ``func`` in a daemon thread; the dict gets its ``value`` or ``error`` and
    ``seconds``."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        start = time.monotonic()
        try:
            outcome["value"] = func()
        except BaseException as err:
            outcome["error"] = err
        outcome["seconds"] = time.monotonic() - start

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_connect_to_a_silent_server_lets_other_threads_run_and_times_out(
    counter: Counter, silent_server: int
) -> None:
    thread, outcome = in_thread(lambda: rpc.connect(HOST, silent_server, handshake_timeout=1.5))
    time.sleep(0.2)
    # While connect waits for the server, the counting thread keeps going (about 1 per ms).
    advanced = counter.advance_during(0.8)
    thread.join(10)
    assert not thread.is_alive()
    assert advanced > 100, f"the counter advanced {advanced} times in 0.8 s"
    err = outcome.get("error")
    assert isinstance(err, TimeoutError), outcome
    assert f"{HOST}:{silent_server}" in str(err)
    assert "1.5 s" in str(err)
    assert 1.4 < outcome["seconds"] < 5, outcome


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "5", True])
def test_a_bad_handshake_timeout_is_refused(bad: object, silent_server: int) -> None:
    with pytest.raises(ValueError, match="handshake_timeout"):
        rpc.connect(HOST, silent_server, handshake_timeout=bad)  # type: ignore[arg-type]


def test_a_refused_connection_names_the_address() -> None:
    probe = socket.socket()
    probe.bind((HOST, 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    with pytest.raises(RuntimeError, match=f"{HOST}:{port}"):
        rpc.connect(HOST, port, handshake_timeout=2)


def test_a_blocking_remote_call_lets_other_threads_run(counter: Counter) -> None:
    with rpc.Server(port=0) as server:
        sess = rpc.connect(HOST, server.port)
        sleep = sess.get_function("rpc.test.sleep")
        thread, outcome = in_thread(lambda: sleep(1.0))
        time.sleep(0.1)
        advanced = counter.advance_during(0.6)
        thread.join(10)
        assert advanced > 100, f"the counter advanced {advanced} times in 0.6 s"
        assert outcome.get("value") == 1.0, outcome
        # Another thread's call on the same session waits for the first one, lock released.
        addone = sess.get_function("rpc.test.addone")
        thread, outcome = in_thread(lambda: sleep(0.5))
        time.sleep(0.1)
        assert addone(1) == 2
        thread.join(10)
        assert outcome.get("value") == 0.5, outcome
        sess.close()


def test_a_remote_function_lookup_lets_other_threads_run() -> None:
    """Looking a function up waits on the network with the interpreter lock released: here the
    bytes pass through a relay that is a Python thread of the same process (as an in-process
    websocket relay is). In a subprocess, so that a lookup holding the lock cannot hang the
    test run."""
    script = textwrap.dedent(
        """
        import socket, threading
        from tvm import rpc

        def pump(src, dst):
            while data := src.recv(1 << 16):
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)

        with rpc.Server(port=0) as server:
            listener = socket.create_server(("127.0.0.1", 0))
            def relay():
                client, _ = listener.accept()
                upstream = socket.create_connection(("127.0.0.1", server.port))
                threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
                pump(client, upstream)
            threading.Thread(target=relay, daemon=True).start()
            sess = rpc.connect("127.0.0.1", listener.getsockname()[1])
            print("addone:", sess.get_function("rpc.test.addone")(41), flush=True)
            sess.close()
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "addone: 42" in result.stdout


def test_close_from_another_thread_ends_a_call_in_flight() -> None:
    with rpc.Server(port=0) as server:
        sess = rpc.connect(HOST, server.port)
        sleep = sess.get_function("rpc.test.sleep")
        thread, outcome = in_thread(lambda: sleep(120.0))
        time.sleep(0.3)  # the call is out; a close before it fails it just the same
        closer, closed = in_thread(sess.close)
        closer.join(10)
        thread.join(10)
        assert not closer.is_alive(), "close() waited for the call in flight"
        assert "error" not in closed, closed
        assert not thread.is_alive(), "the call in flight outlived close()"
        assert type(outcome.get("error")).__name__ == "RPCError", outcome
        with pytest.raises(Exception, match="closed"):
            sess.get_function("rpc.test.addone")(1)


#: Opens sessions, leaves daemon threads inside remote calls (blocking ones, a tight loop, a
#: connect to a silent server), starts a further server, then exits.
EXIT_SCRIPT = textwrap.dedent(
    """
    import socket, sys, threading, time
    from tvm import rpc

    # A session first, then a server: its exit hook (which stops it) comes first at exit.
    outside = rpc.connect("127.0.0.1", int(sys.argv[1]))
    server = rpc.Server(port=0)
    sessions = [rpc.connect("127.0.0.1", server.port) for _ in range(2)]

    def blocked(sess):
        sess.get_function("rpc.test.sleep")(60)

    def busy(sess):
        addone = sess.get_function("rpc.test.addone")
        while True:
            addone(1)

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)
    threads = [
        threading.Thread(target=blocked, args=(sessions[0],), daemon=True),
        threading.Thread(target=blocked, args=(outside,), daemon=True),
        threading.Thread(target=busy, args=(sessions[1],), daemon=True),
        threading.Thread(target=busy, args=(sessions[1],), daemon=True),
        threading.Thread(
            target=rpc.connect, args=("127.0.0.1", silent.getsockname()[1]), daemon=True
        ),
    ]
    for thread in threads:
        thread.start()
    further = rpc.Server(port=0)
    time.sleep(float(sys.argv[2]))
    print("exiting", flush=True)
    """
)


@pytest.mark.parametrize("run", range(6))
def test_exit_with_sessions_daemon_threads_and_servers_alive_is_clean(
    run: int, tmp_path: Any
) -> None:
    script = tmp_path / "exit_with_sessions.py"
    script.write_text(EXIT_SCRIPT)
    with rpc.Server(port=0) as outside:
        # Vary the moment of the exit relative to the daemon threads' calls.
        linger = (0.05, 0.3, 0.6)[run % 3]
        done = subprocess.run(
            [sys.executable, str(script), str(outside.port), str(linger)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout == "exiting\n"


def _raw_session(port: int, init: bool = True) -> socket.socket:
    """A connection past the handshake and (with ``init``) ``kInitServer`` (protocol 0.8.0),
    made by hand."""
    sock = socket.create_connection((HOST, port), timeout=10)
    key = b"client:"
    sock.sendall(struct.pack("<ii", 0xFF271, len(key)) + key)
    magic, length = struct.unpack("<ii", _recv(sock, 8))
    assert magic == 0xFF271
    _recv(sock, length)
    if not init:
        return sock
    version = b"0.8.0"
    body = struct.pack("<iQ", 2, len(version)) + version + struct.pack("<i", 0)
    sock.sendall(struct.pack("<Q", len(body)) + body)
    (length,) = struct.unpack("<Q", _recv(sock, 8))
    (code,) = struct.unpack("<i", _recv(sock, length)[:4])
    assert code == 4, f"kInitServer was answered with code {code}"  # kReturn
    return sock


def _recv(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the server closed the connection"
        data += chunk
    return data


SERVER_SCRIPT = textwrap.dedent(
    """
    import sys
    from tvm import rpc

    server = rpc.Server(port=0)
    print(server.port, flush=True)
    sys.stdin.read()
    server.terminate()
    """
)


def test_malformed_packets_end_their_sessions_without_a_traceback(tmp_path: Any) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER_SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        packets = {
            "no code": struct.pack("<Q", 2) + b"ab",
            "unknown code": struct.pack("<Qii", 8, 12345, 0),
            "trailing bytes": struct.pack("<Qi", 12, 1) + b"\xff" * 8,
            "too large": struct.pack("<Q", 1 << 40) + b"x" * 16,
            "cut short": struct.pack("<Q", 100) + b"x" * 10,
        }
        # As the first packet of a session, instead of kInitServer: a return, and garbage.
        first_packets = [struct.pack("<Qii", 8, 4, 0), struct.pack("<Q", 3) + b"abc"]
        sessions = [(True, p) for p in packets.values()] + [(False, p) for p in first_packets]
        for init, payload in sessions:
            sock = _raw_session(port, init)
            sock.sendall(payload)
            if payload.startswith(struct.pack("<Q", 100)):
                sock.shutdown(socket.SHUT_WR)
            # The server ends the session: it closes the connection.
            sock.settimeout(10)
            while sock.recv(65536):
                pass
            sock.close()
        # The server still serves.
        sess = rpc.connect(HOST, port)
        assert sess.get_function("rpc.test.addone")(41) == 42
        sess.close()
    finally:
        _, err = proc.communicate("", timeout=60)
    assert "Traceback" not in err, err
    assert len(err.splitlines()) <= len(sessions), err
