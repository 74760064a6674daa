"""Importing ``tvm`` in a fresh interpreter: cost and version (issue 3, §1 and §8)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

OPTIONAL_DEPENDENCIES = ["numpy", "ml_dtypes", "torch", "scipy", "pandas", "cupy", "jax"]


def run_python(code: str) -> str:
    """Runs ``code`` in a fresh interpreter (outside the repository) and returns its stdout."""
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(sys.executable).parent,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def cargo_version() -> str:
    # (tomllib is 3.11 and later; the version check skips on older interpreters)
    tomllib = pytest.importorskip("tomllib")
    workspace = tomllib.loads((REPO_ROOT / "Cargo.toml").read_text())
    crate = tomllib.loads((REPO_ROOT / "crates" / "tvm-python" / "Cargo.toml").read_text())
    version = crate["package"]["version"]
    if isinstance(version, dict):  # version.workspace = true
        assert version == {"workspace": True}
        version = workspace["workspace"]["package"]["version"]
    return version


def test_import_tvm_does_not_import_optional_dependencies():
    code = (
        "import json, sys\n"
        "import tvm\n"
        "import tvm.ffi, tvm.runtime, tvm.error\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{OPTIONAL_DEPENDENCIES!r})))\n"
    )
    assert json.loads(run_python(code)) == []


#: Standard modules that cost milliseconds to import and that ``import tvm`` needs only for
#: features used later (py_class, signatures, benchmark statistics, path objects).
HEAVY_STANDARD_MODULES = ["inspect", "dataclasses", "statistics", "pathlib", "ast", "decimal"]


def test_import_tvm_leaves_heavy_standard_modules_to_first_use():
    # Counts only what `import tvm` itself imports: under `pytest --cov` the child's coverage
    # tracer has already imported some of these modules before the first line runs.
    code = (
        "import json, sys\n"
        "already_imported = set(sys.modules)\n"
        "import tvm\n"
        f"print(json.dumps(sorted(m for m in {HEAVY_STANDARD_MODULES!r}\n"
        "    if m in sys.modules and m not in already_imported)))\n"
    )
    assert json.loads(run_python(code)) == []


def test_frozen_py_class_still_raises_frozen_instance_error():
    code = (
        "import sys, tvm\n"
        "from tvm.ffi import dataclasses as tvm_dataclasses\n"
        "@tvm_dataclasses.py_class('testing.ImportFrozen', frozen=True)\n"
        "class Point(tvm.ffi.Object):\n"
        "    x: int\n"
        "p = Point(1)\n"
        "try:\n"
        "    p.x = 2\n"
        "except Exception as err:\n"
        "    print(type(err) is sys.modules['dataclasses'].FrozenInstanceError)\n"
    )
    assert run_python(code).strip() == "True"


def test_numpy_is_imported_on_first_use():
    pytest.importorskip("numpy")
    code = (
        "import sys\n"
        "import tvm\n"
        "assert 'numpy' not in sys.modules\n"
        "import numpy\n"
        "tensor = tvm.ffi.from_dlpack(numpy.arange(3))\n"
        "print(tensor.numpy().tolist())\n"
    )
    assert run_python(code).strip() == "[0, 1, 2]"


def test_version_matches_the_cargo_version():
    import tvm

    expected = cargo_version()
    assert tvm.__version__ == expected
    assert run_python("import tvm; print(tvm.__version__)").strip() == expected


def test_installed_distribution_version_matches():
    from importlib import metadata

    import tvm

    try:
        installed = metadata.version("tvm")
    except metadata.PackageNotFoundError:
        pytest.skip("tvm is not installed as a distribution")
    # Cargo's pre-release spelling (0.1.0-alpha.1) differs from PEP 440's; plain releases match.
    if "-" not in tvm.__version__:
        assert installed == tvm.__version__
