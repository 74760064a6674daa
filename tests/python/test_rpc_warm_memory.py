"""The RPC server's warm memory and spare sessions, with real processes and loopback sockets:
a session is served by a process forked ahead of its connection; its large host allocations come
from shared memory the zygote keeps resident, zeroed between sessions and replaced after a
session that died with data in it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tvm
from rpc_helpers import HOST, descendants, wait_until
from tvm import rpc

pytestmark = pytest.mark.rpc

MIB = 1 << 20


def warm_setup() -> None:
    """``server_init_callback``: registers what the tests ask a session about its memory."""

    @tvm.ffi.register_func("test.warm.where", override=True)
    def _where(tensor: tvm.runtime.Tensor) -> str:
        """``pid,address,perms`` of ``tensor``'s data in this session process."""
        address = tensor.data_ptr
        for line in Path("/proc/self/maps").read_text().splitlines():
            span, perms = line.split()[:2]
            start, end = (int(x, 16) for x in span.split("-"))
            if start <= address < end:
                return f"{os.getpid()},{address},{perms}"
        raise LookupError(f"{address:#x} is not mapped")


def where(sess: rpc.RPCSession, tensor: tvm.runtime.Tensor) -> tuple[int, int, str]:
    pid, address, perms = str(sess.get_function("test.warm.where")(tensor)).split(",")
    return int(pid), int(address), perms


def upload(sess: rpc.RPCSession, nbytes: int, byte: int) -> tvm.runtime.Tensor:
    return tvm.runtime.tensor(np.full(nbytes, byte, np.uint8), sess.cpu())


def empty(sess: rpc.RPCSession, nbytes: int) -> tvm.runtime.Tensor:
    return tvm.runtime.empty((nbytes,), "uint8", sess.cpu())


def name_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except FileNotFoundError:
        return ""


def spares(zygote: int) -> list[int] | None:
    """The zygote's children named as spares (None while there is none)."""
    return [p for p in descendants(zygote) if name_of(p) == "tvm-rpc-spare"] or None


def served_again(port: int) -> rpc.RPCSession:
    """A new session, once the server took one again (after a session was killed)."""

    def attempt() -> rpc.RPCSession | None:
        try:
            return rpc.connect(HOST, port)
        except tvm.error.RPCError:
            return None

    return wait_until(attempt, "a new session")


def session_with_the_slab(port: int, nbytes: int) -> tuple[rpc.RPCSession, tvm.runtime.Tensor]:
    """A new session and an empty tensor of ``nbytes`` in its slab: once the zygote reaped the
    session that held the slab before, and handed the slab to the next session process."""

    def attempt() -> tuple[rpc.RPCSession, tvm.runtime.Tensor] | None:
        sess = served_again(port)
        tensor = empty(sess, nbytes)
        if where(sess, tensor)[2] == "rw-s":
            return sess, tensor
        sess.close()
        return None

    return wait_until(attempt, "a session with the slab")


def test_a_session_is_served_by_a_process_forked_before_it_connected():
    with rpc.Server(port=0, server_init_callback=warm_setup, warm_memory=0) as srv:
        assert srv.proc is not None
        first = rpc.connect(HOST, srv.port)
        session = where(first, empty(first, MIB))[0]
        zygote = int(Path(f"/proc/{session}/stat").read_text().rsplit(")", 1)[1].split()[1])
        first.close()
        wait_until(lambda: session not in descendants(zygote), "the session to end")
        # A fork is named after its parent until it renames itself: wait for the name.
        (spare,) = wait_until(lambda: spares(zygote), "a spare")
        second = rpc.connect(HOST, srv.port)
        assert where(second, empty(second, MIB))[0] == spare
        assert name_of(spare) == "tvm-rpc-session"
        assert len(wait_until(lambda: spares(zygote), "the next spare")) == 1
        second.close()


def test_large_allocations_use_warm_memory_zeroed_between_sessions():
    with rpc.Server(port=0, server_init_callback=warm_setup, warm_memory=16 * MIB) as srv:
        first = rpc.connect(HOST, srv.port)
        small = upload(first, MIB, 0xAB)
        large = upload(first, 8 * MIB, 0xAB)
        assert where(first, small)[2].endswith("p"), "under 2 MiB: the allocator's own memory"
        _, address, perms = where(first, large)
        assert perms == "rw-s", "the slab: shared memory of the zygote's"
        first.close()

        second, reused = session_with_the_slab(srv.port, 8 * MIB)
        assert where(second, reused)[1] == address, "the same block, kept resident"
        assert not reused.numpy().any(), "the first session's bytes were zeroed"
        # While this session holds the slab, another one gets memory of its own.
        third = rpc.connect(HOST, srv.port)
        assert where(third, upload(third, 8 * MIB, 1))[2] == "rw-p"
        # A request larger than what is left of the slab falls back the same way.
        kept = [upload(second, n * MIB, n) for n in (32, 8, 4)]
        assert [where(second, t)[2] for t in kept] == ["rw-p", "rw-s", "rw-p"]
        del kept[1]
        assert where(second, upload(second, 4 * MIB, 4))[2] == "rw-s", "freed: taken again"
        second.close()
        third.close()


def test_a_session_that_dies_leaves_none_of_its_data_behind():
    with rpc.Server(port=0, server_init_callback=warm_setup, warm_memory=8 * MIB) as srv:
        doomed = rpc.connect(HOST, srv.port)
        pid, _, perms = where(doomed, upload(doomed, 8 * MIB, 0xCD))
        assert perms == "rw-s"
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(tvm.error.RPCError):
            empty(doomed, MIB)

        after, fresh = session_with_the_slab(srv.port, 8 * MIB)
        assert not fresh.numpy().any()
        after.close()


def test_warm_memory_is_a_byte_count():
    for bad in (-1, 1.5, "512M", True, 1 << 48):
        with pytest.raises(ValueError, match=f"warm_memory must be a byte count.*{bad!r}"):
            rpc.Server(port=0, warm_memory=bad)
    with rpc.Server(port=0, server_init_callback=warm_setup, warm_memory=0) as srv:
        sess = rpc.connect(HOST, srv.port)
        assert where(sess, upload(sess, 8 * MIB, 5))[2] == "rw-p"
        sess.close()


def test_the_command_line_takes_warm_memory_in_mib():
    result = subprocess.run(
        [sys.executable, "-m", "tvm.exec.rpc_server", "--port", "0", "--warm-memory", "-1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--warm-memory takes MiB (0 or more), got -1" in result.stderr


def test_a_zygote_that_cannot_reserve_warm_memory_runs_without(capsys):
    from tvm.rpc._zygote_process import _Natives

    natives = _Natives()
    natives.reserve_warm_memory(0)
    assert capsys.readouterr().err == ""
    # More than any address space: the reservation fails, and the zygote says so and goes on.
    natives.reserve_warm_memory(1 << 62)
    assert "RPC session zygote: no warm memory:" in capsys.readouterr().err


def test_the_session_program_refuses_other_arguments(capsys):
    from tvm.exec.rpc_session import main

    assert main([]) == 2
    assert main(["not-a-descriptor"]) == 2
    assert capsys.readouterr().err.count("usage: python -m tvm.exec.rpc_session CHANNEL_FD") == 2
    done = subprocess.run(
        [sys.executable, "-m", "tvm.exec.rpc_session", "1", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "usage: python -m tvm.exec.rpc_session CHANNEL_FD" in done.stderr


def test_exit_statuses_in_words():
    from tvm.rpc._zygote import _reraised, describe

    assert describe(3) == "exit code 3"
    assert describe(-9) == "killed by SIGKILL"
    assert describe(-99) == "killed by signal 99"
    assert str(_reraised(b"not a pickle", "the traceback")).endswith("the traceback")
    assert isinstance(_reraised(None, "text"), RuntimeError)


def test_the_command_line_refuses_an_empty_key_and_an_absent_proxy():
    command = [sys.executable, "-m", "tvm.exec.rpc_server", "--port", "0"]
    blank = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TVM_RPC_KEY": " "},
    )
    assert blank.returncode == 2
    assert "TVM_RPC_KEY" in blank.stderr
    # A port nothing listens on: the registration with the proxy fails, in one line.
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        closed = probe.getsockname()[1]
    absent = subprocess.run(
        [*command[:3], "--through-proxy", "--port", str(closed), "--key", "board"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert absent.returncode == 1
    assert f"cannot register with the RPC proxy at 127.0.0.1:{closed}" in absent.stderr
