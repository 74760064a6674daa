"""A pytest plugin for running Apache TVM's ``test_runtime_rpc.py`` (apache-tvm 0.27) as it is.

Loaded into Apache TVM's interpreter with ``-p apache_rpc_plugin`` (this directory on
``PYTHONPATH``), before the test file is collected. It always:

- treats the build flag ``USE_RPC`` as on (the pip wheel's build info lacks it, which would skip
  every RPC test);
- binds servers, trackers and proxies to loopback where the file asks for ``0.0.0.0``;
- ends, after each test, the servers, trackers and proxies it started and the ``multiprocessing``
  children the test left running (the tracker-request test's children spin until killed).

Environment variables choose which implementation serves each role (``apache``, the default, or
``ours``); ``ours`` starts a process of our package (``python -m tvm.exec.rpc_server``,
``rpc_tracker``, ``rpc_proxy``) with the interpreter ``TVM_CONFORMANCE_OURS_PYTHON`` and parses
its port from the line it prints:

- ``TVM_CONFORMANCE_SERVER``: ``tvm.rpc.Server`` (and ``tvm.rpc.server.Server``);
- ``TVM_CONFORMANCE_TRACKER``: ``tvm.rpc.tracker.Tracker``;
- ``TVM_CONFORMANCE_PROXY``: ``tvm.rpc.proxy.Proxy``.

Apache TVM's client, ``LocalSession`` and compiler are used in every case.

``TVM_CONFORMANCE_RESULTS`` names a file to which each test's outcome is appended as a JSON line
when the test ends (kept even when the run is cut short). ``TVM_CONFORMANCE_TEST_TIMEOUT`` bounds
each test (seconds, default 120): past it, the tracebacks of every thread are written to stderr
and the process exits, ending the processes of ours it started.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import functools
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time
import weakref

import pytest

ROLES = ("SERVER", "TRACKER", "PROXY")
#: Seconds a process of ours may take to print its address.
START_TIMEOUT = 60.0
LOOPBACK = "127.0.0.1"


def _side(role: str) -> str:
    side = os.environ.get(f"TVM_CONFORMANCE_{role}", "apache")
    if side not in ("apache", "ours"):
        raise pytest.UsageError(f"TVM_CONFORMANCE_{role} must be apache or ours, got {side!r}")
    return side


def _loopback(host: str | None) -> str:
    return LOOPBACK if host in (None, "", "0.0.0.0") else host


_PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl


def _die_with_parent() -> None:
    """Runs in the child before ``exec``: it is killed when this process ends, even by a
    signal (its session children end when their clients, in this process, are gone)."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _address_args(host: str, port: int, port_end: int) -> list[str]:
    return ["--host", _loopback(host), "--port", str(port), "--port-end", str(port_end)]


#: Every process of ours started so far and not yet ended (ended after each test).
_STARTED: weakref.WeakSet[_OurProcess] = weakref.WeakSet()


class _OurProcess:
    """A process of our package that prints ``<what> listening on HOST:PORT`` once it serves;
    ``terminate()`` ends it and everything it started (its own process group)."""

    what = ""
    module = ""

    def _start(self, args: list[str]) -> None:
        self.proc: subprocess.Popen[str] | None = None
        python = os.environ.get("TVM_CONFORMANCE_OURS_PYTHON")
        if not python:
            raise RuntimeError("TVM_CONFORMANCE_OURS_PYTHON names our interpreter")
        env = dict(os.environ)
        # Our interpreter finds our package in its own site (or TVM_CONFORMANCE_OURS_PYTHONPATH);
        # Apache TVM's clients hold no secret.
        env.pop("TVM_RPC_KEY", None)
        env.pop("PYTHONPATH", None)
        if os.environ.get("TVM_CONFORMANCE_OURS_PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["TVM_CONFORMANCE_OURS_PYTHONPATH"]
        self.command = [python, "-m", self.module, *args]
        proc = subprocess.Popen(
            self.command,
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        self.proc = proc
        _STARTED.add(self)
        pattern = re.compile(rf"{self.what} listening on (\S+):(\d+)")
        found: list[tuple[str, int]] = []
        ready = threading.Event()

        def drain() -> None:
            # Reads the output to the end, so that the process never blocks on a full pipe.
            assert proc.stdout is not None
            for line in proc.stdout:
                sys.stdout.write(f"[{self.what}] {line}")
                match = pattern.search(line)
                if match and not found:
                    found.append((match.group(1), int(match.group(2))))
                    ready.set()
            ready.set()

        threading.Thread(target=drain, daemon=True).start()
        ready.wait(START_TIMEOUT)
        if not found:
            self.terminate()
            raise RuntimeError(f"{' '.join(self.command)} printed no address")
        self.host, self.port = found[0]

    def terminate(self) -> None:
        """Ends the process group (SIGTERM, then SIGKILL after 5 s). Idempotent."""
        proc, self.proc = getattr(self, "proc", None), None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        # Sessions the process started may outlive it: end the rest of the group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.terminate()


class OurServer(_OurProcess):
    """``tvm.rpc.Server``'s signature, served by ``python -m tvm.exec.rpc_server`` of ours."""

    what = "RPC server"
    module = "tvm.exec.rpc_server"

    def __init__(
        self,
        host: str = "0.0.0.0",
        port: int = 9091,
        port_end: int = 9199,
        is_proxy: bool = False,
        tracker_addr: tuple[str, int] | None = None,
        key: str = "",
        load_library: str | None = None,
        custom_addr: str | None = None,
        silent: bool = False,
        no_fork: bool = False,
        server_init_callback: object = None,
        reuse_addr: bool = True,
        timeout: float | None = None,
    ) -> None:
        if server_init_callback is not None:
            raise NotImplementedError("server_init_callback cannot cross into our interpreter")
        args = _address_args(host, port, port_end)
        args += ["--key", key]
        if is_proxy:
            args.append("--through-proxy")
        if tracker_addr is not None:
            args += ["--tracker", f"{_loopback(tracker_addr[0])}:{tracker_addr[1]}"]
        if custom_addr is not None:
            args += ["--custom-addr", custom_addr]
        if load_library:
            args += ["--load-library", load_library]
        if silent:
            args.append("--silent")
        self._start(args)


class OurTracker(_OurProcess):
    """``tvm.rpc.tracker.Tracker``'s signature, served by ``python -m tvm.exec.rpc_tracker``."""

    what = "RPC tracker"
    module = "tvm.exec.rpc_tracker"

    def __init__(
        self,
        host: str = "0.0.0.0",
        port: int = 9190,
        port_end: int = 9199,
        silent: bool = False,
        reuse_addr: bool = True,
        timeout: float | None = None,
    ) -> None:
        args = _address_args(host, port, port_end)
        if silent:
            args.append("--silent")
        self._start(args)


class OurProxy(_OurProcess):
    """``tvm.rpc.proxy.Proxy``'s signature, served by ``python -m tvm.exec.rpc_proxy``."""

    what = "RPC proxy"
    module = "tvm.exec.rpc_proxy"

    def __init__(
        self,
        host: str = "0.0.0.0",
        port: int = 9091,
        port_end: int = 9199,
        web_port: int = 0,
        timeout_client: float = 600,
        timeout_server: float = 600,
        tracker_addr: tuple[str, int] | None = None,
        index_page: str | None = None,
        resource_files: list[str] | None = None,
        reuse_addr: bool = True,
        timeout: float | None = None,
    ) -> None:
        if web_port:
            raise NotImplementedError("our proxy has no websocket side")
        args = _address_args(host, port, port_end)
        args += ["--timeout-client", str(timeout_client), "--timeout-server", str(timeout_server)]
        if tracker_addr is not None:
            args += ["--tracker", f"{_loopback(tracker_addr[0])}:{tracker_addr[1]}"]
        self._start(args)


#: Apache TVM's servers, trackers and proxies started by the current test.
_APACHE_STARTED: list[object] = []


def _on_loopback(cls: type) -> None:
    """Makes Apache TVM's ``cls`` bind loopback instead of ``0.0.0.0``, and remembers each
    instance so that it is ended after the test."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):  # noqa: N807
        if args:
            args = (_loopback(args[0]), *args[1:])
        else:
            kwargs["host"] = _loopback(kwargs.get("host"))
        init(self, *args, **kwargs)
        _APACHE_STARTED.append(self)

    cls.__init__ = __init__


def _use_rpc_flag() -> None:
    from tvm.testing import env

    build_flag_enabled = env.build_flag_enabled

    @functools.wraps(build_flag_enabled)
    def patched(name, *args, **kwargs):
        return True if name == "USE_RPC" else build_flag_enabled(name, *args, **kwargs)

    env.build_flag_enabled = patched


def pytest_configure(config: pytest.Config) -> None:
    """Patches Apache TVM's package before the test file imports names from it."""
    import tvm.rpc
    import tvm.rpc.proxy
    import tvm.rpc.server
    import tvm.rpc.tracker

    _use_rpc_flag()
    if _side("SERVER") == "ours":
        tvm.rpc.Server = tvm.rpc.server.Server = OurServer
    else:
        _on_loopback(tvm.rpc.server.Server)
    if _side("TRACKER") == "ours":
        tvm.rpc.tracker.Tracker = OurTracker
    else:
        _on_loopback(tvm.rpc.tracker.Tracker)
    if _side("PROXY") == "ours":
        tvm.rpc.proxy.Proxy = OurProxy
    else:
        _on_loopback(tvm.rpc.proxy.Proxy)
    sides = ", ".join(f"{role.lower()}={_side(role)}" for role in ROLES)
    config.stash[_SIDES] = sides


_SIDES = pytest.StashKey[str]()


def pytest_report_header(config: pytest.Config) -> str:
    return f"apache_rpc_plugin: {config.stash[_SIDES]}"


def _write_result(entry: dict[str, object]) -> None:
    path = os.environ.get("TVM_CONFORMANCE_RESULTS")
    if path:
        with open(path, "a") as out:
            out.write(json.dumps(entry) + "\n")


def pytest_collection_finish(session: pytest.Session) -> None:
    _write_result({"collected": [item.name for item in session.items]})


def _test_timeout() -> float:
    return float(os.environ.get("TVM_CONFORMANCE_TEST_TIMEOUT", "120"))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    faulthandler.dump_traceback_later(_test_timeout(), exit=True)


#: The outcome of each running test so far (``error``: its set-up or tear-down failed).
_OUTCOME: dict[str, dict[str, object]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Folds the set-up, call and tear-down reports of a test into one outcome, written once
    the tear-down is reported."""
    entry = _OUTCOME.setdefault(report.nodeid, {"outcome": "passed", "duration": 0.0})
    entry["duration"] = float(entry["duration"]) + report.duration
    if report.failed and entry["outcome"] not in ("failed", "error"):
        entry["outcome"] = "failed" if report.when == "call" else "error"
        crash = getattr(report.longrepr, "reprcrash", None)
        lines = report.longreprtext.strip().splitlines() or [""]
        entry["message"] = crash.message if crash is not None else lines[-1]
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"
    if report.when == "teardown":
        del _OUTCOME[report.nodeid]
        _write_result({"name": report.nodeid.rpartition("::")[2], **entry})


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Ends what the test left running: multiprocessing children, then servers, trackers and
    proxies (ours and Apache TVM's)."""
    for child in multiprocessing.active_children():
        child.terminate()
        child.join(5)
        if child.is_alive():
            child.kill()
            child.join(5)
    while _APACHE_STARTED:
        service = _APACHE_STARTED.pop()
        with contextlib.suppress(Exception):
            service.terminate()
    for process in list(_STARTED):
        process.terminate()
    faulthandler.cancel_dump_traceback_later()
    # Give closed sockets a moment, as a fresh test process would have.
    time.sleep(0.05)
