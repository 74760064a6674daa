"""The tracker under abuse, on loopback: PUT floods, large frames, SUMMARY floods whose replies
are never read, idle connections under a low descriptor limit, keys. Each attack is bounded in
time and count; each test checks the tracker's memory and that a legitimate peer still gets
served."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from rpc_helpers import HOST, INT32, closed_by_peer, fresh_key, rss_mib, wait_until
from tvm import rpc
from tvm.rpc import base
from tvm.rpc.base import TrackerCode
from tvm.rpc.tracker import TrackerLimits

KEY = "tr4cker-secret"


def frame(request: object) -> bytes:
    payload = json.dumps(request).encode()
    return INT32.pack(len(payload)) + payload


def opened(port: int) -> socket.socket:
    sock = socket.create_connection((HOST, port), timeout=10)
    sock.sendall(INT32.pack(base.RPC_TRACKER_MAGIC))
    assert INT32.unpack(base.recvall(sock, 4))[0] == base.RPC_TRACKER_MAGIC
    return sock


def legitimate_round_trip(port: int, auth_key: str | None = None) -> None:
    """A server offers a session and a client gets it (raw protocol, no RPC server)."""
    key = fresh_key()
    with rpc.connect_tracker(HOST, port, auth_key=auth_key) as server:
        info = {"key": f"server:{key}", "addr": [None, 9]}
        assert server._call([TrackerCode.UPDATE_INFO, info]) == TrackerCode.SUCCESS
        matchkey = base.random_key(key)
        assert server._call([TrackerCode.PUT, key, [9, matchkey], None]) == TrackerCode.SUCCESS
        with rpc.connect_tracker(HOST, port, auth_key=auth_key) as client:
            reply = client._call([TrackerCode.REQUEST, key, "", 1])
            assert reply == [TrackerCode.SUCCESS, [HOST, 9, matchkey]]
            assert key in client.summary()["queue_info"]


def tracker_memory(tracker: rpc.Tracker) -> float:
    assert tracker.proc is not None and tracker.proc.pid is not None
    return rss_mib([tracker.proc.pid])


def test_put_floods_and_large_frames_stay_bounded(capfd):
    with rpc.Tracker(port=0, silent=True) as tracker:
        legitimate_round_trip(tracker.port)
        before = tracker_memory(tracker)
        # 200 PUTs of 1 MiB each (the attack that grew the tracker by 200 MiB): the first
        # frame is over the request limit and closes the connection.
        big = opened(tracker.port)
        big.sendall(INT32.pack(1 << 20))
        with contextlib.suppress(OSError):
            for _ in range(200):
                big.sendall(b"x" * 65536)
        assert closed_by_peer(big, 10)
        big.close()
        # 20 connections of 400 PUTs each, with keys of 1000 characters: each connection is
        # closed at its 256th offer, and everything it offered is withdrawn.
        flooders = [opened(tracker.port) for _ in range(20)]
        for number, sock in enumerate(flooders):
            prefix = f"k{number}-" + "k" * 1000
            requests = b"".join(
                frame([TrackerCode.PUT, prefix[:1000], [9, f"{prefix[:900]}:{i}"], None])
                for i in range(400)
            )
            with contextlib.suppress(OSError):
                sock.sendall(requests)
        for sock in flooders:
            assert closed_by_peer(sock, 10)
            sock.close()
        after = tracker_memory(tracker)
        assert after - before < 25, (before, after)
        legitimate_round_trip(tracker.port)
        with rpc.connect_tracker(HOST, tracker.port) as observer:
            queues = observer.summary()["queue_info"]
            assert all(q["free"] == 0 for k, q in queues.items() if k.startswith("k"))
    err = capfd.readouterr().err
    assert "Traceback" not in err
    assert err.count("too many offers") == 20, err


def test_summary_floods_with_unread_replies_stay_bounded(capfd):
    limits = TrackerLimits(write_timeout=2.0)
    with rpc.Tracker(port=0, silent=True, limits=limits) as tracker:
        # Make the summary large: 50 registered servers.
        servers = []
        for number in range(50):
            sock = opened(tracker.port)
            info = {"key": f"server:{'s' * 900}{number}", "addr": [None, number]}
            sock.sendall(frame([TrackerCode.UPDATE_INFO, info]))
            base.recvjson(sock)
            servers.append(sock)
        before = tracker_memory(tracker)
        flooder = opened(tracker.port)
        flooder.setblocking(False)
        request = frame([TrackerCode.SUMMARY]) * 1000
        sent, end = 0, time.monotonic() + 5
        while sent < 20000 and time.monotonic() < end:
            try:
                flooder.send(request)
                sent += 1000
            except BlockingIOError:
                time.sleep(0.05)
            except OSError:
                break
        # Meanwhile a legitimate client is served.
        legitimate_round_trip(tracker.port)
        during = tracker_memory(tracker)
        # Replies left unread past the write timeout close the connection.
        time.sleep(limits.write_timeout + 2)
        flooder.setblocking(True)
        assert closed_by_peer(flooder, 15), "the flooder was never closed"
        flooder.close()
        assert during - before < 25, (before, during)
        legitimate_round_trip(tracker.port)
        for sock in servers:
            sock.close()
    err = capfd.readouterr().err
    assert "Traceback" not in err
    assert "replies unread" in err or "bytes of replies unread" in err, err


_LOW_LIMIT_TRACKER = """
import resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
from tvm.rpc.tracker import Tracker, TrackerLimits
limits = TrackerLimits(handshake_timeout=1.0, idle_timeout=1.0)
tracker = Tracker(port=0, silent=True, limits=limits)
print(tracker.port, flush=True)
sys.stdin.read()
tracker.terminate()
"""


def test_idle_connections_under_a_low_descriptor_limit_do_not_stop_a_client():
    proc = subprocess.Popen(
        [sys.executable, "-c", _LOW_LIMIT_TRACKER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    idle: list[socket.socket] = []
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        # 150 connections that never say anything: more than the tracker has descriptors.
        idle = [socket.create_connection((HOST, port)) for _ in range(150)]
        start = time.monotonic()
        legitimate_round_trip(port)
        assert time.monotonic() - start < 30
    finally:
        for sock in idle:
            sock.close()
        _, err = proc.communicate("", timeout=30)
    assert "Traceback" not in err, err
    # Out of descriptors: logged once per episode, not once per retry.
    assert 1 <= err.count("cannot accept connections") <= 5, err
    assert err.count("no handshake within 1 s") >= 50, err


def test_a_keyed_tracker_requires_the_key_from_every_peer(monkeypatch):
    monkeypatch.delenv("TVM_RPC_KEY", raising=False)
    with rpc.Tracker(port=0, silent=True, auth_key=KEY) as tracker:
        with pytest.raises(RuntimeError, match="requires an authentication key"):
            rpc.connect_tracker(HOST, tracker.port)
        with pytest.raises(RuntimeError, match="refused the authentication key"):
            rpc.connect_tracker(HOST, tracker.port, auth_key="guess")
        # An unauthenticated PUT (Apache TVM's server) registers nothing.
        raw = socket.create_connection((HOST, tracker.port), timeout=10)
        raw.sendall(INT32.pack(base.RPC_TRACKER_MAGIC))
        assert INT32.unpack(base.recvall(raw, 4))[0] == base.RPC_TRACKER_MAGIC_AUTH
        raw.sendall(frame([TrackerCode.PUT, "gpu", [9, "gpu:0.5"], None]))
        assert closed_by_peer(raw, 10)
        raw.close()
        with rpc.connect_tracker(HOST, tracker.port, auth_key=KEY) as session:
            assert "gpu" not in session.summary()["queue_info"]
        legitimate_round_trip(tracker.port, auth_key=KEY)
        # A keyed RPC server registers with the key; a client gets it through the tracker.
        key = fresh_key()
        with rpc.Server(port=0, key=key, auth_key=KEY, tracker_addr=(HOST, tracker.port)):
            with rpc.connect_tracker(HOST, tracker.port, auth_key=KEY) as session:
                wait_until(
                    lambda: session.summary()["queue_info"].get(key, {}).get("free"),
                    "the server to register",
                )
                remote = session.request(key)
                assert remote.get_function("rpc.test.addone")(1) == 2


def test_a_match_key_on_offer_cannot_be_taken_by_another_connection():
    with rpc.Tracker(port=0, silent=True) as tracker:
        key = fresh_key()
        victim, attacker = opened(tracker.port), opened(tracker.port)
        matchkey = base.random_key(key)
        victim.sendall(frame([TrackerCode.PUT, key, [1111, matchkey], "10.0.0.1"]))
        assert base.recvjson(victim) == TrackerCode.SUCCESS
        attacker.sendall(frame([TrackerCode.PUT, key, [6666, matchkey], "10.6.6.6"]))
        assert base.recvjson(attacker) == TrackerCode.FAIL
        with rpc.connect_tracker(HOST, tracker.port) as client:
            reply = client._call([TrackerCode.REQUEST, key, "", 1])
        assert reply == [TrackerCode.SUCCESS, ["10.0.0.1", 1111, matchkey]]
        victim.close()
        attacker.close()


def test_bad_limits_and_keys_are_value_errors():
    with pytest.raises(ValueError, match="idle_timeout"):
        rpc.Tracker(port=0, limits=TrackerLimits(idle_timeout=0))
    with pytest.raises(ValueError, match="auth_key ' ' is empty"):
        rpc.Tracker(port=0, auth_key=" ")
    with pytest.raises(ValueError, match="auth_key '' is empty"):
        rpc.connect_tracker(HOST, 9, auth_key="")
    assert os.environ.get("TVM_RPC_KEY") is None or os.environ["TVM_RPC_KEY"].strip()
