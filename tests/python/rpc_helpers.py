"""What the RPC control-plane tests share: the address, the polling deadline, the frame
integer and fresh device keys."""

from __future__ import annotations

import itertools
import os
import struct
import time
from collections.abc import Callable
from typing import Any

import pytest

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
