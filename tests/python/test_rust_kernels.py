"""Kernels written in Rust (``examples/rust-kernels``, a cdylib exporting typed functions with
``tvm_ffi::export_typed_func!``) loaded as a module from Python: calls with tensors, optional
arguments and typed containers, the errors of bad arguments, and the type schemas and docs the
exports record (read back as a stub that mypy checks code against)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tvm
from tvm.support import stubgen


@pytest.fixture(scope="module")
def kernels(rust_kernels: Path) -> tvm.ffi.Module:
    return tvm.runtime.load_module(rust_kernels)


def test_tensor_kernels_run_on_numpy_and_tvm_tensors(kernels):
    x = np.arange(6, dtype="float32").reshape(2, 3)
    y = np.zeros_like(x)
    kernels.add_one(x, y)
    np.testing.assert_array_equal(y, x + 1)
    kernels.add_one(tvm.ffi.from_dlpack(y), tvm.ffi.from_dlpack(x))
    np.testing.assert_array_equal(x, y + 1)
    with pytest.raises(TypeError, match="x must be a float32 CPU tensor, got int32"):
        kernels.add_one(np.zeros(3, dtype="int32"), np.zeros(3, dtype="float32"))
    with pytest.raises(ValueError, match=r"x has shape \[3\] but y has \[4\]"):
        kernels.add_one(np.zeros(3, dtype="float32"), np.zeros(4, dtype="float32"))
    read_only = np.zeros(6, dtype="float32")
    read_only.setflags(write=False)
    with pytest.raises(ValueError, match="y is read-only"):
        kernels.add_one(np.zeros(6, dtype="float32"), read_only)
    assert read_only.tolist() == [0.0] * 6
    with pytest.raises(TypeError, match=r"Expected `ffi\.Tensor` but got `ffi\.String`"):
        kernels.add_one("not a tensor", y)


def test_options_and_typed_containers(kernels):
    assert kernels.scale(3.0, None) == 6.0 and kernels.scale(3.0, 0.5) == 1.5
    assert kernels.greet("you") == "hello, you"
    assert kernels.total_length(["ab", "cde"]) == 5
    assert kernels.total_length(tvm.ffi.Array(["x"])) == 1
    assert kernels.count_keys({"a": 1, "b": 5}) == 6
    with pytest.raises(TypeError, match=r"element 1 of the array is `int`, not `ffi\.String`"):
        kernels.total_length(["ab", 3])
    with pytest.raises(TypeError, match=r'the value of key "a" in the map is `ffi.String`'):
        kernels.count_keys({"a": "x"})


def test_exports_record_schemas_and_docs(kernels, rust_kernels: Path, tmp_path: Path):
    assert kernels.get_function_doc("add_one").startswith("Writes x + 1 into y")
    assert kernels.get_function_doc("scale") is None
    schema = kernels.get_function_metadata("total_length")["type_schema"]
    assert '{"type":"ffi.Array","args":[{"type":"ffi.String"}]}' in schema
    stub = stubgen.module_stub(rust_kernels)
    assert "def scale(self, arg0: float, arg1: float | None, /) -> float:" in stub
    assert "def total_length(self, arg0: Sequence[str] | Array, /) -> int:" in stub
    assert "def add_one(self, arg0: Tensor | DLPackProducer" in stub
    (tmp_path / "rust_kernels_stub.pyi").write_text(stub)
    (tmp_path / "use.py").write_text(
        "from typing import cast\n"
        "import numpy as np\n"
        "import tvm\n"
        "from rust_kernels_stub import RustKernelsModule\n"
        f"mod = cast(RustKernelsModule, tvm.runtime.load_module({str(rust_kernels)!r}))\n"
        "n: int = mod.total_length(['a', 'b'])\n"
        "mod.add_one(np.zeros(2, 'float32'), np.zeros(2, 'float32'))\n"
        "mod.scale(1.0, None)\n"
        "mod.total_length([1, 2])\n"
    )
    command = [sys.executable, "-m", "mypy", "--no-incremental", "use.py"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert result.returncode == 1, result.stdout
    # Only the last line, which passes ints for strings, is an error.
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert errors and all(line.startswith("use.py:9:") for line in errors), result.stdout
    assert 'expected "str"' in errors[0], result.stdout


def test_object_types_derived_in_rust(kernels):
    """``#[derive(Object)]`` registers ``rust_kernels.Rect`` with its fields, and
    ``#[derive(ObjectRef)]`` makes ``RectRef`` an argument type that names the key."""
    rect = kernels.make_rect(2.0, 3.0, "box")
    assert (rect.width, rect.height, rect.label) == (2.0, 3.0, "box")
    assert kernels.area(rect) == 6.0
    with pytest.raises(TypeError, match=r"Expected `rust_kernels\.Rect` but got `int`"):
        kernels.area(5)
    assert kernels.get_function_doc("make_rect") == "A rectangle of the given size."
