"""WebGPU in the browser: headless Chromium opens the proxy's page (``tvm/rpc/web``), which
registers as an RPC server; Python clients connect through the proxy and use ``webgpu(0)`` of
the page (SwiftShader here) as they use the native WebGPU backend: copies, kernels from WGSL,
time evaluation, errors of every kind, and the bad-input list.

Every test skips when no Chromium is installed, unless ``TVM_REQUIRE_BROWSER=1`` (CI), where
that is a failure."""

from __future__ import annotations

import contextlib
import json
import os
import struct
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import kernel_blobs
import tvm
from gpu_kernel_checks import ADD_ONE
from rpc_helpers import (
    DEADLINE,
    HOST,
    INT32,
    RawConnection,
    fresh_key,
    handshake,
    wait_until,
)
from tvm import rpc
from tvm.error import RPCError
from tvm.rpc import base
from tvm.rpc.browser import HeadlessBrowser, find_chromium
from tvm.runtime import empty, tensor

pytest.importorskip("websockets")

SHADERS = Path(__file__).resolve().parents[2] / "crates" / "device-webgpu" / "tests" / "shaders"
ROW_SUM = {
    "name": "row_sum",
    "arg_types": ["handle", "handle", "int32"],
    "launch_param_tags": ["blockIdx.x", "threadIdx.x"],
}
BUSY = {
    "name": "busy",
    "arg_types": ["handle", "int32", "int32"],
    "launch_param_tags": ["blockIdx.x", "threadIdx.x"],
}

if find_chromium() is None and os.environ.get("TVM_REQUIRE_BROWSER") != "1":
    pytest.skip("no Chromium installed (apt-get install chromium)", allow_module_level=True)

pytestmark = pytest.mark.rpc

#: The first web port tried (the proxy takes the first free one of the next hundred).
WEB_PORT = 19600


@dataclass
class Page:
    """A headless browser showing the proxy's page under ``key``."""

    proxy: rpc.Proxy
    key: str
    browser: HeadlessBrowser

    def connect(self) -> rpc.RPCSession:
        try:
            return rpc.connect(HOST, self.proxy.port, key=self.key, handshake_timeout=DEADLINE)
        except Exception as err:
            raise AssertionError(f"{err}\nthe page's console:\n" + self.console()) from err

    def console(self) -> str:
        return "\n".join(self.browser.console()[-40:])

    def session_ends(self) -> list[str]:
        """The page's log lines of sessions that ended."""
        return [line for line in self.browser.console() if "session ended" in line]


@pytest.fixture(scope="module")
def proxy() -> Iterator[rpc.Proxy]:
    with rpc.Proxy(port=0, web_port=WEB_PORT, silent=True) as running:
        yield running


def open_page(proxy: rpc.Proxy) -> Page:
    key = fresh_key()
    return Page(proxy, key, HeadlessBrowser(proxy.page_url(key)))


@pytest.fixture(scope="module")
def page(proxy: rpc.Proxy) -> Iterator[Page]:
    opened = open_page(proxy)
    yield opened
    opened.browser.close()


@pytest.fixture
def remote(page: Page) -> Iterator[rpc.RPCSession]:
    """A session with the page (it registers again after each one ends)."""
    ended = len(page.session_ends())
    session = page.connect()
    yield session
    session.close()
    # The page saw the shutdown as the end of the session, not as an error.
    ends = wait_until(lambda: page.session_ends()[ended:], "the page ending the session")
    assert "the client ended the session" in ends[0], page.console()


def upload_kernel(remote: rpc.RPCSession, info: dict, source: str | None = None) -> tvm.ffi.Module:
    """Uploads a shader of ``SHADERS`` with its metadata and loads it as a module."""
    name = info["name"]
    wgsl = source if source is not None else (SHADERS / f"{name}.wgsl").read_text()
    remote.upload(wgsl.encode(), f"{name}.wgsl")
    meta = {"tvm_version": "0.1.0", "func_info": {name: info}}
    remote.upload(json.dumps(meta).encode(), f"{name}.tvm_meta.json")
    return remote.load_module(f"{name}.wgsl")


def test_the_page_serves_its_adapter_as_webgpu_0(remote: rpc.RPCSession) -> None:
    dev = remote.webgpu(0)
    assert dev.exist
    assert "swiftshader" in dev.device_name.lower()
    assert dev.max_threads_per_block >= 64
    assert dev.max_thread_dimensions.startswith("[")
    assert dev.api_version == "browser"
    assert not remote.webgpu(1).exist


@pytest.mark.parametrize("mib", [1, 16])
def test_copies_both_ways(remote: rpc.RPCSession, mib: int) -> None:
    data = np.random.default_rng(mib).standard_normal(mib << 18).astype("float32")
    x = tensor(data, remote.webgpu(0))
    np.testing.assert_array_equal(x.numpy(), data)
    # Between two tensors of the page, then back.
    y = empty(data.shape, "float32", remote.webgpu(0))
    x.copyto(y)
    np.testing.assert_array_equal(y.numpy(), data)


@pytest.mark.parametrize("count", [1, 3, 7, 13])
def test_copies_of_partial_words(remote: rpc.RPCSession, count: int) -> None:
    """WebGPU moves whole 4-byte words: the page patches the partial ones."""
    data = np.arange(200, 200 + count, dtype="uint8")
    x = tensor(data, remote.webgpu(0))
    np.testing.assert_array_equal(x.numpy(), data)
    half = np.arange(count, dtype="float16")
    np.testing.assert_array_equal(tensor(half, remote.webgpu(0)).numpy(), half)


def test_an_elementwise_kernel_agrees_with_numpy(remote: rpc.RPCSession) -> None:
    module = upload_kernel(remote, ADD_ONE)
    add_one = module.get_function("add_one")
    n = 100_000
    data = np.linspace(-3, 3, n, dtype="float32")
    a = tensor(data, remote.webgpu(0))
    b = empty((n,), "float32", remote.webgpu(0))
    add_one(a, b, n, (n + 63) // 64, 64)
    remote.webgpu(0).sync()
    np.testing.assert_array_equal(b.numpy(), data + 1)


def test_a_reduction_kernel_agrees_with_numpy(remote: rpc.RPCSession) -> None:
    module = upload_kernel(remote, ROW_SUM)
    rows, cols = 300, 1000
    data = np.random.default_rng(0).random((rows, cols), dtype="float32")
    a = tensor(data, remote.webgpu(0))
    out = empty((rows,), "float32", remote.webgpu(0))
    module.get_function("row_sum")(a, out, cols, rows, 64)
    np.testing.assert_allclose(out.numpy(), data.sum(axis=1), rtol=1e-5)


def native_webgpu_or_skip() -> tvm.ffi.Device:
    try:
        if tvm.get_global_func("runtime.webgpu.device_names")():
            return tvm.runtime.webgpu(0)
    except Exception as err:
        pytest.skip(f"no native WebGPU device: {err}")
    pytest.skip("no native WebGPU device")


def test_the_same_kernels_agree_with_the_native_backend(
    remote: rpc.RPCSession, tmp_path: Path
) -> None:
    native = native_webgpu_or_skip()
    rows, cols = 64, 777
    data = np.random.default_rng(1).standard_normal((rows, cols)).astype("float32")
    results = []
    for dev, load in [
        (remote.webgpu(0), lambda info: upload_kernel(remote, info)),
        (native, lambda info: native_module(tmp_path, info)),
    ]:
        a = tensor(data, dev)
        summed = empty((rows,), "float32", dev)
        load(ROW_SUM).get_function("row_sum")(a, summed, cols, rows, 64)
        flat = empty((rows * cols,), "float32", dev)
        load(ADD_ONE).get_function("add_one")(a, flat, rows * cols, (rows * cols + 63) // 64, 64)
        results.append((summed.numpy(), flat.numpy()))
    np.testing.assert_array_equal(results[0][1], results[1][1])
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)


def native_module(folder: Path, info: dict) -> tvm.ffi.Module:
    path = folder / f"{info['name']}.wgsl"
    path.write_text((SHADERS / path.name).read_text())
    meta = {"tvm_version": "0.1.0", "func_info": {info["name"]: info}}
    path.with_suffix(".tvm_meta.json").write_text(json.dumps(meta))
    return tvm.runtime.load_module(str(path))


def test_a_serialized_module_loads_from_bytes(remote: rpc.RPCSession) -> None:
    pairs = [(ADD_ONE, (SHADERS / "add_one.wgsl").read_bytes())]
    blob = kernel_blobs.module_bytes("webgpu", pairs, kernel_blobs.string_field)
    module = remote.get_function("ffi.Module.load_from_bytes.webgpu")(blob)
    data = np.arange(10, dtype="float32")
    a, b = tensor(data, remote.webgpu(0)), empty((10,), "float32", remote.webgpu(0))
    module.get_function("add_one")(a, b, 10, 1, 64)
    np.testing.assert_array_equal(b.numpy(), data + 1)
    # The same bytes uploaded as a .webgpu file.
    remote.upload(blob, "kernels.webgpu")
    assert remote.load_module("kernels.webgpu").get_function("add_one") is not None


def test_time_evaluator_times_a_kernel_on_the_page(remote: rpc.RPCSession) -> None:
    module = upload_kernel(remote, BUSY)
    n = 1 << 16
    x = tensor(np.arange(n, dtype="uint32"), remote.webgpu(0))
    timer = module.time_evaluator("busy", remote.webgpu(0), number=4, repeat=3)
    result = timer(x, n, 200, n // 64, 64)
    assert len(result.results) == 3
    assert all(0 < t < 10 for t in result.results), result.results
    kind = remote.get_function("webgpu.timer_kind")()
    assert kind in ("gpu-timestamps", "wall-clock")


def test_a_wgsl_compile_error_comes_back_with_its_message(remote: rpc.RPCSession) -> None:
    broken = (SHADERS / "add_one.wgsl").read_text().replace("a[i] + 1.0", "a[i] + undefined_name")
    compile_error = r"does not compile as WGSL:\n.*:\d+:\d+: .*undefined_name"
    with pytest.raises(ValueError, match=compile_error):
        upload_kernel(remote, ADD_ONE, broken)
    # The session goes on.
    assert remote.webgpu(0).exist


def test_a_binding_mismatch_is_a_clear_error(remote: rpc.RPCSession) -> None:
    # The metadata gives one tensor (binding 0) and the params block at 1; the shader binds
    # two tensors and the params at 2.
    wrong = {**ADD_ONE, "arg_types": ["handle", "int32"]}
    mismatch = "kernel `add_one`: the shader does not match the metadata"
    with pytest.raises(ValueError, match=mismatch):
        upload_kernel(remote, wrong)


def test_launch_argument_errors_name_the_argument(remote: rpc.RPCSession) -> None:
    add_one = upload_kernel(remote, ADD_ONE).get_function("add_one")
    a = tensor(np.zeros(64, "float32"), remote.webgpu(0))
    with pytest.raises(TypeError, match="takes 5 arguments"):
        add_one(a, a, 64)
    with pytest.raises(TypeError, match="argument 1 must be a tensor, got int"):
        add_one(a, 3, 64, 1, 64)
    block = r"threadIdx.x=32 does not match .*@workgroup_size \[64, 1, 1\]"
    with pytest.raises(ValueError, match=block):
        add_one(a, a, 64, 2, 32)


def test_a_device_the_page_lacks_is_a_value_error(remote: rpc.RPCSession) -> None:
    # The client asks the page whether the device exists before it allocates.
    for dev in (remote.cuda(0), remote.webgpu(1)):
        assert not dev.exist
        with pytest.raises(ValueError, match=r"device remote\[\d+\]:\w+:\d does not exist"):
            empty((4,), "float32", dev)
    # A request that names a device directly gets the page's own answer.
    module = upload_kernel(remote, ADD_ONE)
    with pytest.raises(ValueError, match=r"no device cuda\(0\); it serves webgpu\(0\)"):
        module.time_evaluator("add_one", remote.cuda(0))
    assert remote.webgpu(0).exist


def test_a_2_gib_tensor_is_refused_and_the_page_stays_up(remote: rpc.RPCSession) -> None:
    too_large = r"cannot allocate 2147483648 bytes on webgpu\(0\).*maxBufferSize"
    with pytest.raises(ValueError, match=too_large):
        empty((1 << 29,), "float32", remote.webgpu(0))
    np.testing.assert_array_equal(tensor(np.ones(4, "float32"), remote.webgpu(0)).numpy(), 1)


def test_a_page_that_sends_garbage_is_an_rpc_error_and_the_proxy_keeps_serving(
    proxy: rpc.Proxy, page: Page
) -> None:
    """A websocket peer that registers like a page, then answers the client with garbage."""
    from websockets.sync.client import connect

    key = fresh_key()
    with connect(f"ws://{HOST}:{proxy.web_port}/ws") as fake:
        fake.send(handshake(f"server:{key}"))
        client = rpc_connect_in_thread(proxy, key)
        received = b""
        while len(received) < 8:
            received += fake.recv(timeout=DEADLINE)
        assert INT32.unpack(received[:4])[0] == base.RPC_CODE_SUCCESS
        fake.send(struct.pack("<Q", 8) + b"\xff" * 64)
        outcome = client.result(DEADLINE)
    assert isinstance(outcome, RPCError), outcome
    assert "sent a malformed RPC packet: unknown packet code -1" in str(outcome)
    # The proxy and the real page still serve.
    session = page.connect()
    assert session.webgpu(0).exist
    session.close()


def rpc_connect_in_thread(proxy: rpc.Proxy, key: str) -> Future[object]:
    """``rpc.connect`` in a thread: a future of the session or the error."""

    def run() -> object:
        try:
            return rpc.connect(HOST, proxy.port, key=key, handshake_timeout=DEADLINE)
        except Exception as err:
            return err

    pool = ThreadPoolExecutor(1)
    future = pool.submit(run)
    pool.shutdown(wait=False)
    return future


def paired_raw_client(page: Page) -> RawConnection:
    """A raw TCP client of the page's key, past the proxy's pairing answer."""
    conn = RawConnection(page.proxy.port, handshake(f"client:{page.key}"))
    (code,) = INT32.unpack(base.recvall(conn.sock, 4))
    assert code == base.RPC_CODE_SUCCESS
    (length,) = INT32.unpack(base.recvall(conn.sock, 4))
    base.recvall(conn.sock, length)
    return conn


def test_a_client_that_sends_garbage_ends_only_its_own_session(page: Page) -> None:
    """Garbage to the page: it ends that session and registers again for the next client."""
    conn = paired_raw_client(page)
    try:
        conn.sock.sendall(struct.pack("<Q", 1 << 40) + b"garbage")
        assert conn.closed_by_peer()
    finally:
        conn.close()
    session = page.connect()
    back = tensor(np.arange(3, dtype="int32"), session.webgpu(0)).numpy()
    np.testing.assert_array_equal(back, [0, 1, 2])
    session.close()


def test_a_page_closed_mid_call_is_an_rpc_error_and_the_proxy_keeps_serving(
    proxy: rpc.Proxy, page: Page
) -> None:
    doomed = open_page(proxy)
    try:
        session = doomed.connect()
        module = upload_kernel(session, BUSY)
        n = 1 << 20
        x = tensor(np.arange(n, dtype="uint32"), session.webgpu(0))
        busy = module.get_function("busy")
        threading.Timer(1.0, doomed.browser.close).start()
        with pytest.raises(RPCError):
            for _ in range(1000):
                busy(x, n, 5000, n // 64, 64)
                session.webgpu(0).sync()
    finally:
        doomed.browser.close()
    other = page.connect()
    assert other.webgpu(0).exist
    other.close()


def test_a_lost_device_is_reported_and_the_page_opens_a_new_one(page: Page) -> None:
    session = page.connect()
    x = tensor(np.ones(8, "float32"), session.webgpu(0))
    session.get_function("webgpu.destroy_device")(session.webgpu(0))
    with pytest.raises(RuntimeError, match="WebGPU device was lost"):
        x.numpy()
    with pytest.raises(RuntimeError, match="WebGPU device was lost"):
        session.webgpu(0).sync()
    session.close()
    session = page.connect()
    np.testing.assert_array_equal(tensor(np.ones(8, "float32"), session.webgpu(0)).numpy(), 1)
    session.close()


def test_a_page_proves_the_key_of_a_keyed_proxy() -> None:
    secret = "browser-secret"
    with rpc.Proxy(port=0, web_port=WEB_PORT + 50, silent=True, auth_key=secret) as keyed:
        key = fresh_key()
        with HeadlessBrowser(keyed.page_url(key, auth_key=secret)) as browser:
            session = rpc.connect(HOST, keyed.port, key=key, auth_key=secret)
            np.testing.assert_array_equal(
                tensor(np.arange(4, dtype="float32"), session.webgpu(0)).numpy(), np.arange(4)
            )
            session.close()
            assert not any(secret in line for line in browser.console())
        # A page without the key, or with another, is refused with a message saying so.
        for page_key, expected in [
            (None, "the proxy requires an authentication key"),
            ("another-secret", "failed to prove that it holds the authentication key"),
        ]:
            with HeadlessBrowser(keyed.page_url(key, auth_key=page_key)) as browser:
                wait_until(
                    lambda browser=browser, expected=expected: any(
                        expected in line for line in browser.console()
                    ),
                    f"the page logging {expected!r}",
                )


def test_a_page_with_a_key_refuses_a_proxy_that_cannot_prove_it(proxy: rpc.Proxy) -> None:
    key = fresh_key()
    with HeadlessBrowser(proxy.page_url(key, auth_key="page-secret")) as browser:
        # The unkeyed proxy pools the page; the first client pairs with it, and the page,
        # finding no proof, refuses and closes.
        with pytest.raises(RPCError):
            rpc.connect(HOST, proxy.port, key=key, handshake_timeout=DEADLINE)
        wait_until(
            lambda: any("did not prove" in line for line in browser.console()),
            "the page logging its refusal",
        )


def test_page_url_checks_its_key(proxy: rpc.Proxy) -> None:
    assert proxy.page_url("a b").endswith("/?key=a%20b")
    assert proxy.page_url("k", auth_key="s/3").endswith("/?key=k#auth=s%2F3")
    with pytest.raises(ValueError, match="empty"):
        proxy.page_url("k", auth_key=" ")
    with rpc.Proxy(port=0, silent=True) as plain, pytest.raises(ValueError, match="no web side"):
        plain.page_url()


def test_launch_values_and_bindings_webgpu_refuses_are_value_errors(
    remote: rpc.RPCSession,
) -> None:
    module = upload_kernel(remote, ADD_ONE)
    add_one = module.get_function("add_one")
    x = tensor(np.zeros(64, "float32"), remote.webgpu(0))
    for grid in (0, -1, 1 << 53):
        with pytest.raises(ValueError, match=rf"blockIdx.x={grid} is outside 1..=4294967295"):
            add_one(x, x, 64, grid, 64)
    # WebGPU refuses a buffer bound twice when one binding is written: its message comes back.
    with pytest.raises(ValueError, match=r"kernel `add_one`: .*writable usage"):
        add_one(x, x, 64, 1, 64)
    nothing = empty((0,), "float32", remote.webgpu(0))
    with pytest.raises(ValueError, match="argument 0 is empty"):
        add_one(nothing, x, 0, 1, 64)
    # A time evaluation of such a launch fails at its first (checked) launch.
    timer = module.time_evaluator("add_one", remote.webgpu(0), min_repeat_ms=1)
    with pytest.raises(ValueError, match=r"blockIdx\.x=0"):
        timer(x, x, 64, 0, 64)
    np.testing.assert_array_equal(x.numpy(), 0)


def test_bad_module_files_name_the_file(remote: rpc.RPCSession) -> None:
    remote.upload((SHADERS / "add_one.wgsl").read_bytes(), "k.wgsl")
    for meta, expected in [
        ({"func_info": {"add_one": None}}, 'needs "arg_types" and "launch_param_tags"'),
        ({"func_info": {"add_one": {"arg_types": [{}]}}}, "lists of strings"),
        ({"other": 1}, 'has no "func_info" object'),
    ]:
        remote.upload(json.dumps(meta).encode(), "k.tvm_meta.json")
        with pytest.raises(ValueError, match=expected):
            remote.load_module("k.wgsl")
    remote.upload(b"\x06\x00\x00\x00\x00\x00\x00\x00webgpu" + b"\xff" * 8, "k.webgpu")
    with pytest.raises(ValueError, match="malformed webgpu module: a count of"):
        remote.load_module("k.webgpu")
    with pytest.raises(ValueError, match="must not be negative"):
        remote.get_function("tvm.rpc.server.download_range")("k.wgsl", -1, 4)
    with pytest.raises(FileNotFoundError, match=r"no uploaded file 'missing\.wgsl'"):
        remote.load_module("missing.wgsl")


def _packet(code: int, body: bytes = b"") -> bytes:
    return struct.pack("<Qi", 4 + len(body), code) + body


def test_a_client_that_sends_too_far_ahead_ends_its_session(page: Page) -> None:
    """The browser's websocket cannot make a sender wait: the page ends a session whose client
    sent more than 96 MiB it has not read, and serves the next one."""
    ended = len(page.session_ends())
    conn = paired_raw_client(page)
    try:
        version = b"0.8.0"
        init = struct.pack("<Q", len(version)) + version + struct.pack("<i", 0)
        conn.sock.sendall(_packet(2, init))
        base.recvall(conn.sock, 8 + 4 + 4 + 4)  # kReturn [None]
        # A 16 MiB allocation, read four times over without reading the replies: the page
        # waits to send them.
        nbytes = 16 << 20
        dtype = struct.pack("<BBH", 1, 8, 1)
        device = struct.pack("<iii", 6, 15, 0)
        alloc = struct.pack("<i", 4) + device + struct.pack("<iq", 1, nbytes)
        alloc += struct.pack("<iq", 1, 64) + struct.pack("<i", 5) + dtype + struct.pack("<i", 0)
        conn.sock.sendall(_packet(13, alloc))
        reply = base.recvall(conn.sock, 8 + 4 + 4 + 4 + 8)
        (handle,) = struct.unpack("<Q", reply[-8:])
        meta = struct.pack("<Qiii", handle, 15, 0, 1) + dtype + struct.pack("<qQ", nbytes, 0)
        for _ in range(4):
            conn.sock.sendall(_packet(6, meta + struct.pack("<Q", nbytes)))
        # Then requests the page cannot get to: 4 MiB names to look up, 128 MiB in all.
        name = b"x" * (4 << 20)
        lookup = _packet(9, struct.pack("<iiQ", 1, 8, len(name)) + name)
        conn.sock.settimeout(DEADLINE)
        with contextlib.suppress(OSError):
            for _ in range(32):
                conn.sock.sendall(lookup)
        ends = wait_until(lambda: page.session_ends()[ended:], "the page ending the session")
        assert "more than 100663296 bytes ahead of what the page has read" in ends[0], ends
    finally:
        conn.close()
    session = page.connect()
    assert session.webgpu(0).exist
    session.close()
