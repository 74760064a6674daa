"""Runs Apache TVM's ``test_runtime_rpc.py`` with Apache TVM's client on chosen servers.

The file (``/work/shared/conformance/apache-tvm/``, or ``TVM_CONFORMANCE_DIR``) is copied
unchanged into a fresh directory and run by pytest in the interpreter of :mod:`apache_tvm_env`
with :mod:`apache_rpc_plugin`, which picks the implementation of each role. A run is one
*pairing*:

- ``apache``: Apache TVM's server, tracker and proxy (the reference);
- ``ours``: our server, Apache TVM's tracker and proxy;
- ``our-tracker-proxy``: Apache TVM's server, our tracker and proxy;
- ``all-ours``: our server, tracker and proxy.

Apache TVM's venv has no pytest: ours is lent to it through a directory of links on
``PYTHONPATH`` (pure Python, the same Python version). The outcomes of the ``apache`` pairing
depend only on the file, the plugin and the venv, and are cached under
``target/rpc-conformance/``. Each run is bounded (per test and in total) and its process group is
ended afterwards (the file's tracker-request test leaves spinning children on failure).

As a script it prints the outcome of every test on each pairing and the counts::

    .venv/bin/python tests/python/apache_rpc_suite.py [--pairing ours ...] [-k EXPR]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import apache_tvm_env

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
CONFORMANCE_DIR = Path(os.environ.get("TVM_CONFORMANCE_DIR", "/work/shared/conformance/apache-tvm"))
TEST_FILE = CONFORMANCE_DIR / "test_runtime_rpc.py"
PLUGIN = HERE / "apache_rpc_plugin.py"
CACHE_DIR = REPO_ROOT / "target" / "rpc-conformance"
#: The outcomes of the ``apache`` pairing on the whole file, recorded once (``--record``) and
#: used while the file is the one recorded, so that a fresh checkout does not run Apache TVM's
#: side again: test name, outcome and message, with the file's SHA-256 and the venv's packages.
BASELINE = HERE / "apache_rpc_baseline.json"
PAIRINGS: dict[str, dict[str, str]] = {
    "apache": {"SERVER": "apache", "TRACKER": "apache", "PROXY": "apache"},
    "ours": {"SERVER": "ours", "TRACKER": "apache", "PROXY": "apache"},
    "our-tracker-proxy": {"SERVER": "apache", "TRACKER": "ours", "PROXY": "ours"},
    "all-ours": {"SERVER": "ours", "TRACKER": "ours", "PROXY": "ours"},
}
#: Seconds one test may run, and one whole run.
TEST_TIMEOUT = 120
RUN_TIMEOUT = 900
#: The distributions pytest needs, lent from our interpreter's site.
_PYTEST_DISTS = ("pytest", "pluggy", "iniconfig", "packaging", "pygments")
_PYTEST_MODULES = ("pytest", "_pytest", "py.py", "pluggy", "iniconfig", "packaging", "pygments")


@dataclass
class Run:
    """The outcomes of one run: test name to ``passed``, ``failed``, ``error``, ``skipped`` or
    ``lost`` (the run ended before the test reported, e.g. past its time limit)."""

    pairing: str
    outcomes: dict[str, str]
    messages: dict[str, str]
    seconds: float
    cached: bool = False
    output: str = ""

    def names(self, outcome: str) -> list[str]:
        return [name for name, got in self.outcomes.items() if got == outcome]

    @property
    def passed(self) -> int:
        return len(self.names("passed"))

    def summary(self) -> str:
        counts = {o: len(self.names(o)) for o in sorted(set(self.outcomes.values()))}
        text = ", ".join(f"{n} {o}" for o, n in counts.items())
        return f"{self.pairing}: {self.passed} of {len(self.outcomes)} passed ({text})"


def pytest_site(cache_dir: Path = CACHE_DIR) -> Path:
    """A directory of links to the pytest of this interpreter, for Apache TVM's."""
    import pytest

    site = Path(pytest.__file__).resolve().parents[1]
    shim = cache_dir / f"pytest-{pytest.__version__}"
    if (shim / "pytest").exists():
        return shim
    staging = Path(tempfile.mkdtemp(prefix="pytest-", dir=cache_dir))
    for name in _PYTEST_MODULES:
        if (site / name).exists():
            (staging / name).symlink_to(site / name)
    for dist in _PYTEST_DISTS:
        for info in site.glob(f"{dist}-*.dist-info"):
            (staging / info.name).symlink_to(info)
    try:
        staging.rename(shim)
    except OSError:  # made meanwhile by another run
        shutil.rmtree(staging)
    return shim


def _cache_key(apache_python: Path) -> str:
    digest = hashlib.sha256()
    for part in (TEST_FILE.read_bytes(), PLUGIN.read_bytes(), str(apache_python).encode()):
        digest.update(hashlib.sha256(part).digest())
    stamp = apache_python.parents[1] / ".requirements"
    if stamp.exists():
        digest.update(stamp.read_bytes())
    return digest.hexdigest()[:16]


def _file_digest() -> str:
    return hashlib.sha256(TEST_FILE.read_bytes()).hexdigest()


def _baseline() -> dict | None:
    """The recorded outcomes of the ``apache`` pairing, if they are of the file as it is."""
    if not BASELINE.exists():
        return None
    data = json.loads(BASELINE.read_text())
    return data if data.get("test_file_sha256") == _file_digest() else None


def record_baseline(apache_python: Path) -> Run:
    """Runs the ``apache`` pairing on the whole file and records its outcomes in ``BASELINE``."""
    result = run("apache", apache_python, use_cache=False)
    if "lost" in result.outcomes.values():
        raise RuntimeError(f"not recorded: a test was lost\n{result.output[-4000:]}")
    data = {
        "test_file_sha256": _file_digest(),
        "apache_tvm": apache_tvm_env.REQUIREMENTS[0],
        "outcomes": result.outcomes,
        "messages": result.messages,
        "seconds": round(result.seconds, 1),
    }
    BASELINE.write_text(json.dumps(data, indent=1) + "\n")
    return result


def run(
    pairing: str,
    apache_python: Path,
    select: str | None = None,
    use_cache: bool = True,
    timeout: float = RUN_TIMEOUT,
) -> Run:
    """Runs the file (or the tests ``select``, a ``-k`` expression) on ``pairing``."""
    sides = PAIRINGS[pairing]
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    cacheable = use_cache and "ours" not in sides.values()
    cache_file = CACHE_DIR / f"{pairing}-{_cache_key(apache_python)}-{select or 'all'}.json"
    if cacheable and cache_file.exists():
        data = json.loads(cache_file.read_text())
        return Run(pairing, data["outcomes"], data["messages"], data["seconds"], cached=True)
    recorded = _baseline() if use_cache and pairing == "apache" and select is None else None
    if recorded is not None:
        return Run(
            pairing, recorded["outcomes"], recorded["messages"], recorded["seconds"], cached=True
        )
    shim = pytest_site()
    with tempfile.TemporaryDirectory(prefix="conformance-") as work:
        test_file = Path(work) / TEST_FILE.name
        shutil.copyfile(TEST_FILE, test_file)
        results = Path(work) / "results.jsonl"
        env = apache_tvm_env.apache_tvm_environ()
        env.update(
            {f"TVM_CONFORMANCE_{role}": side for role, side in sides.items()},
            PYTHONPATH=f"{shim}{os.pathsep}{HERE}",
            PYTHONDONTWRITEBYTECODE="1",
            TVM_CONFORMANCE_OURS_PYTHON=sys.executable,
            TVM_CONFORMANCE_OURS_PYTHONPATH=os.environ.get("PYTHONPATH", ""),
            TVM_CONFORMANCE_RESULTS=str(results),
            TVM_CONFORMANCE_TEST_TIMEOUT=str(TEST_TIMEOUT),
        )
        env.pop("TVM_RPC_KEY", None)
        command = [str(apache_python), "-m", "pytest", "-c", os.devnull, "--rootdir", work]
        command += ["-p", "apache_rpc_plugin", "-p", "no:cacheprovider", "-q", "-rfE"]
        if select:
            command += ["-k", select]
        command.append(test_file.name)
        started = time.monotonic()
        proc = subprocess.Popen(
            command,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            output = f"(the run took more than {timeout} s)"
        finally:
            # Whatever the run left behind (Apache TVM's workers, spinning children).
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        seconds = time.monotonic() - started
        collected: list[str] = []
        outcomes: dict[str, str] = {}
        messages: dict[str, str] = {}
        if results.exists():
            for line in results.read_text().splitlines():
                entry = json.loads(line)
                if "collected" in entry:
                    collected = entry["collected"]
                    continue
                outcomes[entry["name"]] = entry["outcome"]
                if entry.get("message"):
                    messages[entry["name"]] = entry["message"]
    for name in collected:
        if name not in outcomes:
            outcomes[name] = "lost"
            messages[name] = "the run ended before the test reported"
    if not outcomes:
        raise RuntimeError(f"no test of {TEST_FILE.name} ran on {pairing}:\n{output[-4000:]}")
    result = Run(pairing, outcomes, messages, seconds, output=output)
    if cacheable and "lost" not in outcomes.values():
        data = {"outcomes": outcomes, "messages": messages, "seconds": seconds}
        cache_file.write_text(json.dumps(data, indent=1))
    return result


def main(argv: list[str] | None = None) -> int:
    """Prints each test's outcome on each pairing and the counts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairing", action="append", choices=sorted(PAIRINGS))
    parser.add_argument("-k", dest="select", help="pytest -k expression")
    parser.add_argument("--no-cache", action="store_true", help="run the apache pairing again")
    parser.add_argument(
        "--record", action="store_true", help=f"record the apache pairing in {BASELINE.name}"
    )
    args = parser.parse_args(argv)
    pairings = args.pairing or ["apache", "ours"]
    apache_python = apache_tvm_env.apache_tvm_python()
    if args.record:
        recorded = record_baseline(apache_python)
        print(f"recorded {recorded.summary()} in {BASELINE}")
        return 0
    runs = [run(p, apache_python, args.select, use_cache=not args.no_cache) for p in pairings]
    names = sorted({name for r in runs for name in r.outcomes})
    width = max(len(n) for n in names)
    print(f"{'test':{width}}  " + "  ".join(f"{r.pairing:>17}" for r in runs))
    for name in names:
        row = "  ".join(f"{r.outcomes.get(name, '-'):>17}" for r in runs)
        print(f"{name:{width}}  {row}")
    for r in runs:
        cached = ", cached" if r.cached else ""
        print(f"{r.summary()} in {r.seconds:.0f} s{cached}")
        for name in r.names("failed") + r.names("error") + r.names("lost"):
            print(f"  {name}: {r.messages.get(name, '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
