"""How the RPC server starts sessions, with real processes and loopback sockets: sessions forked
from a pre-started zygote (its set-up reaches every session; a dead zygote is replaced), a
server registered with a tracker offered only while free, and a server behind a proxy
(``is_proxy`` / ``--through-proxy``)."""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import tvm
from rpc_helpers import DEADLINE, HOST, command_line, fresh_key, wait_until
from tvm import rpc

pytestmark = pytest.mark.rpc

SECRET = "s3cret"


# -- what the servers' zygotes run (module level: pickled by reference) ------------------------


def record_setup() -> None:
    """``server_init_callback``: registers functions that report where a session runs."""
    zygote = os.getpid()

    @tvm.ffi.register_func("test.sessions.pids", override=True)
    def _pids() -> str:
        return f"{os.getpid()},{os.getppid()},{zygote}"

    @tvm.ffi.register_func("test.sessions.global_symbol", override=True)
    def _global_symbol(name: str) -> int:
        return int(getattr(ctypes.CDLL(None), name)())


def failing_setup() -> None:
    """``server_init_callback`` that fails."""
    raise LookupError("no device for this server")


# -- helpers ------------------------------------------------------------------------------------


def pids(sess: rpc.RPCSession) -> tuple[int, int, int]:
    """The session's process, its parent, and the process that ran the set-up."""
    pid, parent, zygote = (
        int(p) for p in str(sess.get_function("test.sessions.pids")()).split(",")
    )
    return pid, parent, zygote


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def gone(pid: int) -> bool:
    """Whether process ``pid`` ended (exited, or a zombie nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def in_thread(target: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Runs ``target`` on a daemon thread; the list gets its result or exception."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(target())
        except Exception as err:
            outcome.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def queue_of(tracker: rpc.TrackerSession, key: str) -> dict[str, int]:
    return tracker.summary()["queue_info"].get(key, {"free": 0, "pending": 0})


# -- the zygote ---------------------------------------------------------------------------------


def test_sessions_are_forked_from_a_prestarted_zygote():
    with rpc.Server(port=0, server_init_callback=record_setup) as srv:
        assert srv.proc is not None and srv.proc.pid is not None
        first, second = rpc.connect(HOST, srv.port), rpc.connect(HOST, srv.port)
        one, two = pids(first), pids(second)
        # Each session is a child of the process that ran the set-up, which the worker started.
        assert one[1] == one[2] == two[1] == two[2]
        assert len({one[0], two[0], one[2]}) == 3
        assert parent_of(one[2]) == srv.proc.pid
        assert Path(f"/proc/{one[2]}/comm").read_text().strip() == "tvm-rpc-zygote"
        assert Path(f"/proc/{one[0]}/comm").read_text().strip() == "tvm-rpc-session"
        first.close()
        second.close()
        # Sessions one after another are each a child of the same zygote (connect time is a
        # benchmark row of benches/python/bench_rpc.py, not a test).
        for _ in range(5):
            sess = rpc.connect(HOST, srv.port)
            assert sess.get_function("rpc.test.addone")(1) == 2
            assert pids(sess)[2] == one[2]
            sess.close()


def test_the_init_callback_and_libraries_reach_every_session(compile_c):
    library = compile_c("int tvm_sessions_answer(void) { return 42; }\n", name="libanswer.so")
    with rpc.Server(port=0, server_init_callback=record_setup, load_library=[library]) as srv:
        for _ in range(2):
            sess = rpc.connect(HOST, srv.port)
            assert sess.get_function("test.sessions.global_symbol")("tvm_sessions_answer") == 42
            sess.close()


def test_a_failing_setup_fails_the_constructor(tmp_path):
    with pytest.raises(LookupError, match="no device for this server"):
        rpc.Server(port=0, server_init_callback=failing_setup)
    missing = tmp_path / "libmissing.so"
    with pytest.raises(OSError, match=r"libmissing\.so"):
        rpc.Server(port=0, load_library=str(missing))
    with pytest.raises(ModuleNotFoundError, match="no_such_module_here"):
        rpc.Server(port=0, init_modules=["no_such_module_here"])
    with pytest.raises(TypeError, match="init_modules must be a sequence"):
        rpc.Server(port=0, init_modules="tvm")


def test_a_dead_session_or_zygote_ends_only_what_it_served(capfd):
    with rpc.Server(port=0, server_init_callback=record_setup) as srv:
        doomed, survivor = rpc.connect(HOST, srv.port), rpc.connect(HOST, srv.port)
        session, _, zygote = pids(doomed)
        os.kill(session, signal.SIGKILL)
        with pytest.raises(tvm.error.RPCError):
            doomed.get_function("rpc.test.addone")(1)
        survivor_pid, _, survivor_zygote = pids(survivor)
        assert survivor_zygote == zygote
        assert pids(rpc.connect(HOST, srv.port))[1] == zygote
        # The zygote dies: its sessions end with it, and a new one serves the next clients.
        os.kill(zygote, signal.SIGKILL)
        wait_until(lambda: gone(survivor_pid), "the zygote's sessions to end with it")
        with pytest.raises(tvm.error.RPCError):
            survivor.get_function("rpc.test.addone")(1)

        def served_by_a_new_zygote() -> int | None:
            try:
                return pids(rpc.connect(HOST, srv.port))[2]
            except tvm.error.RPCError:
                return None

        assert wait_until(served_by_a_new_zygote, "a new zygote") != zygote
    err = capfd.readouterr().err
    ended = [line for line in err.splitlines() if "session zygote (pid" in line]
    assert len(ended) == 1, err
    assert f"(pid {zygote}) ended (killed by SIGKILL)" in ended[0]
    assert "refused" not in err  # clients wait for the new zygote
    assert "session 1 was killed by SIGKILL" in err
    assert "Traceback" not in err


def test_terminate_ends_the_zygote_and_its_sessions():
    srv = rpc.Server(port=0, server_init_callback=record_setup)
    sess = rpc.connect(HOST, srv.port)
    session, zygote, _ = pids(sess)
    srv.terminate()
    wait_until(lambda: gone(session) and gone(zygote), "the session and the zygote to end")
    with pytest.raises(tvm.error.RPCError):
        sess.get_function("rpc.test.addone")(1)


# -- with a tracker -----------------------------------------------------------------------------


def test_with_a_tracker_a_busy_server_is_not_offered():
    key = fresh_key()
    with rpc.Tracker(port=0, silent=True) as tracker:
        with rpc.Server(port=0, key=key, tracker_addr=(HOST, tracker.port)):
            observer = rpc.connect_tracker(HOST, tracker.port)
            wait_until(lambda: queue_of(observer, key)["free"] == 1, "the server to register")
            first = rpc.connect_tracker(HOST, tracker.port).request(key)
            assert first.get_function("rpc.test.addone")(1) == 2
            assert queue_of(observer, key) == {"free": 0, "pending": 0}
            # A second client waits in the tracker's queue while the session runs.
            thread, outcome = in_thread(
                lambda: rpc.connect_tracker(HOST, tracker.port).request(key)
            )
            wait_until(lambda: queue_of(observer, key)["pending"] == 1, "the request to queue")
            time.sleep(0.5)
            assert not outcome and queue_of(observer, key) == {"free": 0, "pending": 1}
            first.close()
            thread.join(DEADLINE)
            second = outcome[0]
            assert isinstance(second, rpc.RPCSession), outcome
            assert second.get_function("rpc.test.addone")(2) == 3
            assert queue_of(observer, key) == {"free": 0, "pending": 0}
            second.close()
            wait_until(lambda: queue_of(observer, key)["free"] == 1, "the server to be free")


# -- behind a proxy -----------------------------------------------------------------------------


def test_a_server_behind_a_proxy_serves_one_session_at_a_time():
    key = fresh_key()
    with rpc.Proxy(port=0, silent=True) as proxy:
        with rpc.Server(
            HOST, proxy.port, key=key, is_proxy=True, server_init_callback=record_setup
        ) as srv:
            assert srv.port == proxy.port
            first = rpc.connect(HOST, proxy.port, key=key)
            assert first.get_function("rpc.test.addone")(1) == 2
            assert pids(first)[1] == pids(first)[2]  # forked by the zygote
            thread, outcome = in_thread(lambda: rpc.connect(HOST, proxy.port, key=key))
            time.sleep(1.0)
            assert not outcome  # waits at the proxy until the first session ends
            first.close()
            thread.join(DEADLINE)
            second = outcome[0]
            assert isinstance(second, rpc.RPCSession), outcome
            assert second.get_function("rpc.test.addone")(2) == 3
            second.close()
            limited = rpc.connect(HOST, proxy.port, key=key, session_timeout=1)
            with pytest.raises(tvm.error.RPCSessionTimeoutError):
                limited.get_function("rpc.test.sleep")(10)


def test_keys_are_proven_between_a_server_and_its_proxy(capfd):
    key = fresh_key()
    with rpc.Proxy(port=0, silent=True, auth_key=SECRET) as proxy:
        with rpc.Server(HOST, proxy.port, key=key, is_proxy=True, auth_key=SECRET):
            sess = rpc.connect(HOST, proxy.port, key=key, auth_key=SECRET)
            assert sess.get_function("rpc.test.addone")(1) == 2
            sess.close()
        with pytest.raises(RuntimeError, match="failed to prove that it holds"):
            rpc.Server(HOST, proxy.port, key=key, is_proxy=True, auth_key="guess")
        # Without a key, the proxy's refusal arrives once registered: one log line per try.
        with rpc.Server(HOST, proxy.port, key=key, is_proxy=True):
            wait_until(
                lambda: "requires an authentication key" in capfd.readouterr().err,
                "the refusal to be logged",
            )


def test_servers_behind_a_proxy_with_a_tracker():
    key = fresh_key()
    with (
        rpc.Tracker(port=0, silent=True) as tracker,
        rpc.Proxy(port=0, silent=True, tracker_addr=(HOST, tracker.port)) as proxy,
        rpc.Server(HOST, proxy.port, key=key, is_proxy=True, tracker_addr=(HOST, tracker.port)),
        rpc.Server(HOST, proxy.port, key=key, is_proxy=True),
    ):
        observer = rpc.connect_tracker(HOST, tracker.port)
        wait_until(lambda: queue_of(observer, key)["free"] == 2, "both servers to be offered")
        sessions = [rpc.connect_tracker(HOST, tracker.port).request(key) for _ in range(2)]
        assert [s.get_function("rpc.test.addone")(i) for i, s in enumerate(sessions)] == [1, 2]
        assert queue_of(observer, key)["free"] == 0
        for sess in sessions:
            sess.close()
        wait_until(lambda: queue_of(observer, key)["free"] == 2, "both servers to be free")


def test_bad_proxy_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="with is_proxy, port is the proxy's port"):
        rpc.Server(port=0, is_proxy=True)
    with rpc.Proxy(port=0, silent=True) as proxy:
        closed = proxy.port
    with pytest.raises(ConnectionError, match=f"cannot reach the RPC proxy at {HOST}:{closed}"):
        rpc.Server(HOST, closed, is_proxy=True)


def test_through_proxy_command_line():
    key = fresh_key()
    server = ["tvm.exec.rpc_server", "--through-proxy", "--host", HOST]
    with rpc.Proxy(port=0, silent=True) as proxy:
        with command_line(*server, "--port", str(proxy.port), "--key", key, "--silent") as proc:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert re.search(rf"listening on {HOST}:{proxy.port} \(through the proxy", line), line
            sess = rpc.connect(HOST, proxy.port, key=key)
            assert sess.get_function("rpc.test.addone")(1) == 2
            sess.close()
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=DEADLINE)
        assert proc.returncode == 0, err
        assert "Traceback" not in out + err
    bad = subprocess.run(
        [sys.executable, "-m", *server, "--port", "0"],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert bad.returncode == 2 and "--through-proxy needs the proxy's --port" in bad.stderr
