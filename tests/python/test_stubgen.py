"""tvm.support.stubgen and the type schemas it reads: a compiled library's exports (built with
the real g++), globals registered from Python with annotations, and object types with reflected
fields, written as ``.pyi`` stubs that mypy then checks code against (a wrong argument type is
an error mypy reports)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tvm
from tvm.ffi import type_schema
from tvm.support import cpp, stubgen

KERNELS = r"""
int64_t add(int64_t a, int64_t b) { return a + b; }
double mean(tvm::ffi::TensorView x) {
  const float* data = static_cast<const float*>(x.data_ptr());
  double sum = 0;
  for (int64_t i = 0; i < x.numel(); ++i) sum += data[i];
  return x.numel() ? sum / x.numel() : 0.0;
}
tvm::ffi::String shout(tvm::ffi::String text, bool loud) { return loud ? text.str() + "!" : text; }
int64_t count(tvm::ffi::Array items) { return static_cast<int64_t>(items.size()); }
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("kernels")
    return cpp.build_inline(
        "stub_kernels",
        cpp_sources=KERNELS,
        functions={"add": "Adds two integers.", "mean": None, "shout": None, "count": None},
        build_directory=out,
    )


def run_mypy(directory: Path, program: str) -> subprocess.CompletedProcess[str]:
    (directory / "use.py").write_text(textwrap.dedent(program))
    command = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "use.py"]
    return subprocess.run(
        command, cwd=directory, capture_output=True, text=True, timeout=600, check=False
    )


def test_a_library_stub_types_each_export(kernels: str, tmp_path: Path):
    text = stubgen.module_stub(kernels)
    assert "class StubKernelsModule(Module):" in text
    assert "def add(self, arg0: int, arg1: int, /) -> int:" in text
    assert '"""Adds two integers."""' in text
    assert "def mean(self, arg0: Tensor | DLPackProducer, /) -> float:" in text
    assert "def shout(self, arg0: str, arg1: bool, /) -> str:" in text
    assert "def count(self, arg0: Sequence[Any] | Array, /) -> int:" in text
    (tmp_path / "stub_kernels.pyi").write_text(text)
    good = run_mypy(
        tmp_path,
        f"""
        from typing import cast
        import tvm
        from stub_kernels import StubKernelsModule

        mod = cast(StubKernelsModule, tvm.runtime.load_module({kernels!r}))
        total: int = mod.add(1, 2)
        loud: str = mod.shout("hey", True)
        """,
    )
    assert good.returncode == 0, good.stdout + good.stderr
    bad = run_mypy(
        tmp_path,
        f"""
        from typing import cast
        import tvm
        from stub_kernels import StubKernelsModule

        mod = cast(StubKernelsModule, tvm.runtime.load_module({kernels!r}))
        mod.add("one", 2)
        """,
    )
    assert bad.returncode == 1 and 'Argument 1 to "add"' in bad.stdout, bad.stdout


def test_the_command_line_writes_the_stub(kernels: str, tmp_path: Path):
    out = tmp_path / "k.pyi"
    command = [sys.executable, "-m", "tvm.support.stubgen", "module", kernels, "-o", str(out)]
    command += ["--class-name", "Kernels"]
    subprocess.run(command, check=True, capture_output=True, text=True)
    assert "class KernelsModule(Module):" in out.read_text()


def test_python_registrations_record_docs_and_schemas():
    @tvm.register_func("stubtest.scale", override=True)
    def scale(x: float, times: int | None, names: list[str]) -> float:
        """Scales x."""
        return x * (times or 1)

    metadata = tvm.ffi.get_global_func_metadata("stubtest.scale")
    schema = json.loads(metadata["type_schema"])
    assert schema == {
        "type": "ffi.Function",
        "args": [
            {"type": "float"},
            {"type": "float"},
            {"type": "Optional", "args": [{"type": "int"}]},
            {"type": "ffi.Array", "args": [{"type": "ffi.String"}]},
        ],
    }
    assert tvm.ffi.get_global_func_doc("stubtest.scale") == "Scales x."

    # No annotations, or variadic parameters: no schema is recorded.
    tvm.register_func("stubtest.untyped", lambda a, b: a, override=True)
    tvm.register_func("stubtest.variadic", lambda *a: a, override=True)
    assert tvm.ffi.get_global_func_metadata("stubtest.untyped") == {}
    assert tvm.ffi.get_global_func_metadata("stubtest.variadic") == {}


def test_a_globals_stub_types_functions_and_object_types(tmp_path: Path):
    @tvm.register_func("stubglobals.area", override=True)
    def area(width: float, height: float) -> float:
        """The area of a rectangle."""
        return width * height

    tvm.register_func("stubglobals.anything", lambda *a: None, override=True)
    tvm.register_func("stubglobals.deeper.hidden", lambda: None, override=True)
    text = stubgen.globals_stub("stubglobals")
    assert "def area(arg0: float, arg1: float, /) -> float:" in text
    assert '"""The area of a rectangle."""' in text
    assert "def anything(*args: Any) -> Any:" in text
    assert "hidden" not in text
    (tmp_path / "stubglobals.pyi").write_text(text)
    result = run_mypy(
        tmp_path,
        """
        import stubglobals

        size: float = stubglobals.area(2.0, 3.0)
        stubglobals.area("wide", 3.0)
        """,
    )
    assert 'Argument 1 to "area" has incompatible type "str"' in result.stdout, result.stdout


def test_rust_registrations_stub_their_types_and_fields():
    """The testing library registers typed Rust globals (``Function::register_typed_global``)
    and a Rust object type whose fields record their schemas."""
    keys = tvm.get_global_func("ffi.GetRegisteredTypeKeys")()
    assert "testing.TestIntPair" in keys, "the testing library registers testing.TestIntPair"
    assert tvm.ffi.get_global_func_doc("testing.int_pair_sum") == "The sum of a pair's two values."
    text = stubgen.globals_stub("testing")
    assert "class TestIntPair(Object):" in text
    assert "    a: int" in text and "    b: int" in text and "    name: str" in text
    assert "def int_pair_sum(arg0: TestIntPair, /) -> int:" in text
    assert "def make_int_pair(arg0: int, arg1: int, arg2: str, /) -> TestIntPair:" in text


def test_schemas_of_annotations_and_back():
    classes: dict[str, str] = {}
    for annotation, schema, back in [
        (int, {"type": "int"}, "int"),
        (bool, {"type": "bool"}, "bool"),
        (str, {"type": "ffi.String"}, "str"),
        (None, {"type": "None"}, "None"),
        (tvm.ffi.Tensor, {"type": "ffi.Tensor"}, "Tensor"),
        (
            dict[str, int],
            {"type": "ffi.Map", "args": [{"type": "ffi.String"}, {"type": "int"}]},
            "Map",
        ),
        (object, {"type": "Any"}, "Any"),
    ]:
        assert type_schema.schema_of_annotation(annotation) == schema
        assert type_schema.annotation_of(schema, classes) == back
    callable_schema = {"type": "ffi.Function", "args": [{"type": "int"}, {"type": "float"}]}
    assert type_schema.annotation_of(callable_schema, classes) == "Callable[[float], int]"
    optional = {"type": "Optional", "args": [{"type": "ffi.Bytes"}]}
    assert type_schema.annotation_of(optional, classes) == "bytes | None"
    assert type_schema.annotation_of({"type": "my.Node"}, {"my.Node": "pkg.Node"}) == "pkg.Node"
    assert type_schema.annotation_of({"type": "my.Unknown"}, classes) == "Object"
    # Parameters accept what converts: any sequence, mapping or DLPack producer.
    ints = {"type": "ffi.Array", "args": [{"type": "int"}]}
    assert type_schema.annotation_of(ints, classes, param=True) == "Sequence[int] | Array"
    assert type_schema.annotation_of(ints, classes) == "Array"
    tensor = {"type": "ffi.Tensor"}
    assert type_schema.annotation_of(tensor, classes, param=True) == "Tensor | DLPackProducer"


def test_bad_stub_requests_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TVM_FFI_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError):
        stubgen.module_stub(tmp_path / "missing.so")
    with pytest.raises(ValueError, match="prefix"):
        stubgen.globals_stub("")
    with pytest.raises(ValueError, match="identifier"):
        stubgen.module_stub(cpp.build_inline("named", cpp_sources="int x;"), "not valid")


def test_odd_docs_names_and_schemas_still_make_stubs_that_parse():
    import ast

    from tvm import _native

    bad_schemas = [
        '{"type":"ffi.Function","args":"abc"}',
        '{"type":"ffi.Function","args":[1,2]}',
        '{"type":"ffi.Function","args":[{"type":["x"]}]}',
        '{"type":"ffi.Function","args":[{"type":"Optional","args":{"a":1}}]}',
        '{"type":"ffi.Function","args":[{"type":"int"},{"type":"ffi.Array","args":[null]}]}',
    ]
    for i, schema in enumerate(bad_schemas):
        metadata = json.dumps({"type_schema": schema})
        _native.register_global_func(f"stubodd.bad{i}", lambda *a: 0, True, "", metadata)
    docs = ['ends with "hi"', "a\x00b", "back\\slash", 'three """ quotes']
    for i, doc in enumerate(docs):
        _native.register_global_func(f"stubodd.doc{i}", lambda *a: 0, True, doc, "")
    _native.register_global_func("stubodd.Any", lambda *a: 0, True, "", "")
    text = stubgen.globals_stub("stubodd")
    tree = ast.parse(text)
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert "Any" not in functions, "a global named like an import is left out"
    for i in range(len(bad_schemas)):
        assert f"def bad{i}(*args: Any) -> Any:" in text
    for i, doc in enumerate(docs):
        assert ast.get_docstring(functions[f"doc{i}"], clean=False) == doc
    with pytest.raises(TypeError, match="prefix"):
        stubgen.globals_stub(5)  # type: ignore[arg-type]


def test_registrations_with_odd_annotations_record_no_schema():
    def odd(x: [int]) -> int:  # type: ignore[valid-type]
        return 0

    def broken(x: "1 +") -> int:  # type: ignore[name-defined]  # noqa: F722
        return 0

    tvm.register_func("stubodd.odd", odd, override=True)
    tvm.register_func("stubodd.broken", broken, override=True)
    schema = json.loads(tvm.ffi.get_global_func_metadata("stubodd.odd")["type_schema"])
    assert schema["args"][1] == {"type": "Any"}
    assert tvm.ffi.get_global_func_metadata("stubodd.broken") == {}
