"""The README's quick start runs as written."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_starts_with_the_two_setup_commands() -> None:
    first = re.search(r"```bash\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert first is not None
    commands = [line.split("#")[0].strip() for line in first.group(1).splitlines()]
    assert commands == ["bash scripts/demo.sh", "bash scripts/test-all.sh"]


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_quick_start_runs(index: int) -> None:
    pytest.importorskip("numpy")
    code = python_blocks()[index]
    exec(compile(code, f"README.md[python block {index}]", "exec"), {})
