"""Every code example of the user guide (docs/guide) runs, as a reader would run it.

Per page, in a fresh directory: fenced blocks whose first line names a file (``# file: x.py``,
``// file: src/main.rs``, ``/* file: k.c */``) are written to that file; then the ``bash`` blocks
run in order (``python`` is this interpreter), then the page's ``python`` blocks run together as
one program. ``text`` blocks are output or prose and do not run. ``/path/to/tvm`` in a file
stands for the repository checkout.
"""

from __future__ import annotations

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


def _blocks(page: Path) -> list[tuple[str, str]]:
    return [(lang, body) for lang, body in FENCE.findall(page.read_text()) if lang in RUNNABLE]


def _pages() -> list[Path]:
    return sorted(GUIDE.glob("*.md"))


def test_the_guide_has_pages_with_runnable_examples():
    pages = _pages()
    assert len(pages) >= 10, pages
    assert all(_blocks(page) for page in pages if page.name != "index.md")


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
