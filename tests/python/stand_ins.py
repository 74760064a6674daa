"""Stand-in programs for compilers and tools this machine lacks (nvcc, hipcc, xcrun, ...): small
shell scripts that the tests put first on ``PATH``, which record their arguments and write the
files the real tool would."""

from pathlib import Path

#: Shell that writes ``$2`` of the ``-o FILE`` pair of the command line with CONTENT.
WRITE_OUTPUT = (
    'while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then printf "%s" "{content}" > "$2"; fi; '
    "shift; done"
)


def fake_tool(directory: Path, name: str, script: str) -> Path:
    """An executable ``directory/name`` running ``script`` with ``/bin/sh``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    return path


def recording_tool(directory: Path, name: str, log: Path, output: str = "") -> Path:
    """A tool that writes its arguments, one a line, to ``log`` and ``output`` to the file
    after ``-o`` (if any)."""
    return fake_tool(
        directory,
        name,
        f'printf "%s\\n" "$@" > "{log}"\n' + WRITE_OUTPUT.format(content=output),
    )


def logged_args(log: Path) -> list[str]:
    return log.read_text().splitlines()
