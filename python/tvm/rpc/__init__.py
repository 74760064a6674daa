"""Remote procedure calls: run functions and move tensors on other machines or processes.

A server runs code its clients send; start it on the loopback address (the default) or a
trusted network only.
"""

from .client import LocalSession, PopenSession, RPCSession, connect
from .server import Server

__all__ = ["LocalSession", "PopenSession", "RPCSession", "Server", "connect"]
