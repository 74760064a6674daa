"""Wire compatibility with Apache TVM 0.27 (protocol 0.8.0), both ways, with its own server and
client running in a virtual environment of their own (tests/python/apache_tvm_env.py)."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import struct
import subprocess
import textwrap
import threading
import time

import numpy as np
import pytest

import apache_tvm_env
import tvm
from tvm import rpc


@pytest.fixture(scope="module")
def apache_python():
    return apache_tvm_env.apache_tvm_python()


@pytest.fixture(scope="module")
def apache_server(apache_python):
    """Apache TVM's RPC server on a free loopback port (it serves one client at a time: every
    test closes its session)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        start = probe.getsockname()[1]
    proc = subprocess.Popen(
        [
            str(apache_python),
            "-m",
            "tvm.exec.rpc_server",
            "--host",
            "127.0.0.1",
            "--port",
            str(start),
            "--port-end",
            str(start + 200),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=apache_tvm_env.apache_tvm_environ(),
        start_new_session=True,
    )
    ports: queue.Queue[int] = queue.Queue()

    def drain() -> None:
        # Reads the log to the end, so that the server never blocks on a full pipe.
        for line in proc.stderr:
            match = re.search(r"bind to 127\.0\.0\.1:(\d+)", line)
            if match:
                ports.put(int(match.group(1)))

    drainer = threading.Thread(target=drain, daemon=True)
    drainer.start()
    try:
        port = ports.get(timeout=120)
    except queue.Empty:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("Apache TVM's RPC server did not report its port")
    # It reports the port between bind and listen: wait until it accepts.
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            break
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    yield port
    # Its worker processes outlive a signal to the server alone: end the whole group.
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    drainer.join(timeout=10)
    proc.stderr.close()


def test_our_client_with_apache_server(apache_server):
    with rpc.connect("127.0.0.1", apache_server) as sess:
        _exercise_apache_server(sess)


def _exercise_apache_server(sess):
    assert sess.get_function("rpc.test.addone")(41) == 42
    assert sess.get_function("rpc.test.strcat")("a", 3) == "a:3"
    data = np.arange(64, dtype="float32").reshape(8, 8)
    remote = tvm.runtime.tensor(data, sess.cpu())
    np.testing.assert_array_equal(remote.numpy(), data)
    sess.upload(b"payload", "f.bin")
    assert sess.download("f.bin") == b"payload"


def test_apache_errors_arrive_as_rpc_errors_with_the_message(apache_server):
    with rpc.connect("127.0.0.1", apache_server) as sess:
        with pytest.raises(tvm.error.RPCError, match="boom"):
            sess.get_function("rpc.test.except")("boom")
        # The session goes on after a remote error.
        assert sess.get_function("rpc.test.addone")(1) == 2


def test_callbacks_to_a_0_8_0_server_are_refused_clearly(apache_server):
    with rpc.connect("127.0.0.1", apache_server) as sess:
        addone = sess.get_function("rpc.test.addone")
        with pytest.raises(TypeError, match=r"protocol 0\.8\.0"):
            addone(lambda x: x)


def _run_apache_client(apache_python, port: int, body: str) -> str:
    script = "import numpy as np\nfrom tvm import rpc\nimport tvm\n" + textwrap.dedent(body)
    result = subprocess.run(
        [str(apache_python), "-c", script.replace("PORT", str(port))],
        capture_output=True,
        text=True,
        timeout=120,
        env=apache_tvm_env.apache_tvm_environ(),
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_apache_client_with_our_server(apache_python):
    with rpc.Server(port=0) as server:
        out = _run_apache_client(
            apache_python,
            server.port,
            """
            sess = rpc.connect("127.0.0.1", PORT)
            print(sess.get_function("rpc.test.addone")(41))
            a = tvm.runtime.tensor(np.arange(6, dtype="float32"), sess.cpu())
            print(a.numpy().tolist())
            try:
                sess.get_function("rpc.test.except")("boom")
            except Exception as err:
                print(type(err).__name__, "boom" in str(err))
            sess.upload(bytearray(b"abc"), "y.bin")
            print(sess.download("y.bin"))
            """,
        )
    assert out.splitlines() == [
        "42",
        "[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]",
        "RPCError True",
        "b'abc'",
    ]


def test_a_server_with_a_secret_refuses_apache_clients(apache_python):
    with rpc.Server(port=0, auth_key="s3cret") as server:
        out = _run_apache_client(
            apache_python,
            server.port,
            """
            try:
                rpc.connect("127.0.0.1", PORT)
                print("connected")
            except Exception as err:
                print("refused", "cannot find server that matches key" in str(err))
            """,
        )
    assert out.strip() == "refused True"


def test_a_protocol_version_mismatch_names_both_versions():
    with rpc.Server(port=0) as server, socket.create_connection(("127.0.0.1", server.port)) as s:
        key = b"client:"
        s.sendall(struct.pack("<ii", 0xFF271, len(key)) + key)
        code, length = struct.unpack("<ii", s.recv(8))
        assert code == 0xFF271
        s.recv(length)
        body = struct.pack("<iQ", 2, 5) + b"0.7.0" + struct.pack("<i", 0)
        s.sendall(struct.pack("<Q", len(body)) + body)
        (size,) = struct.unpack("<Q", s.recv(8))
        reply = b""
        while len(reply) < size:
            reply += s.recv(size - len(reply))
    text = reply.decode("utf-8", "replace")
    assert "server protocol=0.8.0" in text and "client protocol=0.7.0" in text
