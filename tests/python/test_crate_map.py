"""The maintainer's maps stay true: `crates/README.md` names every crate of the workspace, and
its "uses" column is what each crate's manifest says it depends on; `scripts/README.md` names
every file of `scripts/`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _table_rows(text: str, header: str) -> dict[str, list[str]]:
    """The rows of the markdown table whose header starts with ``header``: first cell (the
    name, without backticks) -> the other cells."""
    rows: dict[str, list[str]] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if line.startswith(header):
            next(lines)  # the |---| line
            for row in lines:
                if not row.startswith("|"):
                    return rows
                cells = [c.strip() for c in row.strip().strip("|").split("|")]
                rows[cells[0].strip("`")] = cells[1:]
    return rows


def _workspace() -> dict[str, dict[str, object]]:
    """The workspace's packages: name -> {"folder": str, "uses": set of workspace deps}."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not on PATH")
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    packages = json.loads(out)["packages"]
    names = {p["name"] for p in packages}
    result: dict[str, dict[str, object]] = {}
    for p in packages:
        uses = {
            d["name"] + ("?" if d.get("optional") else "")
            for d in p["dependencies"]
            if d["name"] in names and d["kind"] is None
        }
        folder = Path(p["manifest_path"]).parent.relative_to(ROOT).as_posix()
        result[p["name"]] = {"folder": folder, "uses": uses}
    return result


def test_the_map_names_every_crate_and_what_it_uses():
    text = (ROOT / "crates" / "README.md").read_text()
    crates = _table_rows(text, "| crate |")
    others = _table_rows(text, "| package |")
    workspace = _workspace()
    in_crates_folder = {n for n, p in workspace.items() if str(p["folder"]).startswith("crates/")}
    assert set(crates) == in_crates_folder
    assert set(others) == set(workspace) - in_crates_folder
    for name, (_, uses, _) in crates.items():
        listed = set(re.findall(r"`([\w-]+\??)`", uses))
        assert listed == workspace[name]["uses"], name
    for name, (folder, _) in others.items():
        assert folder.strip("`") == workspace[name]["folder"], name


def test_the_scripts_index_names_every_script():
    text = (ROOT / "scripts" / "README.md").read_text()
    named = set()
    for line in text.splitlines():
        if line.startswith("| `"):
            named |= set(re.findall(r"`([\w.-]+)`", line.split("|")[1]))
    files = {p.name for p in (ROOT / "scripts").iterdir() if p.is_file()} - {"README.md"}
    assert named == files


def test_the_architecture_page_names_every_crate_and_only_files_that_exist():
    text = (ROOT / "docs" / "architecture.md").read_text()
    layers = _table_rows(text, "| layer |")
    named = {c for _, (crates, _) in layers.items() for c in re.findall(r"`([\w-]+)`", crates)}
    in_crates_folder = {
        n for n, p in _workspace().items() if str(p["folder"]).startswith("crates/")
    }
    assert named == in_crates_folder
    paths = set(re.findall(r"`((?:crates|python|docs|scripts|benches)/[\w./-]+)`", text))
    assert paths, "the walks name the files they pass through"
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"
