"""RPC with real processes on loopback: a server in a worker process, a session process per
client, functions, tensors, files, errors and chains."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

import tvm
from rpc_helpers import wait_until
from tvm import rpc
from tvm.rpc import base


@pytest.fixture(scope="module")
def server():
    srv = rpc.Server(port=0)
    yield srv
    srv.terminate()


@pytest.fixture
def remote(server):
    sess = rpc.connect("127.0.0.1", server.port)
    yield sess
    sess.close()


def test_server_reports_its_real_bound_port(server):
    assert server.host == "127.0.0.1"
    with socket.create_connection(("127.0.0.1", server.port), timeout=5):
        pass


def test_remote_functions_are_functions(remote):
    addone = remote.get_function("rpc.test.addone")
    assert isinstance(addone, tvm.ffi.Function)
    assert addone(41) == 42
    assert remote.get_function("rpc.test.strcat")("x", 7) == "x:7"
    with pytest.raises(AttributeError, match=r"rpc\.test\.nothing"):
        remote.get_function("rpc.test.nothing")


def test_remote_errors_keep_their_class(remote):
    with pytest.raises(ValueError, match="boom"):
        remote.get_function("rpc.test.except")("boom")
    # The session survives an error.
    assert remote.get_function("rpc.test.addone")(1) == 2


def test_tensors_round_trip_on_a_remote_device(remote):
    dev = remote.cpu()
    assert dev.device_type >= 128
    assert "remote[" in repr(dev)
    data = np.arange(24, dtype="float32").reshape(4, 6)
    remote_tensor = tvm.runtime.tensor(data, dev)
    assert remote_tensor.device == dev
    np.testing.assert_array_equal(remote_tensor.numpy(), data)
    strided = data[:, ::2]
    back = tvm.runtime.tensor(strided, dev).numpy()
    np.testing.assert_array_equal(back, strided)


def test_files_upload_download_list_remove(remote, tmp_path):
    local = tmp_path / "blob.bin"
    local.write_bytes(bytes(range(256)) * 10)
    seen = []
    remote.upload(str(local), progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (2560, 2560)
    remote.upload(b"abc", "other.txt")
    assert remote.listdir() == ["blob.bin", "other.txt"]
    assert remote.download("blob.bin") == local.read_bytes()
    remote.remove("other.txt")
    assert remote.listdir() == ["blob.bin"]
    with pytest.raises(ValueError, match="inside the server's work directory"):
        remote.download("../../etc/passwd")
    with pytest.raises(ValueError, match="upload of bytes needs a target"):
        remote.upload(b"x")


def test_a_wrong_key_is_refused():
    with rpc.Server(port=0, key="secret") as srv:
        with pytest.raises(tvm.error.RPCError, match=r"key=\"other\""):
            rpc.connect("127.0.0.1", srv.port, key="other")
        sess = rpc.connect("127.0.0.1", srv.port, key="secret")
        assert sess.get_function("rpc.test.addone")(0) == 1


def test_chain_through_a_middle_server_across_three_processes():
    with rpc.Server(port=0, key="far") as far, rpc.Server(port=0) as near:
        sess = rpc.connect(
            "127.0.0.1",
            near.port,
            session_constructor_args=["rpc.Connect", "127.0.0.1", far.port, "far", False],
        )
        assert sess.get_function("rpc.test.addone")(9) == 10
        data = np.linspace(0, 1, 1000, dtype="float32")
        np.testing.assert_array_equal(tvm.runtime.tensor(data, sess.cpu()).numpy(), data)
        timer = sess._sess.time_evaluator("rpc.test.addone", sess.cpu(), repeat=2)
        assert len(timer(1).results) == 2
        # A local function passed through the middle server is called back from the far one.
        assert sess.get_function("rpc.test.call_back")(lambda a, b: a * b, 6, 7) == 42

        def refuse(value: int) -> None:
            raise KeyError(f"no entry {value}")

        with pytest.raises(KeyError, match="no entry 5"):
            sess.get_function("rpc.test.call_back")(refuse, 5)
        assert sess.get_function("rpc.test.addone")(1) == 2  # the chain still serves


def test_local_session_runs_the_same_code():
    sess = rpc.LocalSession()
    data = np.arange(5, dtype="int32")
    np.testing.assert_array_equal(tvm.runtime.tensor(data, sess.cpu()).numpy(), data)


def test_a_closed_session_fails_clearly(server):
    sess = rpc.connect("127.0.0.1", server.port)
    addone = sess.get_function("rpc.test.addone")
    sess.close()
    with pytest.raises(tvm.error.RPCError, match="closed"):
        addone(1)


def test_connect_refuses_bad_arguments():
    with pytest.raises(TypeError, match="session_constructor_args"):
        rpc.connect("127.0.0.1", 1, session_constructor_args="rpc.Connect")
    with pytest.raises(tvm.error.RPCError, match="cannot connect"):
        rpc.connect("127.0.0.1", 1)


def test_command_line_server_serves_and_stops_on_sigterm():
    proc = subprocess.Popen(
        [sys.executable, "-m", "tvm.exec.rpc_server", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("RPC server listening on 127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1])
        assert rpc.connect("127.0.0.1", port).get_function("rpc.test.addone")(1) == 2
    finally:
        proc.terminate()
        code = proc.wait(timeout=20)
        proc.stdout.close()
    assert code == 0


def test_command_line_server_registers_with_a_tracker():
    with rpc.Tracker(port=0) as tracker:
        address = f"127.0.0.1:{tracker.port}"
        command = [sys.executable, "-m", "tvm.exec.rpc_server", "--port", "0", "--silent"]
        proc = subprocess.Popen([*command, "--tracker", address, "--key", "board"])
        try:
            client = rpc.connect_tracker("127.0.0.1", tracker.port)
            wait_until(lambda: _free_servers(client, "board") == 1, "the server to register")
            assert client.request("board").get_function("rpc.test.addone")(4) == 5
            client.close()
        finally:
            proc.terminate()
            assert proc.wait(timeout=20) == 0
    bad = subprocess.run([*command, "--tracker", "nowhere"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--tracker takes HOST:PORT, got 'nowhere'" in bad.stderr


def test_shared_secret_from_argument_or_environment(monkeypatch):
    with rpc.Server(port=0, auth_key="s3cret") as srv:
        sess = rpc.connect("127.0.0.1", srv.port, auth_key="s3cret")
        assert sess.get_function("rpc.test.addone")(1) == 2
        with pytest.raises(tvm.error.RPCError, match="failed to prove that it holds"):
            rpc.connect("127.0.0.1", srv.port, auth_key="guess")
        monkeypatch.delenv("TVM_RPC_KEY", raising=False)
        with pytest.raises(tvm.error.RPCError, match="requires an authentication key"):
            rpc.connect("127.0.0.1", srv.port)
        monkeypatch.setenv("TVM_RPC_KEY", "s3cret")
        assert rpc.connect("127.0.0.1", srv.port).get_function("rpc.test.addone")(2) == 3


def test_session_timeout_raises_and_ends_the_session(server):
    sess = rpc.connect("127.0.0.1", server.port, session_timeout=1)
    sleep = sess.get_function("rpc.test.sleep")
    with pytest.raises(tvm.error.RPCSessionTimeoutError, match="session has expired"):
        sleep(10)


def test_popen_session_over_pipes():
    sess = rpc.PopenSession()
    assert sess.get_function("rpc.test.addone")(5) == 6
    data = np.arange(10, dtype="float64")
    np.testing.assert_array_equal(tvm.runtime.tensor(data, sess.cpu()).numpy(), data)
    with pytest.raises(RuntimeError, match="not executable"):
        rpc.PopenSession("/nonexistent/server.minrpc")


def _processes_with_marker(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as file:
                if marker.encode() in file.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def test_exit_with_live_sessions_prints_nothing_and_leaves_no_process():
    marker = f"TVM_RPC_EXIT_TEST={uuid.uuid4().hex}"
    script = (
        "import tvm.rpc as rpc\n"
        "srv = rpc.Server(port=0)\n"
        "sess = rpc.connect('127.0.0.1', srv.port)\n"
        "pipe = rpc.PopenSession()\n"
        "assert sess.get_function('rpc.test.addone')(1) == 2\n"
        "assert pipe.get_function('rpc.test.addone')(1) == 2\n"
        "print(srv.port)\n"
    )
    env = dict(os.environ)
    name, value = marker.split("=")
    env[name] = value
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    port = int(result.stdout)
    deadline = time.monotonic() + 10
    while _processes_with_marker(value) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_with_marker(value) == []
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_tracker_hands_out_servers_by_key_and_queues():
    with rpc.Tracker(port=0) as tracker:
        with rpc.Server(port=0, key="gpu", tracker_addr=("127.0.0.1", tracker.port)):
            client = rpc.connect_tracker("127.0.0.1", tracker.port)
            deadline = time.monotonic() + 30
            while client.summary()["queue_info"].get("gpu", {}).get("free", 0) < 1:
                assert time.monotonic() < deadline, client.summary()
                time.sleep(0.02)
            first = client.request("gpu")
            assert first.get_function("rpc.test.addone")(1) == 2
            # Busy while the session is open: the tracker offers the server to nobody else.
            assert client.summary()["queue_info"]["gpu"] == {"free": 0, "pending": 0}
            first.close()
            # The session over, the server offers itself again and the next client is served.
            second = client.request("gpu")
            assert second.get_function("rpc.test.addone")(2) == 3
            assert "gpu" in client.text_summary()


def _free_servers(client, key: str) -> int:
    return client.summary()["queue_info"].get(key, {}).get("free", 0)


def test_a_key_taken_but_unused_is_renewed_and_a_lost_tracker_is_rejoined():
    tracker = rpc.Tracker(port=0)
    port = tracker.port
    try:
        addr = ("127.0.0.1", port)
        with rpc.Server(port=0, key="npu", tracker_addr=addr, matchkey_timeout=0.3) as server:
            client = rpc.connect_tracker(*addr)
            wait_until(lambda: _free_servers(client, "npu") == 1, "the server to register")
            # A client takes the key from the tracker and never connects.
            taken = client._call([base.TrackerCode.REQUEST, "npu", "", 1])
            assert taken[1][1] == server.port
            # The server notices and offers a new key: the next client is served.
            sess = client.request("npu")
            assert sess.get_function("rpc.test.addone")(1) == 2
            sess.close()
            client.close()
            # The tracker goes away and a new one comes up at the same address.
            tracker.terminate()
            tracker = rpc.Tracker(port=port, port_end=port + 1)
            client = rpc.connect_tracker(*addr)
            wait_until(lambda: _free_servers(client, "npu") == 1, "the server to register again")
            assert client.request("npu").get_function("rpc.test.addone")(2) == 3
            client.close()
        with pytest.raises(ValueError, match="matchkey_timeout must be positive"):
            rpc.Server(port=0, tracker_addr=addr, matchkey_timeout=0)
    finally:
        tracker.terminate()


@pytest.fixture
def init_module(tmp_path, monkeypatch):
    """Writes a Python module that session processes can import (``init_modules``)."""

    def write(name: str, source: str) -> str:
        (tmp_path / f"{name}.py").write_text(source)
        path = os.environ.get("PYTHONPATH", "")
        monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{path}")
        return name

    return write


def test_coroutine_functions_are_served_and_remote_calls_awaited(init_module):
    module = init_module(
        "rpc_async_funcs",
        "import asyncio\n"
        "from tvm.rpc.aio import register_async_func\n"
        "@register_async_func('test.async_add')\n"
        "async def _add(x, y):\n"
        "    await asyncio.sleep(0.01)\n"
        "    return x + y\n"
        "@register_async_func('test.async_fail')\n"
        "async def _fail(x):\n"
        "    await asyncio.sleep(0)\n"
        "    raise KeyError(x)\n",
    )
    with rpc.Server(port=0, init_modules=[module]) as srv:
        sess = rpc.connect("127.0.0.1", srv.port)
        assert sess.get_function("test.async_add")(2, 3) == 5
        with pytest.raises(KeyError, match="nope"):
            sess.get_function("test.async_fail")("nope")

        async def both():
            return await asyncio.gather(
                sess.async_call("test.async_add", 1, 1), rpc.aio.call(lambda: 7)
            )

        assert asyncio.run(both()) == [2, 7]
        sess.close()
    with pytest.raises(TypeError, match="async def"):
        rpc.aio.register_async_func("test.not_async", lambda: 1)


def test_large_files_move_in_chunks_with_progress(remote, tmp_path):
    blob = os.urandom(9 << 20)
    local = tmp_path / "big.bin"
    local.write_bytes(blob)
    sent = []
    remote.upload(str(local), progress=lambda done, total: sent.append((done, total)))
    assert sent[0] == (0, len(blob)) and sent[-1] == (len(blob), len(blob))
    assert len(sent) >= 4 and [d for d, _ in sent] == sorted(d for d, _ in sent)
    received = []
    assert remote.download("big.bin", progress=lambda d, t: received.append(d)) == blob
    assert received[-1] == len(blob) and len(received) >= 4
    # A progress bar when tqdm is installed, nothing otherwise: the transfer is the same.
    remote.upload(blob[:1000], "small.bin", progress=True)
    assert remote.download("small.bin", progress=True) == blob[:1000]


def test_a_crashing_kernel_ends_only_its_session(init_module):
    module = init_module(
        "rpc_crash_funcs",
        "import ctypes\n"
        "from tvm.ffi import register_func\n"
        "@register_func('test.segfault')\n"
        "def _segfault():\n"
        "    ctypes.string_at(0)\n",
    )
    with rpc.Server(port=0, init_modules=[module]) as srv:
        doomed = rpc.connect("127.0.0.1", srv.port)
        survivor = rpc.connect("127.0.0.1", srv.port)
        with pytest.raises(tvm.error.RPCError, match="closed"):
            doomed.get_function("test.segfault")()
        with pytest.raises(tvm.error.RPCError, match="closed"):
            doomed.get_function("rpc.test.addone")(1)
        assert survivor.get_function("rpc.test.addone")(1) == 2
        assert rpc.connect("127.0.0.1", srv.port).get_function("rpc.test.addone")(2) == 3


def test_an_uploaded_kernel_runs_on_remote_tensors(remote, compile_c):
    source = (Path(__file__).resolve().parents[2] / "cpp-abi/examples/add_one_c.c").read_text()
    library = compile_c(source, name="libadd_one_c.so")
    remote.upload(str(library))
    module = remote.load_module("libadd_one_c.so")
    assert module.kind == "rpc"
    dev = remote.cpu()
    x = tvm.runtime.tensor(np.arange(5, dtype="float32"), dev)
    y = tvm.runtime.empty((5,), "float32", dev)
    module["add_one"](x, y)
    np.testing.assert_array_equal(y.numpy(), np.arange(5, dtype="float32") + 1)
    assert module["concat"]("ab", "cd") == "abcd"
    with pytest.raises(AttributeError, match="no_such_function"):
        module["no_such_function"]


def test_session_devices_and_attributes(remote):
    index = remote._tbl_index
    expected = {
        "cpu": 1,
        "cuda": 2,
        "cl": 4,
        "vulkan": 7,
        "metal": 8,
        "rocm": 10,
        "ext_dev": 12,
        "webgpu": 15,
    }
    for name, code in expected.items():
        dev = getattr(remote, name)(0)
        assert dev.device_type == code + 128 * (index + 1), name
    assert remote.cpu().exist
    assert not remote.cuda().exist
    with pytest.raises(ValueError, match="already a remote device"):
        remote.device(remote.cpu().device_type)


def test_time_evaluator_times_kernels_where_they_run(remote, compile_c):
    source = (Path(__file__).resolve().parents[2] / "cpp-abi/examples/add_one_c.c").read_text()
    library = compile_c(source, name="libtimed.so")
    remote.upload(str(library))
    module = remote.load_module("libtimed.so")
    dev = remote.cpu()
    x = tvm.runtime.tensor(np.arange(1024, dtype="float32"), dev)
    y = tvm.runtime.empty((1024,), "float32", dev)
    timer = module.time_evaluator(
        "add_one", dev, number=3, repeat=4, f_preproc="cache_flush_cpu_non_first_arg"
    )
    result = timer(x, y)
    assert isinstance(result, tvm.runtime.BenchmarkResult)
    assert len(result.results) == 4
    assert all(0 < r < 1 for r in result.results)
    assert result.min <= result.median <= result.max
    assert "mean (ms)" in str(result) and "results=" in repr(result)
    np.testing.assert_array_equal(y.numpy(), np.arange(1024, dtype="float32") + 1)
    # The same kernel loaded here is timed here.
    local = tvm.runtime.load_module(library).time_evaluator("add_one", tvm.runtime.cpu(), repeat=2)
    x_here, y_here = tvm.runtime.tensor(np.ones(8, "float32")), tvm.runtime.empty((8,), "float32")
    assert len(local(x_here, y_here).results) == 2
    # Global functions of the remote are timed through the session.
    remote_global = remote._sess.time_evaluator("rpc.test.addone", dev, repeat=2, min_repeat_ms=1)
    assert all(r > 0 for r in remote_global(1).results)
    with pytest.raises(AttributeError, match="no_such_kernel"):
        module.time_evaluator("no_such_kernel", dev)
    with pytest.raises(ValueError, match="number must be at least 1"):
        module.time_evaluator("add_one", dev, number=0)
    other = rpc.LocalSession()
    with pytest.raises(ValueError, match="another RPC session"):
        module.time_evaluator("add_one", other.cpu())


def test_download_linked_module_links_objects_on_the_server(remote, tmp_path):
    import tarfile

    source = tmp_path / "twice.c"
    source.write_text(
        "#include <tvm/ffi/c_api.h>\n"
        "TVM_FFI_DLL int __tvm_ffi_twice(void* h, const TVMFFIAny* a, int n, TVMFFIAny* r) {\n"
        "  (void)h; (void)n; r->type_index = kTVMFFIInt; r->zero_padding = 0;\n"
        "  r->v_int64 = 2 * a[0].v_int64; return 0; }\n"
    )
    obj = tmp_path / "twice.o"
    include = Path(__file__).resolve().parents[2] / "cpp-abi/include"
    subprocess.run(["gcc", "-c", "-fPIC", f"-I{include}", "-o", str(obj), str(source)], check=True)
    tvm.support.tar.tar(str(tmp_path / "twice.tar"), [str(obj)])
    with tarfile.open(tmp_path / "empty.tar", "w"):
        pass
    for name in ("twice.o", "twice.tar", "empty.tar"):
        remote.upload(str(tmp_path / name))
    for name in ("twice.o", "twice.tar"):
        linked = tmp_path / f"linked-{name}.so"
        linked.write_bytes(remote.download_linked_module(name))
        assert tvm.runtime.load_module(linked)["twice"](21) == 42
    remote.upload(str(linked), "again.so")
    assert remote.download_linked_module("again.so") == linked.read_bytes()
    remote.upload(b"text", "notes.txt")
    with pytest.raises(ValueError, match=r"cannot link 'notes.txt'"):
        remote.download_linked_module("notes.txt")
    with pytest.raises(ValueError, match="no object files"):
        remote.download_linked_module("empty.tar")
