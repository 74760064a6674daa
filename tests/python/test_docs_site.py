"""The documentation site builds (MkDocs, strict), has a root page, and loads nothing from
another server: a reader offline, or behind a firewall, gets the whole site."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

#: A stylesheet, script, image or frame whose address is another server's.
REMOTE_ASSET = re.compile(
    r"<(?:script|img|iframe)\b[^>]*\bsrc=\"(?:https?:)?//[^\"]+\"|"
    r"<link\b[^>]*\bhref=\"(?:https?:)?//[^\"]+\"",
    re.I,
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs")
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_the_site_has_a_root_page_that_links_the_guide(site: Path) -> None:
    index = (site / "index.html").read_text()
    assert 'href="guide/"' in index


def test_no_page_loads_an_asset_from_another_server(site: Path) -> None:
    pages = list(site.rglob("*.html"))
    assert len(pages) > 20
    for page in pages:
        found = REMOTE_ASSET.findall(page.read_text())
        assert not found, f"{page.relative_to(site)} loads {found}"


def test_code_is_highlighted_when_the_site_is_built(site: Path) -> None:
    page = (site / "guide" / "rpc" / "index.html").read_text()
    assert '<div class="codehilite">' in page and '<span class="kn">import</span>' in page
    assert (site / "css" / "pygments.css").is_file()
