"""``tvm.rpc``: run functions and move tensors on other machines or processes.

Data plane: :func:`connect` opens an :class:`RPCSession` with a :class:`Server` (each client
session runs in a process of its own); :class:`LocalSession` is this machine as a session and
:class:`PopenSession` a child process over pipes. Control plane: :class:`Tracker` (hands RPC
servers out to clients by key), :class:`TrackerSession` and :func:`connect_tracker` (its
client), and :class:`Proxy` (pairs servers and clients that cannot reach each other). ``base``
holds the protocol constants and socket helpers they share.

Warning: an RPC server lets its clients write files and run code on its machine. Run servers,
trackers and proxies on trusted networks only (they bind to the loopback address by default),
and give servers a shared secret (``auth_key`` or ``TVM_RPC_KEY``) beyond one machine.
"""

from __future__ import annotations

# Data plane: sessions and the server.
from . import aio, base
from .client import LocalSession, PopenSession, RPCSession, connect

# Control plane: tracker and proxy.
from .proxy import Proxy
from .server import Server
from .tracker import Tracker
from .tracker_client import TrackerSession, connect_tracker

__all__ = [
    "LocalSession",
    "PopenSession",
    "Proxy",
    "RPCSession",
    "Server",
    "Tracker",
    "TrackerSession",
    "aio",
    "base",
    "connect",
    "connect_tracker",
]
