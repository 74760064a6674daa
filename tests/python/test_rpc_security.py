"""The RPC server under attack, on loopback: silent and byte-dribbling connections, missing and
wrong keys, a fake server, connection floods, empty keys. Every attack is bounded in time and
count, and every test checks that a legitimate client is still served."""

from __future__ import annotations

import re
import select
import socket
import struct
import subprocess
import sys
import time

import pytest

import tvm
from rpc_helpers import HOST, descendants, rss_mib, wait_until
from tvm import rpc
from tvm.rpc.base import RPC_CODE_BUSY, RPC_CODE_MISMATCH, RPC_MAGIC

KEY = "s3cret"


def session_processes(worker: int) -> list[int]:
    """The processes below a server's worker but its session zygote (which is pre-started
    and forks the sessions) and the spare it forks ahead: the session processes."""
    found = []
    for pid in descendants(worker):
        try:
            with open(f"/proc/{pid}/comm") as comm:
                if comm.read().strip() in ("tvm-rpc-zygote", "tvm-rpc-spare"):
                    continue
        except OSError:
            continue
        found.append(pid)
    return found


def hello(key: str) -> bytes:
    raw = key.encode()
    return struct.pack("<ii", RPC_MAGIC, len(raw)) + raw


def closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    """Whether the peer closes ``sock`` within ``timeout`` s (what it sends first is read and
    dropped)."""
    end = time.monotonic() + timeout
    while (left := end - time.monotonic()) > 0:
        ready, _, _ = select.select([sock], [], [], left)
        if not ready:
            return False
        try:
            if not sock.recv(4096):
                return True
        except OSError:
            return True
    return False


def assert_served(port: int, auth_key: str | None = KEY) -> None:
    sess = rpc.connect(HOST, port, auth_key=auth_key)
    assert sess.get_function("rpc.test.addone")(41) == 42
    sess.close()


def test_silent_and_dribbling_connections_start_no_session_and_close_at_the_deadline(capfd):
    with rpc.Server(port=0, auth_key=KEY, handshake_timeout=1.5, max_pending_handshakes=64) as srv:
        assert srv.proc is not None
        worker = srv.proc.pid
        assert worker is not None
        memory_before = rss_mib([worker, *descendants(worker)])
        silent = [socket.create_connection((HOST, srv.port)) for _ in range(20)]
        slow = socket.create_connection((HOST, srv.port))
        start = time.monotonic()
        # One byte every 0.25 s: a timeout that restarted at every byte would never fire.
        most_children = 0
        closed_after = None
        for byte in hello("client: -protocol=0.9.0-tvm-rs") * 4:
            most_children = max(most_children, len(session_processes(worker)))
            try:
                slow.sendall(bytes([byte]))
            except OSError:
                closed_after = time.monotonic() - start
                break
            if closed_by_peer(slow, 0.25):
                closed_after = time.monotonic() - start
                break
            if time.monotonic() - start > 8:
                break
        memory_during = rss_mib([worker, *descendants(worker)])
        assert closed_after is not None, "a dribbling peer held its connection past 8 s"
        assert 1.0 < closed_after < 4.0, closed_after
        # The silent ones were closed at the same deadline; none got a session process.
        for sock in silent:
            assert closed_by_peer(sock, 3.0)
            sock.close()
        slow.close()
        assert most_children == 0
        assert memory_during - memory_before < 40, (memory_before, memory_during)
        # A legitimate client is served (by one session process).
        sess = rpc.connect(HOST, srv.port, auth_key=KEY)
        assert sess.get_function("rpc.test.addone")(1) == 2
        assert len(session_processes(worker)) >= 1
        sess.close()
    err = capfd.readouterr().err
    assert "Traceback" not in err
    refusals = [line for line in err.splitlines() if "refused" in line]
    assert len(refusals) == 21, err


def test_a_legitimate_client_is_served_while_silent_connections_wait():
    with rpc.Server(port=0, auth_key=KEY, handshake_timeout=5, max_pending_handshakes=32) as srv:
        silent = [socket.create_connection((HOST, srv.port)) for _ in range(20)]
        start = time.monotonic()
        assert_served(srv.port)
        assert time.monotonic() - start < 4
        for sock in silent:
            sock.close()


def test_beyond_the_pending_and_session_limits_clients_are_told_busy(capfd):
    with rpc.Server(port=0, handshake_timeout=1.5, max_pending_handshakes=2, max_sessions=1) as srv:
        held = [socket.create_connection((HOST, srv.port)) for _ in range(2)]
        time.sleep(0.3)
        # A third connection while two handshakes are pending: refused at once, with a code.
        extra = socket.create_connection((HOST, srv.port))
        extra.sendall(hello("client:"))
        extra.settimeout(5)
        assert struct.unpack("<i", extra.recv(4))[0] == RPC_CODE_BUSY
        extra.close()
        with pytest.raises(tvm.error.RPCError, match="limit of concurrent sessions"):
            rpc.connect(HOST, srv.port)
        # The held connections end at their deadline; a session can start then.
        first = wait_until(lambda: _try_connect(srv.port), "the held connections to end", 10)
        # One session is the limit: a second client is told to come back later.
        with pytest.raises(tvm.error.RPCError, match="limit of concurrent sessions"):
            rpc.connect(HOST, srv.port)
        first.close()
        second = wait_until(lambda: _try_connect(srv.port), "the first session to end", 10)
        assert second.get_function("rpc.test.addone")(1) == 2
        second.close()
        for sock in held:
            sock.close()
    err = capfd.readouterr().err
    assert "Traceback" not in err
    assert "sessions are already running" in err
    assert "handshakes are already in progress" in err


def _try_connect(port: int) -> rpc.RPCSession | None:
    try:
        return rpc.connect(HOST, port)
    except tvm.error.RPCError as err:
        assert "limit" in str(err)
        return None


def test_missing_and_wrong_keys_are_refused_without_a_session_process(monkeypatch):
    monkeypatch.delenv("TVM_RPC_KEY", raising=False)
    with rpc.Server(port=0, auth_key=KEY) as srv:
        assert srv.proc is not None and srv.proc.pid is not None
        with pytest.raises(tvm.error.RPCError, match="requires an authentication key"):
            rpc.connect(HOST, srv.port)
        with pytest.raises(tvm.error.RPCError, match="failed to prove"):
            rpc.connect(HOST, srv.port, auth_key="guess")
        # An Apache TVM client (no own protocol) cannot authenticate: refused at once.
        raw = socket.create_connection((HOST, srv.port))
        raw.sendall(hello("client:"))
        raw.settimeout(5)
        assert struct.unpack("<i", raw.recv(4))[0] == RPC_CODE_MISMATCH
        raw.close()
        assert session_processes(srv.proc.pid) == []
        assert_served(srv.port)


_FAKE_SERVER = """
import socket, struct, sys
reply = sys.argv[1].encode()
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
conn, _ = listener.accept()
conn.settimeout(10)
_, length = struct.unpack("<ii", conn.recv(8, socket.MSG_WAITALL))
conn.recv(length, socket.MSG_WAITALL)
conn.sendall(struct.pack("<ii", 0xFF271, len(reply)) + reply)
rest = b""
try:
    while chunk := conn.recv(4096):
        rest += chunk
except OSError:
    pass
print(len(rest), flush=True)
"""


def _fake_server(reply: str) -> subprocess.Popen[str]:
    """A fake server in a process of its own (the client holds this interpreter while it
    connects): answers one hello with ``reply``, then prints how many bytes the client sent
    after its hello."""
    return subprocess.Popen(
        [sys.executable, "-c", _FAKE_SERVER, reply], stdout=subprocess.PIPE, text=True
    )


@pytest.mark.parametrize(
    "reply",
    [
        "server: -protocol=0.9.0-tvm-rs",
        "server:",
        "server: -protocol=0.9.0-tvm-rs -nonce=" + "ab" * 16 + " -proof=" + "cd" * 32,
    ],
    ids=["no-challenge", "apache-style", "wrong-proof"],
)
def test_a_keyed_client_refuses_a_fake_server(reply):
    fake = _fake_server(reply)
    try:
        assert fake.stdout is not None
        port = int(fake.stdout.readline())
        with pytest.raises(tvm.error.RPCError, match="prove that it holds the authentication"):
            rpc.connect(HOST, port, auth_key=KEY)
        # The client sent nothing after its hello: no proof for the fake server to relay.
        out, _ = fake.communicate(timeout=15)
        assert out.strip() == "0"
    finally:
        fake.kill()
        fake.wait()
    with rpc.Server(port=0, auth_key=KEY) as srv:
        assert_served(srv.port)


@pytest.mark.parametrize("bad", ["", " ", "\t\n"])
def test_empty_or_whitespace_keys_are_value_errors(bad, monkeypatch):
    named = re.escape(repr(bad))
    with pytest.raises(ValueError, match=f"auth_key {named} is empty or whitespace"):
        rpc.Server(port=0, auth_key=bad)
    with pytest.raises(ValueError, match=f"auth_key {named} is empty or whitespace"):
        rpc.connect(HOST, 9, auth_key=bad)
    monkeypatch.setenv("TVM_RPC_KEY", bad)
    with pytest.raises(ValueError, match=f"TVM_RPC_KEY {named} is empty or whitespace"):
        rpc.Server(port=0)
    with pytest.raises(ValueError, match=f"TVM_RPC_KEY {named} is empty or whitespace"):
        rpc.connect(HOST, 9)
    # An explicit key wins over the empty variable; a legitimate client is served.
    with rpc.Server(port=0, auth_key=KEY) as srv:
        assert_served(srv.port)


def test_bad_limits_are_value_errors():
    with pytest.raises(ValueError, match="handshake_timeout"):
        rpc.Server(port=0, handshake_timeout=0)
    with pytest.raises(ValueError, match="max_sessions"):
        rpc.Server(port=0, max_sessions=0)
    with pytest.raises(ValueError, match="max_pending_handshakes"):
        rpc.Server(port=0, max_pending_handshakes=-1)
