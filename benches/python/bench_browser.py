"""WebGPU in the browser against the native WebGPU backend, in one run: tensor copies of each
size both ways and kernel launches, on a headless Chromium page (SwiftShader) reached through
the proxy's websocket side, and on this process's own WebGPU device (wgpu on Mesa lavapipe).

Where the browser's time goes, measured alongside: the RPC round trip of a call that does no
work (``tvm.web.echo``: websocket messages, the proxy hop, the page's JavaScript), and the same
bytes moved to and from the page's memory without the GPU (``tvm.rpc.server.upload`` /
``download``: the websocket transfer alone, binary frames of at most 1 MiB), so that a copy's
time splits into transfer and buffer work (``writeBuffer``, ``mapAsync``).

    python benches/python/bench_browser.py [--rounds 5] [--sizes 1,16] [--json out.json]

Each figure is the median over rounds; a round times every row once, browser and native
interleaved.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import tvm
from tvm import rpc
from tvm.rpc.browser import HeadlessBrowser

SHADER = Path(__file__).resolve().parents[2] / "crates/device-webgpu/tests/shaders/add_one.wgsl"
ADD_ONE = {
    "name": "add_one",
    "arg_types": ["handle", "handle", "int32"],
    "launch_param_tags": ["blockIdx.x", "threadIdx.x"],
}
#: Launches per launch measurement, and elements of the launched kernel.
LAUNCHES = 200
LAUNCH_ELEMENTS = 1024
#: Calls per round-trip measurement.
ECHOES = 200

#: A websocket peer in Python that registers with the proxy like a page and echoes every
#: message: the proxy's websocket side without a browser.
ECHO_PEER = """
import asyncio, struct, sys
from websockets.asyncio.client import connect
async def main(port, key):
    async with connect(f"ws://127.0.0.1:{port}/ws", max_size=None, compression=None) as ws:
        greeting = f"server:{key}".encode()
        await ws.send(struct.pack("<ii", 0xFF271, len(greeting)) + greeting)
        answer = b""
        while len(answer) < 8 or len(answer) < 8 + struct.unpack("<i", answer[4:8])[0]:
            answer += await ws.recv()
        rest = answer[8 + struct.unpack("<i", answer[4:8])[0]:]
        if rest:
            await ws.send(rest)
        async for message in ws:
            await ws.send(message)
asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
"""


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def proxy_hop_round_trip(proxy: rpc.Proxy) -> float:
    """Seconds per 64-byte round trip from a TCP client through the proxy to a Python websocket
    peer that echoes it (``ECHO_PEER``), the best of 3 loops of 1,000."""
    import socket
    import struct
    import subprocess

    peer = subprocess.Popen([sys.executable, "-c", ECHO_PEER, str(proxy.web_port), "hop"])
    try:
        with socket.create_connection(("127.0.0.1", proxy.port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            greeting = b"client:hop"
            sock.sendall(struct.pack("<ii", 0xFF271, len(greeting)) + greeting)
            reader = sock.makefile("rb")
            code, length = struct.unpack("<ii", reader.read(8))
            assert code == 0xFF271, code
            reader.read(length)
            message = b"x" * 64

            def loop(count: int) -> float:
                start = time.perf_counter()
                for _ in range(count):
                    sock.sendall(message)
                    assert reader.read(64) == message
                return (time.perf_counter() - start) / count

            loop(100)
            return min(loop(1000) for _ in range(3))
    finally:
        peer.kill()
        peer.wait()


def native_module(folder: Path) -> tvm.ffi.Module:
    path = folder / "add_one.wgsl"
    path.write_text(SHADER.read_text())
    meta = {"func_info": {"add_one": ADD_ONE}}
    path.with_suffix(".tvm_meta.json").write_text(json.dumps(meta))
    return tvm.runtime.load_module(str(path))


def remote_module(remote: rpc.RPCSession) -> tvm.ffi.Module:
    remote.upload(SHADER.read_bytes(), "add_one.wgsl")
    meta = {"func_info": {"add_one": ADD_ONE}}
    remote.upload(json.dumps(meta).encode(), "add_one.tvm_meta.json")
    return remote.load_module("add_one.wgsl")


class Side:
    """One WebGPU device and its ``add_one`` kernel."""

    def __init__(self, name: str, dev: tvm.ffi.Device, add_one: tvm.ffi.Function) -> None:
        self.name = name
        self.dev = dev
        self.add_one = add_one
        self.adapter = dev.device_name

    def upload(self, data: np.ndarray) -> float:
        return timed(lambda: (tvm.runtime.tensor(data, self.dev), self.dev.sync()))

    def download(self, data: np.ndarray) -> float:
        x = tvm.runtime.tensor(data, self.dev)
        self.dev.sync()
        seconds = timed(x.numpy)
        np.testing.assert_array_equal(x.numpy(), data)
        return seconds

    def launches(self) -> float:
        """Seconds per launch of ``add_one`` on 1,024 elements, back to back, with one sync."""
        a = tvm.runtime.tensor(np.ones(LAUNCH_ELEMENTS, "float32"), self.dev)
        b = tvm.runtime.empty((LAUNCH_ELEMENTS,), "float32", self.dev)
        blocks = LAUNCH_ELEMENTS // 64

        def run() -> None:
            for _ in range(LAUNCHES):
                self.add_one(a, b, LAUNCH_ELEMENTS, blocks, 64)
            self.dev.sync()

        run()
        seconds = timed(run) / LAUNCHES
        np.testing.assert_array_equal(b.numpy(), 2)
        return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="1,16", help="copy sizes in MiB, comma-separated")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    import tempfile

    rows: dict[str, dict[str, list[float]]] = {}

    def record(row: str, side: str, value: float) -> None:
        rows.setdefault(row, {}).setdefault(side, []).append(value)

    with (
        tempfile.TemporaryDirectory() as folder,
        rpc.Proxy(port=0, web_port=19800, silent=True) as proxy,
        HeadlessBrowser(proxy.page_url("bench")) as browser,
    ):
        remote = rpc.connect("127.0.0.1", proxy.port, key="bench", handshake_timeout=60)
        sides = [
            Side("browser", remote.webgpu(0), remote_module(remote).get_function("add_one")),
            Side(
                "native", tvm.runtime.webgpu(0), native_module(Path(folder)).get_function("add_one")
            ),
        ]
        timer = remote.get_function("webgpu.timer_kind")()
        echo = remote.get_function("tvm.web.echo")
        upload = remote.get_function("tvm.rpc.server.upload")
        download = remote.get_function("tvm.rpc.server.download")
        for _ in range(args.rounds):
            for mib in sizes:
                data = np.random.default_rng(mib).random(mib << 18, dtype="float32")
                for side in sides:
                    record(f"copy to device {mib} MiB", side.name, mib / side.upload(data))
                    record(f"copy from device {mib} MiB", side.name, mib / side.download(data))
                blob = data.tobytes()
                record(
                    f"copy to device {mib} MiB",
                    "page memory",
                    mib / timed(lambda blob=blob: upload("b", blob)),
                )
                record(
                    f"copy from device {mib} MiB", "page memory", mib / timed(lambda: download("b"))
                )
            for side in sides:
                record("launch add_one (1,024 elements)", side.name, side.launches() * 1e6)
            echo(1)
            record(
                "launch add_one (1,024 elements)",
                "no-op call",
                timed(lambda: [echo(1) for _ in range(ECHOES)]) * 1e6 / ECHOES,
            )
        remote.close()
        hop = proxy_hop_round_trip(proxy)
        adapters = {side.name: side.adapter for side in sides}
        del sides
        console = browser.console()

    print(f"\nbrowser: {adapters['browser']} (headless Chromium, kernel timer: {timer})")
    print(f"native:  {adapters['native']} (wgpu)")
    print(f"medians of {args.rounds} rounds; copies in MiB/s, launches in µs per launch\n")
    columns = ["browser", "native", "page memory", "no-op call"]
    print(f"| row | {' | '.join(columns)} | browser / native |")
    print("|---|" + "---:|" * (len(columns) + 1))
    summary = {}
    for row, by_side in rows.items():
        medians = {side: statistics.median(values) for side, values in by_side.items()}
        summary[row] = medians
        cells = [f"{medians[c]:,.1f}" if c in medians else "" for c in columns]
        ratio = medians["browser"] / medians["native"]
        print(f"| {row} | {' | '.join(cells)} | {ratio:.2f}x |")
    print(
        f"\nthe proxy's websocket side alone: {hop * 1e6:,.1f} µs per 64-byte round trip "
        "(a TCP client, the proxy, a Python websocket peer that echoes)"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "adapters": adapters,
            "timer": timer,
            "rounds": args.rounds,
            "rows": summary,
            "proxy_hop_us": hop * 1e6,
        }
        args.json.write_text(json.dumps(payload, indent=2))
    if any("error" in line.lower() for line in console):
        print("\nthe page's console reported errors:\n" + "\n".join(console[-20:]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
