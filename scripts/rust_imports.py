#!/usr/bin/env python3
"""The file-level import graph of one crate: for each source file, the files of the same crate
it names through ``crate::...`` and ``super::...`` paths, and every pair of files that import
each other (a circle between two rooms).

    python3 scripts/rust_imports.py crates/tvm-rpc            # edges, then circles
    python3 scripts/rust_imports.py crates/tvm-rpc --circles  # circles only (exit 1 if any)

A module path resolves to the deepest file that exists (``crate::session::local`` to
``src/session/local.rs``, ``crate::session`` to ``src/session/mod.rs``); an item imported from a
module is charged to that module's file. It reads the ``use`` items that start a line and the
paths written in code (``crate::registry::global()`` inside a function counts); comments and
string literals are skipped, and so are ``#[cfg(test)]`` modules at the end of a file.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

_USE = re.compile(
    r"^(?:pub(?:\([^)]*\))?\s+)?use\s+(crate|super)((?:::\w+)*)(?:::\{([^;]*)\})?", re.M
)
#: A path written in code: ``crate::a::b`` or ``super::a`` (not the tail of a longer path).
_PATH = re.compile(r"(?<![\w:])(crate|super)((?:::\w+)+)")
#: Line comments (doc comments included) and string literals, blanked before paths are read.
_NOISE = re.compile(r'//[^\n]*|"(?:\\.|[^"\\])*"')
#: The test module that ends a file.
_TESTS = re.compile(r"^#\[cfg\(test\)\]\s*\n\s*mod\s+\w+\s*\{.*", re.M | re.S)


def _module_of(src: Path, file: Path) -> list[str]:
    """The module path of ``file`` (``src/a/b.rs`` and ``src/a/b/mod.rs`` are ``[a, b]``)."""
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts.pop()
    return parts


def _file_of(src: Path, path: list[str]) -> Path | None:
    """The deepest existing file along module ``path``."""
    for end in range(len(path), -1, -1):
        base = src.joinpath(*path[:end])
        for candidate in (base.with_suffix(".rs"), base / "mod.rs"):
            if end == 0:
                candidate = src / "lib.rs"
            if candidate.is_file():
                return candidate
    return None


def edges(crate: Path) -> dict[Path, set[Path]]:
    """File -> the files of the crate it imports from."""
    src = crate / "src"
    graph: dict[Path, set[Path]] = {}
    for file in sorted(src.rglob("*.rs")):
        here = _module_of(src, file)
        targets: set[Path] = set()
        text = _TESTS.sub("", _NOISE.sub('""', file.read_text()))
        found = [(root, rest, group) for root, rest, group in _USE.findall(text)]
        found += [(root, rest, "") for root, rest in _PATH.findall(text)]
        for root, rest, group in found:
            path = [p for p in rest.split("::") if p]
            if root == "super":
                # `super` of a file `a/b.rs` (module a::b) is module `a`; each further `super`
                # goes one module up.
                up = 1
                while path and path[0] == "super":
                    path, up = path[1:], up + 1
                path = here[: len(here) - up] + path
            first_items = [path]
            if group:
                first_items = [[*path, item.split("::")[0].strip()] for item in group.split(",")]
            for item_path in first_items:
                target = _file_of(src, [p for p in item_path if p and p != "self"])
                if target is not None and target != file:
                    targets.add(target)
        graph[file] = targets
    return graph


def circles(graph: dict[Path, set[Path]]) -> list[tuple[Path, Path]]:
    """Pairs of files that import each other."""
    return sorted(
        (a, b) for a, targets in graph.items() for b in targets if a < b and a in graph.get(b, ())
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("crate", type=Path, help="the crate's directory (with src/)")
    parser.add_argument("--circles", action="store_true", help="print only the circles")
    args = parser.parse_args(argv)
    graph = edges(args.crate)
    src = args.crate / "src"
    if not args.circles:
        for file, targets in graph.items():
            names = ", ".join(str(t.relative_to(src)) for t in sorted(targets))
            print(f"{file.relative_to(src)} -> {names or '-'}")
    found = circles(graph)
    for a, b in found:
        print(f"circle: {a.relative_to(src)} <-> {b.relative_to(src)}")
    if not found:
        print("no circles")
    return 1 if found and args.circles else 0


if __name__ == "__main__":
    sys.exit(main())
