"""The proxy under abuse and with a shared secret, on loopback: silent connections, pool
floods, unauthenticated registrations, wrong keys, and the keyed pairing (Python peers and this
runtime's client). Each test checks that legitimate peers are still paired."""

from __future__ import annotations

import secrets
import socket
import struct
import subprocess
import sys
import time

import pytest

import tvm
from rpc_helpers import HOST, INT32, closed_by_peer, fresh_key
from tvm import rpc
from tvm.rpc import base
from tvm.rpc.base import OWN_PROTOCOL_OPTION
from tvm.rpc.proxy import ProxyLimits

KEY = "pr0xy-secret"


def hello(key: str) -> bytes:
    raw = key.encode()
    return struct.pack("<ii", base.RPC_MAGIC, len(raw)) + raw


def read_code(sock: socket.socket) -> int:
    return INT32.unpack(base.recvall(sock, 4))[0]


def read_key(sock: socket.socket) -> str:
    (length,) = INT32.unpack(base.recvall(sock, 4))
    return base.recvall(sock, length).decode()


def plain_pair(port: int) -> None:
    """An unkeyed server and client meet and exchange bytes."""
    key = fresh_key()
    server = socket.create_connection((HOST, port), timeout=10)
    server.sendall(hello(f"server:{key}"))
    client = socket.create_connection((HOST, port), timeout=10)
    client.sendall(hello(f"client:{key}"))
    for sock, other in ((server, "client"), (client, "server")):
        assert read_code(sock) == base.RPC_CODE_SUCCESS
        assert read_key(sock).startswith(f"{other}:{key}")
    client.sendall(b"ping")
    assert base.recvall(server, 4) == b"ping"
    server.close()
    client.close()


def keyed_peer(port: int, role: str, key: str, auth_key: str) -> socket.socket:
    """A peer that completes the keyed handshake with the proxy (checking its proof)."""
    sock = socket.create_connection((HOST, port), timeout=10)
    client_nonce = secrets.token_hex(16)
    sock.sendall(hello(f"{role}:{key} {OWN_PROTOCOL_OPTION} -cnonce={client_nonce}"))
    assert read_code(sock) == base.RPC_MAGIC
    options = dict(o[1:].split("=", 1) for o in read_key(sock).split()[1:] if "=" in o)
    expected = base.auth_proof(auth_key, "tvm-rpc-server-proof", client_nonce, options["nonce"])
    if options.get("proof") != expected:
        sock.close()
        raise PermissionError("the proxy failed to prove the key")
    answer = base.auth_proof(auth_key, "tvm-rpc-client-proof", client_nonce, options["nonce"])
    sock.sendall(bytes.fromhex(answer))
    return sock


def test_silent_connections_are_closed_at_the_handshake_deadline(capfd):
    with rpc.Proxy(port=0, silent=True, limits=ProxyLimits(handshake_timeout=1.0)) as proxy:
        silent = [socket.create_connection((HOST, proxy.port)) for _ in range(20)]
        slow = socket.create_connection((HOST, proxy.port))
        start, closed = time.monotonic(), False
        for byte in hello("server:dribble"):
            try:
                slow.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            if closed_by_peer(slow, 0.2):
                closed = True
                break
        assert closed and time.monotonic() - start < 4
        for sock in silent:
            assert closed_by_peer(sock, 3)
            sock.close()
        slow.close()
        plain_pair(proxy.port)
    err = capfd.readouterr().err
    assert "Traceback" not in err
    assert err.count("no handshake within 1 s") == 21, err


def test_waiting_pools_and_connections_are_bounded(capfd):
    limits = ProxyLimits(max_waiting=3, max_connections=8)
    with rpc.Proxy(port=0, silent=True, limits=limits) as proxy:
        waiting = []
        for _ in range(3):
            sock = socket.create_connection((HOST, proxy.port), timeout=10)
            sock.sendall(hello(f"server:{fresh_key()}"))
            waiting.append(sock)
        time.sleep(0.3)
        extra = socket.create_connection((HOST, proxy.port), timeout=10)
        extra.sendall(hello(f"server:{fresh_key()}"))
        assert read_code(extra) == base.RPC_CODE_BUSY
        extra.close()
        # Beyond max_connections, connections are closed at accept.
        crowd = [socket.create_connection((HOST, proxy.port)) for _ in range(10)]
        time.sleep(0.3)
        assert sum(closed_by_peer(sock, 0.5) for sock in crowd) >= 5
        for sock in crowd + waiting:
            sock.close()
        time.sleep(0.3)
        plain_pair(proxy.port)
    err = capfd.readouterr().err
    assert "Traceback" not in err
    assert "are waiting" in err and "connections are open" in err


def test_a_keyed_proxy_refuses_peers_that_cannot_prove_the_key(monkeypatch):
    monkeypatch.delenv("TVM_RPC_KEY", raising=False)
    with rpc.Proxy(port=0, silent=True, auth_key=KEY) as proxy:
        # An unauthenticated registration (Apache TVM's server): refused, never pooled.
        raw = socket.create_connection((HOST, proxy.port), timeout=10)
        raw.sendall(hello("server:gpu"))
        assert read_code(raw) == base.RPC_CODE_MISMATCH
        raw.close()
        # Ours without the key: told that a key is required.
        keyless = socket.create_connection((HOST, proxy.port), timeout=10)
        keyless.sendall(hello(f"server:gpu {OWN_PROTOCOL_OPTION}"))
        assert read_code(keyless) == base.RPC_MAGIC
        assert "-auth=required" in read_key(keyless)
        assert closed_by_peer(keyless, 5)
        keyless.close()
        # A wrong key: the proxy's proof does not match, and the proxy refuses ours.
        with pytest.raises(PermissionError):
            keyed_peer(proxy.port, "server", "gpu", "guess")
        # This runtime's client with a wrong key refuses the proxy (Rust checks its proof).
        with pytest.raises(tvm.error.RPCError, match="failed to prove"):
            rpc.connect(HOST, proxy.port, "gpu", auth_key="guess")
        # Legitimate keyed peers are paired: the server learns the client's key.
        key = fresh_key()
        server = keyed_peer(proxy.port, "server", key, KEY)
        client = keyed_peer(proxy.port, "client", key, KEY)
        assert read_code(client) == base.RPC_MAGIC
        assert read_code(server) == base.RPC_MAGIC
        assert read_key(server).startswith(f"client:{key}")
        client.sendall(b"ping")
        assert base.recvall(server, 4) == b"ping"
        server.close()
        client.close()


_KEYED_SERVER = """
import sys
sys.path.insert(0, sys.argv[3])
from test_rpc_proxy_abuse import keyed_peer, read_code, read_key
from tvm.rpc import base
server = keyed_peer(int(sys.argv[1]), "server", sys.argv[2], sys.argv[4])
print("registered", flush=True)
server.settimeout(30)
assert read_code(server) == base.RPC_MAGIC
print(read_key(server), flush=True)
print(len(base.recvall(server, 8)), flush=True)
"""


def test_this_runtimes_keyed_client_pairs_through_a_keyed_proxy(monkeypatch):
    monkeypatch.delenv("TVM_RPC_KEY", raising=False)
    tests_dir = __file__.rsplit("/", 1)[0]
    with rpc.Proxy(port=0, silent=True, auth_key=KEY) as proxy:
        key = fresh_key()
        server = subprocess.Popen(
            [sys.executable, "-c", _KEYED_SERVER, str(proxy.port), key, tests_dir, KEY],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            assert server.stdout.readline().strip() == "registered"
            # The fake server leaves after the first packet header, so the session fails at
            # kInitServer: what matters is that the keyed handshake got through the proxy.
            with pytest.raises(tvm.error.RPCError, match="closed"):
                rpc.connect(HOST, proxy.port, key, auth_key=KEY)
            out, _ = server.communicate(timeout=30)
        finally:
            server.kill()
            server.wait()
        client_key, header = out.split("\n")[:2]
        assert client_key.startswith(f"client:{key} ") and "-cnonce=" in client_key
        assert header == "8"
