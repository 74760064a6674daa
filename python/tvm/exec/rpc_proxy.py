"""Start an RPC proxy: ``python -m tvm.exec.rpc_proxy [--host H] [--port P] [--port-end E]
[--web-port W] [--tracker HOST:PORT] [--timeout-client S] [--timeout-server S] [--silent]``.
Prints the bound addresses (the web side's first, with ``--web-port``) and runs until SIGINT or
SIGTERM."""

from __future__ import annotations

import argparse
import sys

from ..rpc.proxy import Proxy
from ._service import run_until_signal


def _tracker_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def main(argv: list[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m tvm.exec.rpc_proxy", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind to")
    parser.add_argument("--port", type=int, default=9090, help="first port to try (0: any)")
    parser.add_argument("--port-end", type=int, default=9199, help="end of the port range")
    parser.add_argument(
        "--web-port",
        type=int,
        default=0,
        help="first port to try for the web side (browser pages over websockets; 0: none)",
    )
    parser.add_argument(
        "--tracker", type=_tracker_address, default=None, help="register with this tracker"
    )
    parser.add_argument(
        "--timeout-client", type=float, default=600, help="seconds a client waits for a server"
    )
    parser.add_argument(
        "--timeout-server", type=float, default=600, help="seconds a server waits for a client"
    )
    parser.add_argument("--silent", action="store_true", help="log warnings only")
    args = parser.parse_args(argv)
    proxy = Proxy(
        args.host,
        port=args.port,
        port_end=args.port_end,
        timeout_client=args.timeout_client,
        timeout_server=args.timeout_server,
        tracker_addr=args.tracker,
        web_port=args.web_port,
        silent=args.silent,
    )
    if proxy.web_port:
        where = f"{args.host}:{proxy.web_port}"
        print(
            f"RPC proxy web side on http://{where}/ (pages connect to ws://{where}/ws)", flush=True
        )
    return run_until_signal(proxy, "RPC proxy", args.host, proxy.port)


if __name__ == "__main__":
    sys.exit(main())
