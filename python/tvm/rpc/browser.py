"""A headless Chromium that opens the proxy's WebGPU page, so that a machine without a display
serves its browser's WebGPU adapter over RPC (the page itself is ``tvm/rpc/web``)::

    with rpc.Proxy(port=9090, web_port=9190) as proxy, HeadlessBrowser(proxy.page_url("webgpu")):
        remote = rpc.connect("127.0.0.1", 9090, key="webgpu")
        x = tvm.runtime.tensor(np.ones(4, "float32"), remote.webgpu(0))

Chromium's WebGPU on Linux needs ``--enable-unsafe-webgpu``; without a GPU it runs on
SwiftShader, its CPU implementation of Vulkan.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

__all__ = ["HeadlessBrowser", "find_chromium"]

#: The names a Chromium executable goes by, tried in order after ``$TVM_CHROMIUM``.
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """The Chromium executable: ``$TVM_CHROMIUM`` if set, else the first of
    :data:`CHROMIUM_NAMES` on ``PATH``; None when there is none."""
    explicit = os.environ.get("TVM_CHROMIUM")
    if explicit:
        return explicit
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


class HeadlessBrowser:
    """Headless Chromium showing ``url``, with WebGPU enabled and a fresh profile, until
    :meth:`close` (or the end of a ``with`` block). Its output goes to :attr:`log_path`."""

    def __init__(
        self, url: str, executable: str | None = None, extra_args: tuple[str, ...] = ()
    ) -> None:
        chromium = executable or find_chromium()
        if chromium is None:
            raise FileNotFoundError(
                "no Chromium found: install it (Debian: apt-get install chromium) or set "
                "TVM_CHROMIUM to its path"
            )
        self._profile = tempfile.mkdtemp(prefix="tvm-chromium-")
        self.log_path = Path(self._profile) / "chromium.log"
        args = [
            chromium,
            "--headless=new",
            "--enable-unsafe-webgpu",
            # GPU timestamps at full resolution for time_evaluator (Chromium rounds them
            # to 100 microseconds otherwise).
            "--enable-dawn-features=allow_unsafe_apis",
            "--disable-dawn-features=timestamp_quantization",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-timer-throttling",
            "--disable-renderer-backgrounding",
            "--remote-debugging-port=0",
            # The page's console goes to the log (see console()).
            "--enable-logging=stderr",
            "--v=0",
            f"--user-data-dir={self._profile}",
            *extra_args,
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium's sandbox refuses to run as root
        env = dict(os.environ)
        # Headless Chromium looks for a session bus and a runtime directory it does not need.
        env.setdefault("XDG_RUNTIME_DIR", self._profile)
        env["DBUS_SESSION_BUS_ADDRESS"] = "disabled:"
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [*args, url],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def log(self) -> str:
        """What Chromium printed so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def console(self) -> list[str]:
        """The lines the page logged to its console so far."""
        lines = []
        for line in self.log().splitlines():
            marker = line.find(":CONSOLE")
            if marker >= 0:
                lines.append(line[line.find("]", marker) + 1 :].strip())
        return lines

    def close(self) -> None:
        """Ends Chromium (as closing its window does: the page's connections drop) and removes
        its profile."""
        if self.process.poll() is None:
            # Chromium's helper processes share its process group.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> HeadlessBrowser:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
