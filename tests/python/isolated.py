"""Running a script in a fresh interpreter, so that a crash fails one test instead of the suite."""

import subprocess
import sys
import textwrap


def run_isolated(script: str, timeout: float = 300) -> str:
    """Runs ``script`` (dedented) with this interpreter; its standard output, stripped. A
    non-zero exit (a crash included) fails the calling test with the end of its output, and
    a script still running after ``timeout`` seconds (a hang) fails it too."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return result.stdout.strip()
