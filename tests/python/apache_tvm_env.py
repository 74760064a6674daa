"""A Python interpreter with Apache TVM (apache-tvm 0.27) for interoperability tests.

``apache_tvm_python()`` returns the interpreter of a virtual environment at
``<repo>/.venv-apache-tvm`` (git-ignored), created and filled from PyPI on first use and reused
afterwards. ``TVM_TEST_APACHE_TVM_PYTHON`` names an existing interpreter instead (for quick local
runs, e.g. ``/work/reftvm/bin/python``). The tests are skipped, with the reason, only when PyPI
cannot be reached.

Test modules use it through a session-scoped fixture of their own::

    @pytest.fixture(scope="session")
    def apache_python() -> Path:
        return apache_tvm_env.apache_tvm_python()

Run the interpreter with :func:`apache_tvm_environ`, which drops ``PYTHONPATH`` so that the
``tvm`` it imports is Apache TVM's, not the one under test.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
import venv
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV_VAR = "TVM_TEST_APACHE_TVM_PYTHON"
VENV_DIR = REPO_ROOT / ".venv-apache-tvm"
REQUIREMENTS = ("apache-tvm==0.27.0.post1", "cloudpickle", "tornado", "psutil")

# pip's words for "the index could not be reached".
_OFFLINE_HINTS = (
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Max retries exceeded",
    "Could not fetch URL",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "No matching distribution found for apache-tvm",
)


def apache_tvm_environ() -> dict[str, str]:
    """The environment for Apache TVM's interpreter: ours without ``PYTHONPATH``."""
    environ = dict(os.environ)
    environ.pop("PYTHONPATH", None)
    return environ


def _python_of(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def _create(env_dir: Path) -> None:
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    result = subprocess.run(
        [
            str(_python_of(env_dir)),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            *REQUIREMENTS,
        ],
        capture_output=True,
        text=True,
        env=apache_tvm_environ(),
        check=False,
    )
    if result.returncode != 0:
        output = result.stdout + result.stderr
        if any(hint in output for hint in _OFFLINE_HINTS):
            pytest.skip(f"PyPI is unreachable, cannot install {' '.join(REQUIREMENTS)}")
        pytest.fail(f"pip install {' '.join(REQUIREMENTS)} failed:\n{output}")


def apache_tvm_python() -> Path:
    """The interpreter of an environment with Apache TVM (see the module's documentation)."""
    override = os.environ.get(ENV_VAR)
    if override:
        python = Path(override)
        if not python.exists():
            pytest.fail(f"{ENV_VAR}={override} does not exist")
        return python
    stamp = VENV_DIR / ".requirements"
    wanted = "\n".join(REQUIREMENTS)
    VENV_DIR.parent.mkdir(parents=True, exist_ok=True)
    # One creator at a time (parallel test sessions share the directory).
    with open(Path(tempfile.gettempdir()) / "tvm-test-apache-tvm-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (stamp.exists() and stamp.read_text() == wanted and _python_of(VENV_DIR).exists()):
            _create(VENV_DIR)
            stamp.write_text(wanted)
    return _python_of(VENV_DIR)
