"""Backend autoload with real packages: two out-of-tree backends under ``tests/python/backends``
are installed into a fresh virtual environment and ``import tvm`` runs in fresh interpreters."""

import json
import os
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import numpy as np
import pytest

import tvm

HERE = Path(__file__).resolve().parent
INCLUDE = HERE.parents[1] / "cpp-abi" / "include"
DEVICE_SOURCE = HERE.parents[1] / "cpp-abi" / "examples" / "device_backend.c"

PROBE = """
import json, sys, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import tvm
report = {
    "status": {s.name: [s.status, s.error] for s in tvm.backends.loaded()},
    "warnings": [str(w.message) for w in caught],
    "hello": None,
    "native": None,
}
f = tvm.get_global_func("good_backend.hello", allow_missing=True)
if f is not None:
    report["hello"] = f("backend")
g = tvm.get_global_func("good_backend.native_answer", allow_missing=True)
if g is not None:
    report["native"] = g()
import good_backend
report["load_count"] = good_backend.LOAD_COUNT
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def backend_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment seeing the installed tvm, with both backends installed."""
    root = tmp_path_factory.mktemp("backend-env")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    # The tvm under test: the directory holding the `tvm` package, added through a .pth file.
    tvm_parent = Path(tvm.__file__).resolve().parents[1]
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # numpy too, for the device probe (wherever the test environment has it).
    numpy_parent = Path(np.__file__).resolve().parents[1]
    lines = [str(tvm_parent), str(numpy_parent)]
    if os.environ.get("COVERAGE_PROCESS_CONFIG"):
        # The suite runs under coverage (pyproject.toml), subprocesses included: these
        # interpreters are measured too, with the coverage of the test environment.
        import coverage

        lines += [
            str(Path(coverage.__file__).parents[1]),
            "import coverage; coverage.process_startup()",
        ]
    Path(purelib, "tvm_under_test.pth").write_text("\n".join(lines) + "\n")
    # A broken installation that build tools would refuse to produce: a malformed entry point.
    broken = Path(purelib, "tvm_test_broken_backend-0.1.0.dist-info")
    broken.mkdir()
    (broken / "METADATA").write_text("Metadata-Version: 2.1\nName: tvm-test-broken-backend\n")
    (broken / "entry_points.txt").write_text("[tvm.backends]\nmalformed = not a valid :: target\n")
    # Wheels built here, with this environment's setuptools; installed there without a build.
    wheels = root / "wheels"
    for package in ("good_backend", "bad_backend", "device_backend"):
        # Built from a copy, so that build artefacts stay out of the source tree.
        source = shutil.copytree(HERE / "backends" / package, root / "src" / package)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--no-build-isolation",
                "--no-deps",
                "--disable-pip-version-check",
                "-w",
                str(wheels),
                str(source),
            ],
            check=True,
            capture_output=True,
        )
    subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
            *map(str, sorted(wheels.glob("*.whl"))),
        ],
        check=True,
        capture_output=True,
    )
    return python


def probe(python: Path, tmp_path: Path, script: str = PROBE, **env: str) -> dict:
    environment = {
        **os.environ,
        "TVM_TEST_INCLUDE": str(INCLUDE),
        "TVM_TEST_BUILD_DIR": str(tmp_path),
        "TVM_TEST_DEVICE_SOURCE": str(DEVICE_SOURCE),
        **env,
    }
    environment.pop("PYTHONPATH", None)
    result = subprocess.run(
        [python, "-c", script], capture_output=True, text=True, env=environment, check=False
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_backends_load_once_and_failures_warn(backend_env: Path, tmp_path: Path) -> None:
    report = probe(backend_env, tmp_path)
    status = report["status"]
    assert status["good"] == ["loaded", None]
    assert report["hello"] == "hello backend"
    assert report["native"] == 42, "the library the backend built and loaded registered it"
    assert report["load_count"] == 1
    assert status["bad"][0] == "failed"
    assert "fails on purpose" in status["bad"][1]
    assert status["missing_target"][0] == "failed"
    assert "no_such_function" in status["missing_target"][1]
    assert status["malformed"][0] == "failed"
    warned = " ".join(report["warnings"])
    for name in ("bad", "missing_target", "malformed"):
        assert f"'{name}'" in warned, warned


def test_autoload_can_be_disabled(backend_env: Path, tmp_path: Path) -> None:
    report = probe(backend_env, tmp_path, TVM_DEVICE_BACKEND_AUTOLOAD="0")
    assert {name: s[0] for name, s in report["status"].items()} == {
        "bad": "disabled",
        "example_device": "disabled",
        "good": "disabled",
        "malformed": "disabled",
        "missing_target": "disabled",
    }
    assert report["hello"] is None and report["native"] is None
    assert report["warnings"] == []
    assert report["load_count"] == 0


DEVICE_PROBE = """
import json
import numpy as np
import tvm
import device_backend

dev = tvm.runtime.device("hexagon", 0)
data = np.arange(12, dtype="float32").reshape(3, 4)
report = {"status": [s.status for s in tvm.backends.loaded() if s.name == "example_device"]}
report["exist"] = [dev.exist, tvm.runtime.device("hexagon", 1).exist]
report["name"] = dev.device_name
report["warp_size"] = dev.warp_size
report["unknown_attr"] = dev.compute_version
x = tvm.runtime.tensor(data.T, device=dev)  # a strided source, copied in by the C backend
report["device"] = str(x.device)
report["live_while_held"] = device_backend.LIBRARY.example_device_live_allocations()
report["roundtrip"] = x.numpy().tolist() == data.T.tolist()
y = x.copyto("ext_dev:0") if tvm.runtime.ext_dev(0).exist else x
report["back"] = np.asarray(y.copyto(tvm.runtime.cpu())).tolist() == data.T.tolist()
del x, y
report["live_after"] = device_backend.LIBRARY.example_device_live_allocations()
try:
    tvm.runtime.empty((2,), "float32", tvm.runtime.device("hexagon", 1))
except ValueError as err:
    report["error"] = str(err)
print(json.dumps(report))
"""


def test_a_c_device_backend_from_an_entry_point(backend_env: Path, tmp_path: Path) -> None:
    report = probe(backend_env, tmp_path, script=DEVICE_PROBE)
    assert report["status"] == ["loaded"]
    assert report["exist"] == [True, False]
    assert report["name"] == "example C device"
    assert report["warp_size"] == 1
    assert report["unknown_attr"] is None
    assert report["device"] == "hexagon:0"
    assert report["live_while_held"] == 1
    assert report["roundtrip"] and report["back"]
    assert report["live_after"] == 0, "tensors on the device free their memory"
    assert "hexagon:1 does not exist" in report["error"]


def test_backends_report_in_this_interpreter() -> None:
    # The test environment has no backends installed: nothing loaded, nothing failed.
    assert all(s.status != "failed" for s in tvm.backends.loaded())
    assert site.getsitepackages() is not None
    assert sys.modules["tvm.backends"] is tvm.backends
