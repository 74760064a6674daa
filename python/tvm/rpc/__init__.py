"""``tvm.rpc``: run code on remote devices.

The control plane lives here in pure Python: :class:`Tracker` (a registry that hands RPC
servers out to clients by key), :class:`TrackerSession` and :func:`connect_tracker` (its client),
and :class:`Proxy` (pairs servers and clients that cannot reach each other). ``base`` holds the
protocol constants and socket helpers they share.

Warning: an RPC server lets its clients write files and run code on its machine. Run servers,
trackers and proxies on trusted networks only; they bind to the loopback address by default.
"""

from __future__ import annotations

from . import base

# Control plane: tracker and proxy.
from .proxy import Proxy
from .tracker import Tracker
from .tracker_client import TrackerSession, connect_tracker

# Data plane (sessions, server): imported below this line.

__all__ = [
    "Proxy",
    "Tracker",
    "TrackerSession",
    "base",
    "connect_tracker",
]
