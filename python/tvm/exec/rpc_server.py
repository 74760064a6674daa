"""Starts an RPC server: ``python -m tvm.exec.rpc_server --host 127.0.0.1 --port 9090``.

With ``--through-proxy``, ``--host`` and ``--port`` are those of an RPC proxy: the server
connects out to it and serves the sessions it pairs with ``--key``."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable


def main(argv: list[str] | None = None) -> int:
    """Starts the sessions' zygote, binds (or registers with the proxy), prints the address,
    and serves until interrupted (SIGINT or SIGTERM)."""
    from ..rpc.server import DEFAULT_WARM_MEMORY

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
    parser.add_argument(
        "--through-proxy",
        action="store_true",
        help="--host:--port is an RPC proxy: serve the sessions it pairs with --key "
        "(--tracker is ignored: the proxy registers with its tracker)",
    )
    parser.add_argument(
        "--warm-memory",
        type=int,
        default=DEFAULT_WARM_MEMORY >> 20,
        metavar="MIB",
        help="host memory kept resident for the sessions' large allocations, MiB "
        "(default %(default)s; 0: none)",
    )
    parser.add_argument("--silent", action="store_true", help="log only warnings and errors")
    args = parser.parse_args(argv)

    import logging

    from ..rpc._through_proxy import ProxyServing, open_registration
    from ..rpc.base import resolve_auth_key
    from ..rpc.server import TrackerRegistration, bind_socket, serve_forever, start_zygote

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
    if args.through_proxy and not 0 < args.port < 65536:
        parser.error(f"--through-proxy needs the proxy's --port, got {args.port}")
    if not 0 <= args.warm_memory < 1 << 28:
        parser.error(f"--warm-memory takes MiB (0 or more), got {args.warm_memory}")
    zygote = start_zygote(
        load_library=args.load_library, auth_key=auth_key, warm_memory=args.warm_memory << 20
    )
    # What SIGTERM ends before exiting: the listening socket, or the proxy loop.
    on_stop: list[Callable[[], object]] = []

    def stop(signum: int, frame: object) -> None:
        for end in on_stop:
            end()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        if args.through_proxy:
            addr = (args.host, args.port)
            try:
                first = open_registration(addr, args.key, auth_key)
            except (OSError, RuntimeError) as err:
                print(
                    f"cannot register with the RPC proxy at {args.host}:{args.port}: {err}",
                    file=sys.stderr,
                )
                return 1
            serving = ProxyServing(addr, args.key, auth_key, zygote)
            zygote.on_end = serving.session_ended
            on_stop.append(serving.stop)
            print(
                f"RPC server listening on {args.host}:{args.port} (through the proxy there)",
                flush=True,
            )
            serving.run(first)
            return 0
        sock = bind_socket(args.host, args.port, args.port_end)
        on_stop.append(sock.close)
        host, port = sock.getsockname()[:2]
        tracker = None
        if tracker_addr is not None:
            tracker = TrackerRegistration(
                tracker_addr, args.key, port, args.custom_addr, auth_key=auth_key
            )
        print(f"RPC server listening on {host}:{port}", flush=True)
        serve_forever(sock, args.key, auth_key=auth_key, tracker=tracker, zygote=zygote)
    except KeyboardInterrupt:
        pass
    finally:
        zygote.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
