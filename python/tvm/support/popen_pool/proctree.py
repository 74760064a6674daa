"""Process-tree helpers of the popen pool: listing processes, killing one, killing a process's
descendants (:func:`kill_child_processes`)."""

from __future__ import annotations

import os
import signal
import subprocess


def _process_table() -> list[tuple[int, int, int]]:
    """(pid, parent pid, process group) of every visible process."""
    table = []
    if os.path.isdir("/proc/self"):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    text = stat.read()
            except OSError:
                continue
            # The command name (field 2) may contain spaces and parentheses: split after it.
            fields = text[text.rfind(b")") + 2 :].split()
            try:
                table.append((int(entry), int(fields[1]), int(fields[2])))
            except (IndexError, ValueError):
                continue
        return table
    try:
        listing = subprocess.run(
            ["ps", "-A", "-o", "pid=", "-o", "ppid=", "-o", "pgid="],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return table
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) == 3 and all(part.isdigit() for part in parts):
            table.append((int(parts[0]), int(parts[1]), int(parts[2])))
    return table


def _kill_pid(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL if hasattr(signal, "SIGKILL") else signal.SIGTERM)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def kill_child_processes(pid: int) -> None:
    """Kills every descendant of process ``pid`` (not ``pid`` itself); processes that are
    already gone are ignored."""
    children: dict[int, list[int]] = {}
    for child, parent, _ in _process_table():
        children.setdefault(parent, []).append(child)
    pending = list(children.get(pid, ()))
    seen = set()
    while pending:
        child = pending.pop()
        if child in seen or child == os.getpid():
            continue
        seen.add(child)
        pending.extend(children.get(child, ()))
        _kill_pid(child)
