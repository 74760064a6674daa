"""Every code example of the user guide (docs/guide) runs, as a reader would run it.

Per page, in a fresh directory: fenced blocks whose first line names a file (``# file: x.py``,
``// file: src/main.rs``, ``/* file: k.c */``) are written to that file; then the ``bash`` blocks
run in order (``python`` is this interpreter), then the page's ``python`` blocks run together as
one program. ``text`` blocks are output or prose and do not run. ``/path/to/tvm`` in a file
stands for the repository checkout.

A reader pastes one block at a time: a ``python`` block that uses a name only an earlier block
defines starts with the line ``# (continues the example above)``, which a test checks.
"""

from __future__ import annotations

import ast
import builtins
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
GUIDE = REPO_ROOT / "docs" / "guide"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.S | re.M)
FILE_MARKER = re.compile(r"^(?:#|//|/\*)\s*file:\s*(\S+?)(?:\s*\*/)?\s*$")
RUNNABLE = {"python", "bash", "c", "cpp", "rust", "toml", "json"}
CONTINUES = "# (continues the example above)"


def _blocks(page: Path) -> list[tuple[str, str]]:
    return [(lang, body) for lang, body in FENCE.findall(page.read_text()) if lang in RUNNABLE]


def _pages() -> list[Path]:
    return sorted(GUIDE.glob("*.md"))


def test_the_guide_has_pages_with_runnable_examples():
    pages = _pages()
    assert len(pages) >= 10, pages
    assert all(_blocks(page) for page in pages if page.name != "index.md")


def _free_names(source: str) -> set[str]:
    """Names a block reads that it never binds (and that are not builtins): what it needs from
    earlier blocks. Bindings anywhere in the block count, so the check errs toward silence."""
    tree = ast.parse(source)
    bound: set[str] = set(dir(builtins))
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (used if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return used - bound


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.stem)
def test_each_python_block_runs_alone_or_says_it_continues(page: Path):
    for lang, body in _blocks(page):
        if lang != "python" or FILE_MARKER.match(body.partition("\n")[0].strip()):
            continue
        missing = _free_names(body)
        continues = body.startswith(CONTINUES)
        assert continues or not missing, (
            f"{page.name}: a block uses {sorted(missing)} from an earlier one without starting "
            f"with {CONTINUES!r}:\n{body[:300]}"
        )
        assert missing or not continues, (
            f"{page.name}: a block says it continues but needs nothing from earlier ones:\n"
            f"{body[:300]}"
        )


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.stem)
def test_guide_examples_run(page: Path, tmp_path: Path):
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("CARGO_TARGET_DIR", str(REPO_ROOT / "target" / "guide"))
    # Inline C++ builds (tvm.support.cpp) go into the page's directory, not the user's cache.
    env["TVM_FFI_CACHE_DIR"] = str(tmp_path / "cpp-cache")
    programs: list[str] = []
    commands: list[str] = []
    for lang, body in _blocks(page):
        first, _, rest = body.partition("\n")
        marker = FILE_MARKER.match(first.strip())
        if marker:
            target = tmp_path / marker.group(1)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(rest.replace("/path/to/tvm", str(REPO_ROOT)))
        elif lang == "bash":
            commands.append(body)
        elif lang == "python":
            programs.append(body)
        else:
            pytest.fail(f"{page.name}: a {lang} block without a file marker cannot run")
    for command in commands:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert result.returncode == 0, f"{page.name}:\n{command}\n{result.stdout}{result.stderr}"
    if programs:
        script = tmp_path / "guide_page.py"
        script.write_text("\n".join(programs))
        result = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0, f"{page.name}:\n{result.stdout}{result.stderr}"
