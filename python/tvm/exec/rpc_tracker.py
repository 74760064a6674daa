"""Start an RPC tracker: ``python -m tvm.exec.rpc_tracker [--host H] [--port P] [--port-end E]
[--silent]``. Prints the bound address and runs until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import sys

from ..rpc.tracker import Tracker
from ._service import run_until_signal


def main(argv: list[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m tvm.exec.rpc_tracker", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind to")
    parser.add_argument("--port", type=int, default=9190, help="first port to try (0: any)")
    parser.add_argument("--port-end", type=int, default=9199, help="end of the port range")
    parser.add_argument("--silent", action="store_true", help="log warnings only")
    args = parser.parse_args(argv)
    tracker = Tracker(args.host, port=args.port, port_end=args.port_end, silent=args.silent)
    return run_until_signal(tracker, "RPC tracker", args.host, tracker.port)


if __name__ == "__main__":
    sys.exit(main())
