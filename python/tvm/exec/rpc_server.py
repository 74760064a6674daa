"""Starts an RPC server: ``python -m tvm.exec.rpc_server --host 127.0.0.1 --port 9090``."""

from __future__ import annotations

import argparse
import signal
import sys


def main(argv: list[str] | None = None) -> int:
    """Binds, prints the address, and serves until interrupted (SIGINT or SIGTERM)."""
    parser = argparse.ArgumentParser(prog="python -m tvm.exec.rpc_server", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument("--port", type=int, default=9090, help="first port to try (0: any)")
    parser.add_argument("--port-end", type=int, default=9199, help="end of the port range")
    parser.add_argument("--key", default="", help="the key clients must present")
    parser.add_argument("--load-library", default=None, help="':'-separated libraries to load")
    parser.add_argument(
        "--tracker", default=None, help="register with the tracker at HOST:PORT under --key"
    )
    parser.add_argument(
        "--custom-addr", default=None, help="the address the tracker hands out for this server"
    )
    parser.add_argument("--silent", action="store_true", help="log only warnings and errors")
    args = parser.parse_args(argv)

    import logging

    from ..rpc.base import resolve_auth_key
    from ..rpc.server import TrackerRegistration, bind_socket, serve_forever

    logging.basicConfig(level=logging.WARNING if args.silent else logging.INFO)
    try:
        # The shared secret comes from TVM_RPC_KEY (never from the command line).
        auth_key = resolve_auth_key(None)
    except ValueError as err:
        parser.error(str(err))
    tracker_addr = None
    if args.tracker is not None:
        host, sep, port_text = args.tracker.rpartition(":")
        if not sep or not host or not port_text.isdigit():
            parser.error(f"--tracker takes HOST:PORT, got {args.tracker!r}")
        tracker_addr = (host, int(port_text))
    sock = bind_socket(args.host, args.port, args.port_end)
    host, port = sock.getsockname()[:2]
    tracker = None
    if tracker_addr is not None:
        tracker = TrackerRegistration(
            tracker_addr, args.key, port, args.custom_addr, auth_key=auth_key
        )
    print(f"RPC server listening on {host}:{port}", flush=True)

    def stop(signum: int, frame: object) -> None:
        sock.close()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        serve_forever(sock, args.key, args.load_library, auth_key=auth_key, tracker=tracker)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
