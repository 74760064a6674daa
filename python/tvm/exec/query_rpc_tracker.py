"""Print the state of an RPC tracker: ``python -m tvm.exec.query_rpc_tracker [--host H]
[--port P]`` (defaults: ``$TVM_TRACKER_HOST`` or 127.0.0.1, ``$TVM_TRACKER_PORT`` or 9190)."""

from __future__ import annotations

import argparse
import os
import sys

from ..rpc.tracker_client import connect_tracker


def main(argv: list[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m tvm.exec.query_rpc_tracker", description=__doc__
    )
    parser.add_argument("--host", default=None, help="the tracker's address")
    parser.add_argument("--port", type=int, default=None, help="the tracker's port")
    args = parser.parse_args(argv)
    host = args.host or os.environ.get("TVM_TRACKER_HOST", "127.0.0.1")
    port = args.port if args.port is not None else int(os.environ.get("TVM_TRACKER_PORT", "9190"))
    with connect_tracker(host, port) as session:
        text = session.text_summary()
    print(f"Tracker address {host}:{port}\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
