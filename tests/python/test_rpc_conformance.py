"""Apache TVM's own RPC tests (``test_runtime_rpc.py`` of apache/tvm) driven by Apache TVM's
client against our server, tracker and proxy, side by side with Apache TVM's server
(:mod:`apache_rpc_suite`, :mod:`apache_rpc_plugin`); and the functions those tests call by name
on a server (:mod:`tvm.rpc.testing`), checked through our own client.

``.venv/bin/python tests/python/apache_rpc_suite.py`` prints the table of both runs.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import apache_rpc_suite
import apache_tvm_env
import tvm
from tvm import rpc

# -- the functions Apache TVM's clients call by name ---------------------------------------------


@pytest.fixture(scope="module")
def remote() -> Iterator[rpc.RPCSession]:
    with rpc.Server(port=0) as server:
        sess = rpc.connect("127.0.0.1", server.port)
        yield sess
        sess.close()


def test_string_and_closure_helpers(remote):
    assert str(remote.get_function("rpc.test.runtime_str_concat")("abc", "def")) == "abcdef"
    add_ten = remote.get_function("rpc.test.add_to_lhs")(10)
    assert add_ten(12) == 22
    assert add_ten(-10) == 0


def test_remote_tensor_func_checks_the_tensor_it_gets(remote):
    check = remote.get_function("rpc.test.remote_tensor_func")
    assert check(tvm.runtime.tensor(np.ones((3, 4)), remote.cpu())) is None
    with pytest.raises(Exception, match="3x4 tensor of ones"):
        check(tvm.runtime.tensor(np.zeros((3, 4)), remote.cpu()))


def test_remote_return_nd_keeps_its_tensor_alive(remote):
    make = remote.get_function("rpc.test.remote_return_nd")
    get_arr, get_elem, get_arr_elem = make("get_arr"), make("get_elem"), make("get_arr_elem")
    arr = get_arr()
    assert arr.shape == (10,) and str(arr.dtype) == "float32"
    assert np.array_equal(arr.numpy(), np.zeros(10, "float32"))
    assert get_elem(0) == 0.0
    assert get_arr_elem(arr, 9) == 0.0
    # Each name has a tensor of its own, which its closure keeps alive between calls.
    arr.copyfrom(np.arange(10, dtype="float32"))
    del arr
    assert get_arr().numpy()[7] == 7.0
    assert get_elem(7) == 0.0
    assert make("ref_count")() == 1
    with pytest.raises(Exception, match="unknown name"):
        make("nothing")


def test_shapes_made_and_read_remotely(remote):
    shape = remote.get_function("ffi.Shape")(2, 3)
    assert remote.get_function("rpc.testing.GetShapeElem")(shape, 1) == 3
    assert remote.get_function("rpc.testing.GetShapeSize")(shape) == 2


def test_echo_and_raise_error(remote):
    echo = remote.get_function("testing.echo")
    assert echo(1, 2, 3) == 1
    assert echo("xyz") == "xyz"
    assert bytes(echo(bytearray(b"123"))) == b"123"
    raise_error = remote.get_function("testing.test_raise_error")
    with pytest.raises(ValueError, match="bad value"):
        raise_error("ValueError", "bad value")
    with pytest.raises(RuntimeError, match="odd kind"):
        raise_error("NoSuchKindOfError", "odd kind")


# -- Apache TVM's test file, Apache TVM's client ----------------------------------------------

#: The file's tracker and proxy tests, once per test (not per device key).
TRACKER_AND_PROXY = "(tracker or timeout_error) and not 5555"


@pytest.fixture(scope="module")
def apache_python() -> Path:
    if not apache_rpc_suite.TEST_FILE.exists():
        pytest.skip(f"{apache_rpc_suite.TEST_FILE} is not here")
    return apache_tvm_env.apache_tvm_python()


def _report(run: apache_rpc_suite.Run, record_property) -> None:
    record_property(f"{run.pairing}_passed", run.passed)
    record_property(f"{run.pairing}_total", len(run.outcomes))
    cached = ", cached" if run.cached else ""
    print(f"{run.summary()} in {run.seconds:.0f} s{cached}")
    for name in run.names("failed") + run.names("error") + run.names("lost"):
        print(f"  {run.pairing} {run.outcomes[name]}: {name}: {run.messages.get(name, '')}")


@pytest.mark.slow
def test_apache_rpc_tests_pass_on_our_server_as_on_apaches(apache_python, record_property):
    apache = apache_rpc_suite.run("apache", apache_python)
    ours = apache_rpc_suite.run("ours", apache_python)
    _report(apache, record_property)
    _report(ours, record_property)
    assert set(ours.outcomes) == set(apache.outcomes)
    regressions = {
        name: f"{ours.outcomes[name]}: {ours.messages.get(name, '')}"
        for name in apache.names("passed")
        if ours.outcomes[name] != "passed"
    }
    assert not regressions, f"pass on Apache TVM's server, not on ours: {regressions}"
    assert ours.passed >= apache.passed


@pytest.mark.slow
@pytest.mark.parametrize(
    "pairing",
    [
        pytest.param("our-tracker-proxy", id="apache_server_with_our_tracker_and_proxy"),
        pytest.param("all-ours", id="our_server_tracker_and_proxy"),
    ],
)
def test_tracker_and_proxy_tests_with_apache_client(pairing, apache_python, record_property):
    run = apache_rpc_suite.run(pairing, apache_python, TRACKER_AND_PROXY)
    _report(run, record_property)
    assert len(run.outcomes) == 5
    assert run.passed == 5, run.messages


APACHE_PROXY_AND_SERVER = """
import sys
from tvm import rpc
from tvm.rpc.proxy import Proxy

proxy = Proxy("127.0.0.1", port=9300, port_end=9500)
server = rpc.Server(host="127.0.0.1", port=proxy.port, is_proxy=True, key="apache")
print("proxy", proxy.port, flush=True)
sys.stdin.read()  # until the test closes it
server.terminate()
proxy.terminate()
"""


#: Threads reading the output of the processes a test started.
_READERS: list[threading.Thread] = []


def _end(*procs: subprocess.Popen[str] | None) -> None:
    """Ends the processes' groups, then closes their pipes once their readers are done."""
    started = [proc for proc in procs if proc is not None]
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    while _READERS:
        _READERS.pop().join(10)
    for proc in started:
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def _line_matching(proc: subprocess.Popen[str], pattern: str, timeout: float) -> re.Match[str]:
    """Reads ``proc``'s output until a line matches ``pattern`` (failing after ``timeout`` s),
    then drains the rest on a thread so that the process never blocks on a full pipe."""
    found: queue.Queue[re.Match[str] | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            match = re.search(pattern, line)
            if match:
                found.put(match)
        found.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    _READERS.append(reader)
    try:
        match = found.get(timeout=timeout)
    except queue.Empty:
        match = None
    if match is None:
        pytest.fail(f"{proc.args!r} printed no line matching {pattern!r} in {timeout} s")
    return match


@pytest.mark.slow
def test_our_client_through_apache_proxy_to_apache_and_our_servers(apache_python):
    apache = subprocess.Popen(
        [str(apache_python), "-c", APACHE_PROXY_AND_SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=apache_tvm_env.apache_tvm_environ(),
        start_new_session=True,
    )
    ours = None
    try:
        port = int(_line_matching(apache, r"^proxy (\d+)", 60).group(1))
        ours = subprocess.Popen(
            [
                *(sys.executable, "-m", "tvm.exec.rpc_server", "--host", "127.0.0.1"),
                *("--port", str(port), "--through-proxy", "--key", "ours"),
            ],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        _line_matching(ours, r"RPC server listening on", 60)
        for key, value in (("apache", 1), ("ours", 41)):
            # The client presents ``client:<key>``, which the proxy pairs with ``server:<key>``.
            sess = rpc.connect("127.0.0.1", port, key=key, handshake_timeout=30)
            assert sess.get_function("rpc.test.addone")(value) == value + 1
            data = np.arange(12, dtype="float32").reshape(3, 4)
            remote_data = tvm.runtime.tensor(data, sess.cpu())
            assert np.array_equal(remote_data.numpy(), data)
            del remote_data
            sess.close()
    finally:
        _end(ours, apache)
