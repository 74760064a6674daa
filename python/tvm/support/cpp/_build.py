"""A build: source files compiled to objects and linked into one shared library, in a directory
named by a key of everything that goes in, under a file lock, with ninja when it is installed and
the compilers called directly otherwise."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .. import libinfo
from ..utils import FileLock
from . import _toolchain
from ._toolchain import Compiler


class BuildError(RuntimeError):
    """A compiler, the linker or ninja failed; the message holds their output and the command."""


@dataclass(frozen=True)
class Step:
    """One source compiled to one object."""

    compiler: Compiler
    source: Path
    obj: Path
    #: Flags of this build besides the compiler's own (include paths, the caller's extras).
    flags: tuple[str, ...]

    def command(self) -> list[str]:
        return [self.compiler.path, *self.compiler.flags, *self.flags, "-c", str(self.source)]


@dataclass(frozen=True)
class Plan:
    """Every step of a build and where it goes."""

    name: str
    directory: Path
    steps: tuple[Step, ...]
    linker: Compiler
    link_flags: tuple[str, ...]
    #: Source texts to write into the directory before building (inline builds).
    writes: tuple[tuple[Path, str], ...]
    #: Whether an unchanged key may skip the build (inline sources are all in the key; files
    #: may include headers the key does not see, so their builds always run ninja).
    key_covers_inputs: bool
    #: The library's file name in the directory.
    output_name: str

    @property
    def output(self) -> Path:
        return self.directory / self.output_name

    def linker_words(self) -> list[str]:
        """The link command before its inputs: the C++ compiler with its flags, ``-shared``."""
        return [self.linker.path, *self.linker.flags, "-shared"]

    def link_command(self) -> list[str]:
        objects = [str(step.obj) for step in self.steps]
        return [*self.linker_words(), *objects, "-o", str(self.output), *self.link_flags]


def cache_root() -> Path:
    """Where builds without a ``build_directory`` go: ``$TVM_FFI_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/tvm/cpp``, else ``~/.cache/tvm/cpp``."""
    explicit = os.environ.get("TVM_FFI_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return Path(base).expanduser() / "tvm" / "cpp"


@cache
def _headers_digest() -> str:
    """A digest of the C/C++ headers builds compile against (a changed header builds again)."""
    digest = hashlib.sha256()
    for directory in libinfo.find_include_path():
        for header in sorted(Path(directory).rglob("*.h")):
            digest.update(str(header.relative_to(directory)).encode())
            digest.update(header.read_bytes())
    return digest.hexdigest()


def include_flags(extra_include_paths: Sequence[str]) -> tuple[str, ...]:
    """``-I`` flags: the caller's directories, then this package's headers."""
    return tuple(f"-I{path}" for path in [*extra_include_paths, *libinfo.find_include_path()])


def key_of(plan_inputs: Mapping[str, object]) -> str:
    """The hex key of a build's inputs (with this package's version and headers)."""
    from ... import __version__

    inputs = {"tvm": __version__, "headers": _headers_digest(), **plan_inputs}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def _run(command: list[str], cwd: Path, what: str) -> None:
    try:
        proc = subprocess.run(
            command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False
        )
    except (OSError, ValueError) as err:
        raise BuildError(f"{what}: cannot run {command[0]!r}: {err}") from None
    if proc.returncode != 0:
        output = proc.stdout.decode(errors="replace").rstrip()
        raise BuildError(f"{what} failed:\n{output}\ncommand: {shlex.join(command)}")


def _ninja_path(text: str) -> str:
    """A path on a ``build`` line: ``$``, spaces and colons escaped."""
    return text.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def _ninja_value(text: str) -> str:
    """A variable's value: only ``$`` is special."""
    return text.replace("$", "$$")


def ninja_file(plan: Plan) -> str:
    """The ``build.ninja`` of a plan: a rule per compiler (with the depfiles gcc-like compilers
    write, so ninja sees included headers change), then the link."""
    lines = ["ninja_required_version = 1.3", ""]
    rules: dict[Compiler, str] = {}
    for step in plan.steps:
        if step.compiler not in rules:
            rule = f"compile{len(rules)}"
            rules[step.compiler] = rule
            base = _ninja_value(shlex.join([step.compiler.path, *step.compiler.flags]))
            if step.compiler.depfiles:
                lines += [
                    f"rule {rule}",
                    f"  command = {base} $flags -MMD -MF $out.d -c $in -o $out",
                    "  depfile = $out.d",
                    "  deps = gcc",
                ]
            else:
                lines += [f"rule {rule}", f"  command = {base} $flags -c $in -o $out"]
            lines += ["  description = compiling $in", ""]
    lines += [
        "rule link",
        f"  command = {_ninja_value(shlex.join(plan.linker_words()))} $in -o $out $flags",
        "  description = linking $out",
        "",
    ]
    for step in plan.steps:
        lines.append(
            f"build {_ninja_path(str(step.obj))}: {rules[step.compiler]} "
            f"{_ninja_path(str(step.source))}"
        )
        lines.append(f"  flags = {_ninja_value(shlex.join(step.flags))}")
    objects = " ".join(_ninja_path(str(step.obj)) for step in plan.steps)
    lines.append(f"build {_ninja_path(str(plan.output))}: link {objects}")
    lines.append(f"  flags = {_ninja_value(shlex.join(plan.link_flags))}")
    lines += [f"default {_ninja_path(str(plan.output))}", ""]
    return "\n".join(lines)


def _build_now(plan: Plan) -> None:
    ninja = _toolchain.ninja()
    if ninja is not None:
        (plan.directory / "build.ninja").write_text(ninja_file(plan))
        _run([ninja, "-C", str(plan.directory)], plan.directory, f"building {plan.name!r}")
        return
    for step in plan.steps:
        what = f"building {plan.name!r}: compiling {step.source.name}"
        _run([*step.command(), "-o", str(step.obj)], plan.directory, what)
    _run(plan.link_command(), plan.directory, f"building {plan.name!r}: linking")


def run(plan: Plan, key: str) -> Path:
    """Builds ``plan`` unless the directory holds the library of the same key already; builds
    of one directory wait for each other (a file lock). The library's path."""
    plan.directory.mkdir(parents=True, exist_ok=True)
    stamp = plan.directory / f"{plan.output_name}.key"
    with FileLock(plan.directory / ".lock"):
        if plan.key_covers_inputs and plan.output.is_file() and _read(stamp) == key:
            return plan.output
        stamp.unlink(missing_ok=True)
        for path, text in plan.writes:
            if _read(path) != text:
                path.write_text(text)
        _build_now(plan)
        stamp.write_text(key)
    return plan.output


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
