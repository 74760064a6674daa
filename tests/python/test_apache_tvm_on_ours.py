"""Apache TVM (apache-tvm 0.27) running on our ``libtvm_ffi.so``, side by side with apache-tvm-ffi.

Each case of ``tests/apache_tvm/workloads.py`` (TE and TIR kernels built with LLVM and checked
against numpy, a parallel loop, TVMScript round trips, structural equality and hashing, JSON
graphs, a Relax MLP on the Relax VM, ``export_library`` and reload, ``time_evaluator``, tensors,
the global registry, errors, Python passes) runs in a process of its own on both libraries at
once (:mod:`apache_tvm_sides`). Ours must pass every case; apache-tvm-ffi's outcome is recorded
(``record_property("apache", ...)``, ``target/apache-tvm/results/``), not required: with
apache-tvm-ffi 0.1.15.post2 dies by SIGSEGV in ``ToJSONGraph`` (the
``save_load_json`` cases).

The parallel loop passes on ours too: its kernels call ``TVMBackendParallelLaunch`` through a
slot that the loader fills from the context symbols Apache TVM's ``libtvm_runtime.so``
registers (``TVMFFIEnvModRegisterContextSymbol``); loaded by our package alone, the same kernel
runs on our runtime's backend API (``test_parallel_kernel_runs_on_our_package``).

``scripts/apache-tvm-suite.sh`` runs the same cases outside pytest and prints the table.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import apache_tvm_env
import apache_tvm_sides

pytestmark = pytest.mark.slow

CASES = apache_tvm_sides.case_names()


@pytest.fixture(scope="session")
def apache_python() -> Path:
    return apache_tvm_env.apache_tvm_python()


@pytest.fixture(scope="session")
def site(apache_python: Path) -> Path:
    """The site directory in which Apache TVM's ``tvm_ffi`` loads our library."""
    return apache_tvm_sides.our_site(apache_python, apache_tvm_sides.our_library())


def test_the_workloads_cover_the_issue():
    # The workloads of issue 28: kernels, a parallel loop, TVMScript, structural equality and
    # hashing, JSON, Relax, export and reload, timing; and a few more.
    assert len(CASES) >= 16, CASES
    for needed in (
        "te_elementwise_add",
        "te_reduction_sum",
        "te_matmul",
        "tir_parallel_loop",
        "tvmscript_primfunc_roundtrip",
        "tvmscript_irmodule_roundtrip",
        "structural_equal_hash",
        "save_load_json",
        "relax_mlp_vm",
        "export_library_reload",
        "time_evaluator",
    ):
        assert needed in CASES


def test_our_site_loads_our_library(site: Path):
    library = apache_tvm_sides.our_library()
    installed = site / "tvm_ffi" / "lib" / "libtvm_ffi.so"
    assert installed.read_bytes() == library.read_bytes()
    # The package finds its library through the dist-info's RECORD, copied beside it.
    assert len(list(site.glob("apache_tvm_ffi-*.dist-info/RECORD"))) == 1


@pytest.mark.parametrize("case", CASES)
def test_case_on_ours_and_apache(case: str, apache_python: Path, site: Path, record_property):
    results = apache_tvm_sides.run_both(apache_python, case, site)
    for side, result in results.items():
        apache_tvm_sides.save_result(side, result)
    apache, ours = results["apache"], results["ours"]
    record_property("apache", f"{apache['status']}: {apache.get('detail', '')}")
    record_property("ours", f"{ours['status']}: {ours.get('detail', '')}")
    print(f"apache: {apache['status']}: {apache.get('detail', '')}")

    # Each side ran on its own library (a result says which libtvm_ffi.so the process mapped).
    expected = {
        "apache": apache_tvm_sides.library_in(None, apache_python),
        "ours": apache_tvm_sides.library_in(site, apache_python),
    }
    for side, result in results.items():
        if "libtvm_ffi" in result:
            assert result["libtvm_ffi"] == [str(expected[side])], (side, result["libtvm_ffi"])

    assert ours["status"] == "passed", (
        f"{case} {ours['status']} on ours ({ours.get('detail')}); on apache-tvm-ffi it "
        f"{apache['status']}\n{ours.get('traceback') or ours['log']}"
    )


# A kernel that Apache TVM compiled, loaded by our own package: no libtvm_runtime.so in the
# process registers the backend API, so our runtime provides it.
_CALL_PARALLEL_KERNEL = """
import sys
import numpy as np
import tvm

lib = tvm.runtime.load_module(sys.argv[1])
a = np.arange(4096, dtype="float32")
b = np.full(4096, 0.5, dtype="float32")
out = tvm.runtime.empty((4096,), "float32")
lib["add_parallel"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), out)
np.testing.assert_array_equal(out.numpy(), a + b)
print("ok")
"""


def test_parallel_kernel_runs_on_our_package(apache_python: Path, tmp_path: Path):
    kernel = tmp_path / "parallel.so"
    subprocess.run(
        [str(apache_python), str(apache_tvm_sides.WORKLOADS), "--export-parallel-kernel", kernel],
        env=apache_tvm_env.apache_tvm_environ(),
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    run = subprocess.run(
        [sys.executable, "-c", _CALL_PARALLEL_KERNEL, str(kernel)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", (run.returncode, run.stderr[-3000:])
