"""The RPC tracker (``tvm.rpc.Tracker``), its client (``TrackerSession``), the shared helpers of
``tvm.rpc.base`` and the tracker command lines, with real processes and loopback sockets. Fake
servers and clients are plain sockets speaking the tracker protocol; interoperability runs
Apache TVM's client and tracker (see ``apache_tvm_env``)."""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import apache_tvm_env
from rpc_helpers import DEADLINE, HOST, INT32, RawConnection, fresh_key, stop_cleanly, wait_until
from tvm import rpc
from tvm.error import RPCError
from tvm.rpc import base
from tvm.rpc.base import TrackerCode

pytestmark = pytest.mark.rpc


# -- helpers ------------------------------------------------------------------------------------


def pid_gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (exited, or a zombie nobody reaped yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def refuses(port: int) -> bool:
    """Whether nothing listens on ``HOST:port``."""
    try:
        with socket.create_connection((HOST, port), timeout=5):
            return False
    except ConnectionRefusedError:
        return True


class Conn(RawConnection):
    """A raw connection to a tracker, past the magic exchange."""

    def __init__(self, port: int, magic: int = base.RPC_TRACKER_MAGIC) -> None:
        super().__init__(port, INT32.pack(magic))
        if magic == base.RPC_TRACKER_MAGIC:
            assert INT32.unpack(base.recvall(self.sock, 4))[0] == base.RPC_TRACKER_MAGIC

    def send(self, *request: Any) -> None:
        base.sendjson(self.sock, list(request))

    def recv(self) -> Any:
        return base.recvjson(self.sock)

    def call(self, *request: Any) -> Any:
        self.send(*request)
        return self.recv()


@pytest.fixture(scope="module")
def tracker() -> Iterator[rpc.Tracker]:
    with rpc.Tracker(port=0, silent=True) as running:
        yield running


@pytest.fixture
def connect(tracker: rpc.Tracker) -> Iterator[Callable[..., Conn]]:
    """Opens raw connections to the module's tracker, closed after the test."""
    opened: list[Conn] = []

    def open_conn(magic: int = base.RPC_TRACKER_MAGIC) -> Conn:
        conn = Conn(tracker.port, magic)
        opened.append(conn)
        return conn

    yield open_conn
    for conn in opened:
        conn.close()


def register_server(conn: Conn, key: str, port: int = 9000, addr: str | None = None) -> None:
    assert conn.call(TrackerCode.UPDATE_INFO, {"key": f"server:{key}", "addr": [addr, port]}) == 0


def put(conn: Conn, key: str, port: int = 9000, addr: str | None = None) -> str:
    matchkey = base.random_key(key)
    assert conn.call(TrackerCode.PUT, key, [port, matchkey], addr) == TrackerCode.SUCCESS
    return matchkey


def queue(tracker_conn: Conn, key: str) -> dict[str, int]:
    reply = tracker_conn.call(TrackerCode.SUMMARY)
    assert reply[0] == TrackerCode.SUCCESS
    return reply[1]["queue_info"].get(key, {"free": 0, "pending": 0})


# -- base helpers -------------------------------------------------------------------------------


def test_constants_and_codes() -> None:
    assert base.RPC_MAGIC == 0xFF271
    assert base.RPC_TRACKER_MAGIC == 0x2F271
    assert (base.RPC_CODE_SUCCESS, base.RPC_CODE_DUPLICATE, base.RPC_CODE_MISMATCH) == (
        1045105,
        1045106,
        1045107,
    )
    assert base.RPC_SESS_MASK == 128
    assert base.MAX_TRACKER_MSG_BYTES == 1 << 20
    assert [int(code) for code in TrackerCode] == list(range(-1, 9))
    assert TrackerCode.GET_PENDING_MATCHKEYS == 7
    assert json.dumps([TrackerCode.PUT]) == "[3]"


@pytest.mark.parametrize("prefix", ["test_device", "127.0.0.1:5555"])
def test_random_key_round_trip(prefix: str) -> None:
    key = base.random_key(prefix)
    assert key.startswith(prefix + ":")
    assert base.split_random_key(key)[0] == prefix
    taken = {key}
    assert base.random_key(prefix, cmap=taken) != key


def test_json_frames_count_bytes() -> None:
    left, right = socket.socketpair()
    with left, right:
        base.sendjson(left, ["ascii", 1])
        base.sendjson(left, {"key": "ünïcødé ✓"})
        assert base.recvjson(right) == ["ascii", 1]
        assert base.recvjson(right) == {"key": "ünïcødé ✓"}
        # The size is the byte length of the text actually sent.
        text = json.dumps({"k": "é"}, ensure_ascii=False).encode("utf-8")
        left.sendall(INT32.pack(len(text)) + text)
        assert base.recvjson(right) == {"k": "é"}


def test_json_frame_errors_name_sizes() -> None:
    left, right = socket.socketpair()
    with left, right:
        with pytest.raises(ValueError, match=r"1048577 bytes exceeds"):
            base.sendjson(left, "x" * ((1 << 20) - 1))
        for size in (0, -5, (1 << 20) + 1):
            left.sendall(INT32.pack(size))
            with pytest.raises(ConnectionError, match=f"invalid JSON frame size {size}"):
                base.recvjson(right)
        left.sendall(INT32.pack(10) + b'["ab')
        left.shutdown(socket.SHUT_WR)
        with pytest.raises(ConnectionError, match="after 4 of 10 expected bytes"):
            base.recvjson(right)


def test_connect_with_retry_gives_up() -> None:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port = probe.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(RuntimeError, match="Failed to connect to server"):
            base.connect_with_retry((HOST, port), timeout=0.2, retry_period=0.05)
    assert base.get_addr_family((HOST, 1)) == socket.AF_INET


# -- lifetime -----------------------------------------------------------------------------------


def test_start_and_terminate_leave_nothing_behind() -> None:
    tracker = rpc.Tracker(port=0, silent=True)
    assert tracker.host == "127.0.0.1" and tracker.port > 0
    assert tracker.proc is not None
    pid = tracker.proc.pid
    assert pid is not None
    with rpc.connect_tracker(HOST, tracker.port) as session:
        assert session.ping()
        assert session.summary() == {"queue_info": {}, "server_info": []}
    idle = Conn(tracker.port)  # still open when the tracker stops: closed by it
    try:
        tracker.terminate()
        assert idle.closed_by_peer()
    finally:
        idle.close()
    assert refuses(tracker.port)
    wait_until(lambda: pid_gone(pid), "the tracker's worker process to end")
    tracker.terminate()  # idempotent


def test_port_range_and_errors(tracker: rpc.Tracker) -> None:
    with rpc.Tracker(port=tracker.port, port_end=tracker.port + 50, silent=True) as second:
        assert tracker.port < second.port < tracker.port + 50
    with pytest.raises(ValueError, match=r"cannot bind to any port in \[\d+, \d+\)"):
        rpc.Tracker(port=tracker.port, port_end=tracker.port + 1, silent=True)


def test_stop_needs_the_key(tracker: rpc.Tracker, connect: Callable[..., Conn]) -> None:
    conn = connect()
    assert conn.call(TrackerCode.STOP, "not the key") == TrackerCode.FAIL
    assert conn.call(TrackerCode.PING) == TrackerCode.SUCCESS


# -- protocol -----------------------------------------------------------------------------------


def test_register_request_and_summary(connect: Callable[..., Conn]) -> None:
    key = fresh_key()
    server, client, observer = connect(), connect(), connect()
    register_server(server, key, port=9001)
    first = put(server, key, port=9001)
    second = put(server, key, port=9001)
    assert sorted(server.call(TrackerCode.GET_PENDING_MATCHKEYS)) == sorted([first, second])
    assert queue(observer, key) == {"free": 2, "pending": 0}
    info = observer.call(TrackerCode.SUMMARY)[1]["server_info"]
    assert {"key": f"server:{key}", "addr": [HOST, 9001]} in info

    # Values are handed out FIFO, with the address the tracker saw.
    assert client.call(TrackerCode.REQUEST, key, "", 1) == [0, [HOST, 9001, first]]
    assert server.call(TrackerCode.GET_PENDING_MATCHKEYS) == [second]
    assert queue(observer, key) == {"free": 1, "pending": 0}
    assert client.call(TrackerCode.REQUEST, key, "", 1) == [0, [HOST, 9001, second]]
    assert server.call(TrackerCode.GET_PENDING_MATCHKEYS) == []
    assert queue(observer, key) == {"free": 0, "pending": 0}


def test_custom_addresses(connect: Callable[..., Conn]) -> None:
    key = fresh_key()
    server, client, observer = connect(), connect(), connect()
    register_server(server, key, port=7000, addr="10.1.2.3")
    matchkey = put(server, key, port=7000, addr="192.0.2.7")
    info = observer.call(TrackerCode.SUMMARY)[1]["server_info"]
    assert {"key": f"server:{key}", "addr": ["10.1.2.3", 7000]} in info
    assert client.call(TrackerCode.REQUEST, key, "", 1) == [0, ["192.0.2.7", 7000, matchkey]]


def test_request_waits_until_a_server_puts(connect: Callable[..., Conn]) -> None:
    key = fresh_key()
    server, client, observer = connect(), connect(), connect()
    client.send(TrackerCode.REQUEST, key, "", 1)
    wait_until(lambda: queue(observer, key)["pending"] == 1, "the request to be queued")
    assert observer.call(TrackerCode.PING) == TrackerCode.SUCCESS
    register_server(server, key)
    matchkey = put(server, key, port=9002)
    assert client.recv() == [0, [HOST, 9002, matchkey]]
    assert queue(observer, key) == {"free": 0, "pending": 0}


def test_priority_then_fifo(connect: Callable[..., Conn]) -> None:
    key = fresh_key()
    observer, server = connect(), connect()
    register_server(server, key)
    clients = {}
    for name, priority in (("low", 1), ("high-a", 5), ("high-b", 5), ("mid", 3)):
        conn = connect()
        conn.send(TrackerCode.REQUEST, key, name, priority)
        clients[name] = conn
        count = len(clients)
        wait_until(lambda n=count: queue(observer, key)["pending"] == n, f"request {name}")
    order = []
    with selectors.DefaultSelector() as selector:
        for name, conn in clients.items():
            selector.register(conn.sock, selectors.EVENT_READ, name)
        for _ in clients:
            matchkey = put(server, key)
            events = selector.select(timeout=DEADLINE)
            assert len(events) == 1, "exactly one request is served per PUT"
            name = events[0][0].data
            assert clients[name].recv() == [0, [HOST, 9000, matchkey]]
            selector.unregister(clients[name].sock)
            order.append(name)
    assert order == ["high-a", "high-b", "mid", "low"]


def test_closed_server_connection_is_withdrawn(connect: Callable[..., Conn]) -> None:
    key = fresh_key()
    observer, server = connect(), connect()
    register_server(server, key)
    put(server, key)
    put(server, key)
    assert queue(observer, key)["free"] == 2
    server.close()

    def withdrawn() -> bool:
        summary = observer.call(TrackerCode.SUMMARY)[1]
        servers = [info["key"] for info in summary["server_info"]]
        return summary["queue_info"][key]["free"] == 0 and f"server:{key}" not in servers

    wait_until(withdrawn, "the closed server's sessions to be withdrawn")
    # A request now waits for a live server.
    client = connect()
    client.send(TrackerCode.REQUEST, key, "", 1)
    wait_until(lambda: queue(observer, key)["pending"] == 1, "the request to wait")
    other = connect()
    register_server(other, key)
    matchkey = put(other, key, port=9100)
    assert client.recv() == [0, [HOST, 9100, matchkey]]


def test_closed_client_request_is_dropped(connect: Callable[..., Conn]) -> None:
    key = fresh_key()
    observer, server, client = connect(), connect(), connect()
    client.send(TrackerCode.REQUEST, key, "", 1)
    wait_until(lambda: queue(observer, key)["pending"] == 1, "the request to be queued")
    client.close()
    wait_until(lambda: queue(observer, key)["pending"] == 0, "the request to be dropped")
    register_server(server, key)
    matchkey = put(server, key)
    assert queue(observer, key) == {"free": 1, "pending": 0}
    assert server.call(TrackerCode.GET_PENDING_MATCHKEYS) == [matchkey]


BAD_INPUTS = {
    "wrong magic": (base.RPC_MAGIC, b""),
    "size 0": (None, INT32.pack(0)),
    "negative size": (None, INT32.pack(-1)),
    "size over 1 MiB": (None, INT32.pack((1 << 20) + 1)),
    "size 0x7FFFFFFF": (None, INT32.pack(0x7FFFFFFF)),
    "invalid JSON": (None, INT32.pack(5) + b"[1, }"),
    "invalid UTF-8": (None, INT32.pack(2) + b"\xff\xfe"),
    "not a list": (None, INT32.pack(8) + b'{"a": 1}'),
    "unknown code": (None, INT32.pack(4) + b"[99]"),
    "malformed PUT": (None, INT32.pack(8) + b'[3, "k"]'),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_closes_only_that_connection(
    case: str, tracker: rpc.Tracker, connect: Callable[..., Conn]
) -> None:
    bystander = connect()
    key = fresh_key()
    register_server(bystander, key)
    matchkey = put(bystander, key)
    magic, payload = BAD_INPUTS[case]
    bad = connect(magic) if magic is not None else connect()
    bad.sock.sendall(payload)
    assert bad.closed_by_peer(), "the tracker closes the offending connection"
    assert bystander.call(TrackerCode.PING) == TrackerCode.SUCCESS
    assert bystander.call(TrackerCode.GET_PENDING_MATCHKEYS) == [matchkey]
    assert connect().call(TrackerCode.PING) == TrackerCode.SUCCESS


@pytest.mark.parametrize("where", ["handshake", "size", "body"])
def test_peer_closing_mid_message(
    where: str, tracker: rpc.Tracker, connect: Callable[..., Conn]
) -> None:
    bystander = connect()
    with socket.create_connection((HOST, tracker.port), timeout=DEADLINE) as bad:
        if where == "handshake":
            bad.sendall(INT32.pack(base.RPC_TRACKER_MAGIC)[:2])
        else:
            bad.sendall(INT32.pack(base.RPC_TRACKER_MAGIC))
            assert base.recvall(bad, 4) == INT32.pack(base.RPC_TRACKER_MAGIC)
            bad.sendall(b"\x10\x00" if where == "size" else INT32.pack(100) + b"[1, 2")
        bad.shutdown(socket.SHUT_WR)
        assert bad.recv(1) == b"", "the tracker closes the connection"
    assert bystander.call(TrackerCode.PING) == TrackerCode.SUCCESS


# -- TrackerSession -----------------------------------------------------------------------------


@pytest.fixture
def fake_connect(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Replaces ``tvm.rpc.client`` with a module whose ``connect`` records its arguments."""
    calls: list[tuple[Any, ...]] = []
    module = types.ModuleType("tvm.rpc.client")

    def connect(url: str, port: int, key: str = "", **kwargs: Any) -> tuple[str, int, str]:
        calls.append((url, port, key, kwargs))
        return (url, port, key)

    module.connect = connect  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tvm.rpc.client", module)
    return calls


def test_session_request_connects_to_the_match(
    tracker: rpc.Tracker, connect: Callable[..., Conn], fake_connect: list[tuple[Any, ...]]
) -> None:
    key = fresh_key()
    server = connect()
    register_server(server, key, port=9300)
    matchkey = put(server, key, port=9300)
    with rpc.connect_tracker(HOST, tracker.port) as session:
        result = session.request(key, priority=2, session_timeout=7, session_constructor_args=["x"])
    assert result == (HOST, 9300, matchkey)
    options = {"session_timeout": 7, "session_constructor_args": ["x"], "auth_key": None}
    assert fake_connect == [(HOST, 9300, matchkey, options)]


def test_session_request_and_run_retries(
    tracker: rpc.Tracker, connect: Callable[..., Conn], fake_connect: list[tuple[Any, ...]]
) -> None:
    key = fresh_key()
    server = connect()
    register_server(server, key)
    keys = [put(server, key), put(server, key)]
    seen = []

    def job(sess: tuple[str, int, str]) -> str:
        seen.append(sess[2])
        if len(seen) == 1:
            raise RuntimeError("the server dropped out")
        return "done"

    with rpc.TrackerSession((HOST, tracker.port)) as session:
        assert session.request_and_run(key, job) == "done"
    assert seen == keys


def test_a_request_for_a_key_no_server_has_says_so(
    tracker: rpc.Tracker, connect: Callable[..., Conn]
) -> None:
    known = fresh_key()
    register_server(connect(), known)
    start = time.monotonic()
    with rpc.connect_tracker(HOST, tracker.port) as session:
        with pytest.raises(RPCError, match=rf"no server with key 'bord'.*{known}"):
            session.request("bord", wait_for_key=1.5)
        # The withdrawn request leaves nothing waiting.
        wait_until(
            lambda: session.summary()["queue_info"].get("bord", {}).get("pending", 0) == 0,
            "the withdrawn request to leave the queue",
        )
    assert time.monotonic() - start < 10


def test_a_request_waits_for_a_busy_key_past_wait_for_key(
    tracker: rpc.Tracker, connect: Callable[..., Conn], fake_connect: list[tuple[Any, ...]]
) -> None:
    """Servers of the key exist but none is free: the request waits as long as it takes."""
    key = fresh_key()
    server = connect()
    register_server(server, key)
    late = threading.Timer(2.5, lambda: put(server, key))
    late.start()
    try:
        with rpc.connect_tracker(HOST, tracker.port) as session:
            assert session.request(key, wait_for_key=1)[0] == HOST
    finally:
        late.join()


def test_a_wrong_tracker_port_is_an_rpc_error_soon() -> None:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port = probe.getsockname()[1]  # bound, not listening: connections are refused
        start = time.monotonic()
        with pytest.raises(RPCError, match=rf"cannot connect to the tracker at {HOST}:{port}"):
            rpc.connect_tracker(HOST, port, connect_timeout=1)
        assert time.monotonic() - start < 5


def test_session_rejects_a_non_tracker() -> None:
    with socket.create_server((HOST, 0)) as listener:

        def answer() -> None:
            conn, _ = listener.accept()
            with conn:
                base.recvall(conn, 4)
                conn.sendall(INT32.pack(base.RPC_MAGIC))  # a data-plane server's answer

        thread = threading.Thread(target=answer)
        thread.start()
        try:
            with pytest.raises(RuntimeError, match="is not RPC Tracker"):
                rpc.connect_tracker(HOST, listener.getsockname()[1])
        finally:
            thread.join(DEADLINE)


def test_text_summary(tracker: rpc.Tracker, connect: Callable[..., Conn]) -> None:
    key = fresh_key()
    server = connect()
    register_server(server, key, port=9400)
    put(server, key, port=9400)
    with rpc.connect_tracker(HOST, tracker.port) as session:
        text = session.text_summary()
    assert text.startswith("Server List\n")
    assert f"127.0.0.1:9400           server:{key}\n" in text
    assert "Queue Status" in text
    assert re.search(rf"^{re.escape(key)}\s+1\s+1\s+0\s*$", text, re.MULTILINE), text


# -- command lines ------------------------------------------------------------------------------


def run_cli(module: str, *args: str) -> tuple[subprocess.Popen[str], int]:
    """Starts ``python -m <module> args`` and returns it with the port it prints."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"listening on (\S+):(\d+)$", line.strip())
    if found is None:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"{module} printed {line!r}; stderr:\n{err}")
    return proc, int(found.group(2))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_tracker_command_line(sig: signal.Signals) -> None:
    proc, port = run_cli("tvm.exec.rpc_tracker", "--port", "0", "--silent")
    try:
        server = Conn(port)
        register_server(server, "cli-dev", port=9500)
        put(server, "cli-dev", port=9500)
        query = subprocess.run(
            [sys.executable, "-m", "tvm.exec.query_rpc_tracker", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=False,
        )
        server.close()
        assert query.returncode == 0, query.stderr
        assert f"Tracker address 127.0.0.1:{port}" in query.stdout
        assert "127.0.0.1:9500           server:cli-dev" in query.stdout
        stop_cleanly(proc, sig)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert refuses(port)


def test_tracker_command_line_defaults() -> None:
    from tvm.exec import rpc_tracker

    parser_help = subprocess.run(
        [sys.executable, "-m", "tvm.exec.rpc_tracker", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "--port-end" in parser_help and "0.0.0.0" not in parser_help
    assert rpc_tracker.main.__doc__


# -- interoperability with Apache TVM -----------------------------------------------------------


@pytest.fixture(scope="session")
def apache_python() -> Path:
    return apache_tvm_env.apache_tvm_python()


APACHE_CLIENT = """
import json, sys
import tvm.rpc
from tvm.rpc.client import TrackerSession
port = int(sys.argv[1])
summary = tvm.rpc.connect_tracker("127.0.0.1", port).summary()
raw = TrackerSession(("127.0.0.1", port))
text = raw.text_summary()
raw.close()
print(json.dumps({"summary": summary, "text": text, "file": tvm.__file__}))
"""


def test_apache_client_against_our_tracker(
    apache_python: Path, tracker: rpc.Tracker, connect: Callable[..., Conn]
) -> None:
    key = fresh_key()
    server = connect()
    register_server(server, key, port=9600)
    put(server, key, port=9600)
    result = subprocess.run(
        [str(apache_python), "-c", APACHE_CLIENT, str(tracker.port)],
        capture_output=True,
        text=True,
        env=apache_tvm_env.apache_tvm_environ(),
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert "/python/tvm/" not in report["file"], "Apache TVM's tvm was imported"
    assert report["summary"]["queue_info"][key] == {"free": 1, "pending": 0}
    assert {"key": f"server:{key}", "addr": [HOST, 9600]} in report["summary"]["server_info"]
    assert f"server:{key}" in report["text"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def test_our_session_against_apache_tracker(apache_python: Path) -> None:
    # Apache TVM's command line cannot bind port 0: give it a range starting at a free port.
    first = free_port()
    proc = subprocess.Popen(
        [
            str(apache_python),
            "-m",
            "tvm.exec.rpc_tracker",
            "--host",
            HOST,
            "--port",
            str(first),
            "--port-end",
            str(first + 100),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=apache_tvm_env.apache_tvm_environ(),
        start_new_session=True,  # its tracker runs in a child process: stop both together
    )
    try:
        assert proc.stderr is not None
        port = None
        for line in proc.stderr:
            found = re.search(r"bind to [^:]+:(\d+)", line)
            if found:
                port = int(found.group(1))
                break
        assert port is not None, "Apache TVM's tracker did not report its port"
        # It reports the port between bind() and listen(): wait until it accepts.
        found_port = port
        wait_until(lambda: not refuses(found_port), "Apache TVM's tracker to listen")
        server = Conn(port)
        try:
            register_server(server, "apache-dev", port=9700)
            matchkey = put(server, "apache-dev", port=9700)
            with rpc.connect_tracker(HOST, port) as session:
                summary = session.summary()
                assert summary["queue_info"]["apache-dev"] == {"free": 1, "pending": 0}
                assert "apache-dev" in session.text_summary()
                assert session.ping()
                reply = session._call([TrackerCode.REQUEST, "apache-dev", "", 1])
            assert reply == [0, [HOST, 9700, matchkey]]
        finally:
            server.close()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
