"""What the RPC control-plane tests share: the address, the polling deadline, the frame
integer, fresh device keys, and the process and memory probes of the attack tests."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tvm.rpc import base

HOST = "127.0.0.1"
DEADLINE = 30.0
INT32 = struct.Struct("<i")

_KEYS = itertools.count()


def wait_until(condition: Callable[[], Any], what: str, timeout: float = DEADLINE) -> Any:
    """Polls ``condition`` until it returns a true value (returned), failing after ``timeout``."""
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def fresh_key() -> str:
    """A device key no other test uses (tests share trackers and proxies)."""
    return f"dev{next(_KEYS)}-{os.getpid()}"


def _children_by_parent() -> dict[int, list[int]]:
    table: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        table.setdefault(int(fields[1]), []).append(int(entry))
    return table


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (from /proc)."""
    table = _children_by_parent()
    found, stack = [], [pid]
    while stack:
        for child in table.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def rss_mib(pids: list[int]) -> float:
    """Resident memory of ``pids`` together, in MiB."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


def closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    """Whether the peer closes ``sock`` within ``timeout`` s (what it sends is read and
    dropped; a reset counts as closed)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except OSError:
        pass
    return True


class RawConnection:
    """A loopback connection that drives a tracker or proxy by hand: ``greeting`` is sent
    first."""

    def __init__(self, port: int, greeting: bytes) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=DEADLINE)
        self.sock.sendall(greeting)

    def closed_by_peer(self) -> bool:
        """Whether the other side closes this connection (within :data:`DEADLINE`)."""
        return closed_by_peer(self.sock, DEADLINE)

    def close(self) -> None:
        self.sock.close()


@contextlib.contextmanager
def command_line(module: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """Runs ``python -m <module> args`` with its output piped as text; kills it if it still runs
    when the block ends."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def stop_cleanly(proc: subprocess.Popen[str], sig: signal.Signals = signal.SIGTERM) -> None:
    """Sends ``sig`` to a command line and checks that it ends with status 0 and no traceback."""
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 0, err
    assert "Traceback" not in out + err


def handshake(key: str, magic: int = base.RPC_MAGIC) -> bytes:
    """The data-plane handshake request: the magic (``RPC_MAGIC`` unless given), then the key
    with its length."""
    raw = key.encode("utf-8")
    return INT32.pack(magic) + INT32.pack(len(raw)) + raw
