"""Workloads of Apache TVM (apache-tvm 0.27) that exercise the FFI library underneath it.

Run by an interpreter that has apache-tvm installed, one case per process::

    python workloads.py CASE      # prints one JSON line: {"case", "status", "detail"}
    python workloads.py --list    # the case names, one a line
    python workloads.py --export-parallel-kernel PATH   # a library with a parallel loop

The same file runs on both sides of ``tests/python/test_apache_tvm_on_ours.py``: Apache TVM on the
original ``libtvm_ffi.so`` and on ours (which side is only a matter of which ``tvm_ffi`` package
the interpreter imports). A case passes when it returns; its detail says what it checked. A case
fails with the exception's type and message; a crash (a signal) leaves no JSON line at all, which
the caller reports as such.

Every case checks results against numpy or against values computed independently, so a runtime
that computes the wrong answer fails here rather than only one that raises.
"""

from __future__ import annotations

import json
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np

CASES: dict[str, Callable[[], str]] = {}


def case(function: Callable[[], str]) -> Callable[[], str]:
    CASES[function.__name__] = function
    return function


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def _build(func, target: str = "llvm"):
    """Compiles a PrimFunc (or an IRModule of them) for the CPU."""
    import tvm

    return tvm.compile(func, target=target)


def _rng() -> np.random.Generator:
    return np.random.default_rng(20261207)


# -- 1. TE -> TIR -> LLVM kernels ------------------------------------------------------------


@case
def te_elementwise_add() -> str:
    import tvm
    from tvm import te

    n = 1027  # not a multiple of any vector width
    a_ph = te.placeholder((n,), name="A", dtype="float32")
    b_ph = te.placeholder((n,), name="B", dtype="float32")
    c_ph = te.compute((n,), lambda i: a_ph[i] + b_ph[i], name="C")
    lib = _build(te.create_prim_func([a_ph, b_ph, c_ph]))
    dev = tvm.cpu()
    a = _rng().standard_normal(n, dtype=np.float32)
    b = _rng().standard_normal(n, dtype=np.float32) * 3
    out = tvm.runtime.empty((n,), "float32", dev)
    lib(tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), out)
    np.testing.assert_allclose(out.numpy(), a + b, rtol=1e-6)
    return f"C = A + B over {n} float32 matches numpy"


@case
def te_reduction_sum() -> str:
    import tvm
    from tvm import te

    rows, cols = 37, 129
    a_ph = te.placeholder((rows, cols), name="A", dtype="float32")
    k = te.reduce_axis((0, cols), name="k")
    b_ph = te.compute((rows,), lambda i: te.sum(a_ph[i, k], axis=k), name="B")
    lib = _build(te.create_prim_func([a_ph, b_ph]))
    a = _rng().random((rows, cols), dtype=np.float32)
    out = tvm.runtime.empty((rows,), "float32", tvm.cpu())
    lib(tvm.runtime.tensor(a), out)
    np.testing.assert_allclose(out.numpy(), a.sum(axis=1), rtol=1e-5)
    # A max reduction over int32 as well: a second kernel in the same process.
    c_ph = te.placeholder((rows, cols), name="C", dtype="int32")
    j = te.reduce_axis((0, cols), name="j")
    d_ph = te.compute((rows,), lambda i: te.max(c_ph[i, j], axis=j), name="D")
    lib_max = _build(te.create_prim_func([c_ph, d_ph]))
    c = _rng().integers(-1000, 1000, (rows, cols), dtype=np.int32)
    out_max = tvm.runtime.empty((rows,), "int32", tvm.cpu())
    lib_max(tvm.runtime.tensor(c), out_max)
    np.testing.assert_array_equal(out_max.numpy(), c.max(axis=1))
    return f"row sums (float32) and row maxima (int32) of {rows}x{cols} match numpy"


@case
def te_matmul() -> str:
    import tvm
    from tvm import te

    m, k_len, n = 33, 65, 17
    a_ph = te.placeholder((m, k_len), name="A", dtype="float32")
    b_ph = te.placeholder((k_len, n), name="B", dtype="float32")
    k = te.reduce_axis((0, k_len), name="k")
    c_ph = te.compute((m, n), lambda i, j: te.sum(a_ph[i, k] * b_ph[k, j], axis=k), name="C")
    lib = _build(te.create_prim_func([a_ph, b_ph, c_ph]))
    a = _rng().standard_normal((m, k_len), dtype=np.float32)
    b = _rng().standard_normal((k_len, n), dtype=np.float32)
    out = tvm.runtime.empty((m, n), "float32", tvm.cpu())
    lib(tvm.runtime.tensor(a), tvm.runtime.tensor(b), out)
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-4, atol=1e-4)
    return f"({m}x{k_len}) @ ({k_len}x{n}) float32 matches numpy"


@case
def tir_schedule_split_vectorize() -> str:
    """A kernel transformed by the TIR schedule (split, unroll, vectorize) before the build."""
    import tvm
    from tvm import s_tir, te

    n = 1024
    a_ph = te.placeholder((n,), name="A", dtype="float32")
    b_ph = te.compute((n,), lambda i: a_ph[i] * 2.0 + 1.0, name="B")
    sch = s_tir.Schedule(te.create_prim_func([a_ph, b_ph]))
    (loop,) = sch.get_loops(sch.get_sblock("B"))
    outer, inner = sch.split(loop, factors=[None, 8])
    sch.vectorize(inner)
    sch.unroll(outer)
    lib = _build(sch.mod)
    a = _rng().standard_normal(n, dtype=np.float32)
    out = tvm.runtime.empty((n,), "float32", tvm.cpu())
    lib(tvm.runtime.tensor(a), out)
    np.testing.assert_allclose(out.numpy(), a * 2 + 1, rtol=1e-6)
    _check("vectorized" in sch.mod.script(), "the schedule did not vectorize the loop")
    return "split/unroll/vectorize schedule builds and matches numpy"


# -- 2. A parallel loop (the backend API: TVMBackendParallelLaunch) -----------------------------


def _parallel_add():
    """A PrimFunc ``add_parallel(a, b, c)`` over 4096 float32 whose loop is ``T.parallel``."""
    from tvm.script import tirx as T  # noqa: N812  (TVMScript's own name)

    @T.prim_func
    def add_parallel(
        a: T.Buffer((4096,), "float32"),
        b: T.Buffer((4096,), "float32"),
        c: T.Buffer((4096,), "float32"),
    ):
        T.func_attr({"global_symbol": "add_parallel", "tirx.noalias": True})
        for i in T.parallel(4096):
            c[i] = a[i] + b[i]

    return add_parallel


def export_parallel_kernel(path: str) -> None:
    """Writes the library of :func:`_parallel_add` (for a host without Apache TVM's runtime)."""
    _build(_parallel_add()).export_library(path)


@case
def tir_parallel_loop() -> str:
    import tvm

    n = 4096
    lib = _build(_parallel_add())
    # The kernel calls the runtime through its TVMBackendParallelLaunch slot (a null slot would
    # crash): in the JIT-compiled module, and in the library export_library writes, whose slots
    # the runtime's library loader fills.
    source = lib.mod.inspect_source("ll")
    _check("@__TVMBackendParallelLaunch" in source, "the kernel does not launch tasks")
    a = _rng().standard_normal(n, dtype=np.float32)
    b = _rng().standard_normal(n, dtype=np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "parallel.so"
        lib.export_library(str(path))
        loaded = tvm.runtime.load_module(str(path))
        for func in (lib["add_parallel"], loaded["add_parallel"]):
            for _ in range(3):
                out = tvm.runtime.empty((n,), "float32", tvm.cpu())
                func(tvm.runtime.tensor(a), tvm.runtime.tensor(b), out)
                np.testing.assert_allclose(out.numpy(), a + b, rtol=1e-6)
    return f"T.parallel loop over {n} elements matches numpy, JIT-compiled and exported"


# -- 3. TVMScript print and parse ----------------------------------------------------------------


@case
def tvmscript_primfunc_roundtrip() -> str:
    import tvm_ffi

    import tvm
    from tvm import te

    a_ph = te.placeholder((16, 8), name="A", dtype="float32")
    k = te.reduce_axis((0, 8), name="k")
    b_ph = te.compute((16,), lambda i: te.sum(a_ph[i, k] * 2.0, axis=k), name="B")
    func = te.create_prim_func([a_ph, b_ph])
    text = func.script()
    parsed = tvm.script.from_source(text)
    tvm.ir.assert_structural_equal(parsed, func)
    _check(tvm_ffi.structural_hash(parsed) == tvm_ffi.structural_hash(func), "hashes differ")
    _check(parsed.script() == text, "printing the parsed function gives different text")
    _check(isinstance(parsed, tvm.tirx.PrimFunc), f"parsed a {type(parsed).__name__}")
    return f"PrimFunc -> {len(text.splitlines())} lines of TVMScript -> structurally equal PrimFunc"


# Parsed with TVMScript's own names in scope (I, T, R), as the printer's output is.
_MODULE_SOURCE = """
@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def scale(a: T.Buffer((4, 4), "float32"), b: T.Buffer((4, 4), "float32")):
        T.func_attr({"tirx.noalias": True})
        for i, j in T.grid(4, 4):
            with T.sblock("b"):
                vi, vj = T.axis.remap("SS", [i, j])
                b[vi, vj] = a[vi, vj] * T.float32(3)

    @R.function
    def main(x: R.Tensor((4, 4), "float32")) -> R.Tensor((4, 4), "float32"):
        cls = Module
        with R.dataflow():
            y = R.call_tir(cls.scale, (x,), out_ty=R.Tensor((4, 4), "float32"))
            z = R.add(y, x)
            R.output(z)
        return z
"""


def _script_module():
    """The IRModule of ``_MODULE_SOURCE`` (a TIR and a Relax function), parsed from text."""
    import tvm

    return tvm.script.from_source(_MODULE_SOURCE)


@case
def tvmscript_irmodule_roundtrip() -> str:
    import tvm

    mod = _script_module()
    _check(isinstance(mod, tvm.IRModule), f"parsed a {type(mod).__name__}")
    names = sorted(gv.name_hint for gv in mod.get_global_vars())
    _check(names == ["main", "scale"], f"functions {names}")
    text = mod.script()
    reparsed = tvm.script.from_source(text)
    tvm.ir.assert_structural_equal(reparsed, mod)
    _check(reparsed.script() == text, "printing the reparsed module gives different text")
    return f"IRModule {names} -> TVMScript -> IRModule -> the same text"


# -- 4. Structural equality and hash -------------------------------------------------------------


def _te_module(op: str, n: int = 16):
    import tvm
    from tvm import te

    a_ph = te.placeholder((n,), name="A", dtype="float32")
    b_ph = te.placeholder((n,), name="B", dtype="float32")
    if op == "add":
        c_ph = te.compute((n,), lambda i: a_ph[i] + b_ph[i], name="C")
    else:
        c_ph = te.compute((n,), lambda i: a_ph[i] * b_ph[i], name="C")
    return tvm.IRModule({"main": te.create_prim_func([a_ph, b_ph, c_ph])})


@case
def structural_equal_hash() -> str:
    from tvm_ffi import structural_equal, structural_hash

    import tvm

    first, second = _te_module("add"), _te_module("add")  # built twice: different objects
    _check(not first.same_as(second), "the two modules are the same object")
    _check(structural_equal(first, second), "equal modules compare unequal")
    _check(
        structural_hash(first) == structural_hash(second),
        "equal modules hash differently",
    )
    unequal = [_te_module("mul"), _te_module("add", n=17)]
    for other in unequal:
        _check(not structural_equal(first, other), "unequal modules compare equal")
        _check(
            structural_hash(first) != structural_hash(other),
            "unequal modules hash alike",
        )
    try:
        tvm.ir.assert_structural_equal(first, unequal[0])
    except ValueError as error:
        _check("mismatch" in str(error).lower() or "C" in str(error), str(error))
    else:
        raise AssertionError("assert_structural_equal accepted unequal modules")
    # The parsed TIR+Relax module, parsed twice.
    _check(structural_equal(_script_module(), _script_module()), "parsed twice differ")
    return "equal pairs equal with equal hashes; 2 unequal pairs differ in both"


# -- 5. JSON serialisation ----------------------------------------------------------------------


@case
def save_load_json() -> str:
    import tvm

    mod = _script_module()
    text = tvm.ir.save_json(mod)
    _check(json.loads(text) is not None, "save_json did not give JSON")
    loaded = tvm.ir.load_json(text)
    tvm.ir.assert_structural_equal(loaded, mod)
    _check(tvm.ir.save_json(loaded) == text, "saving the loaded module gives different JSON")
    return f"IRModule -> {len(text)} bytes of JSON -> structurally equal IRModule"


@case
def save_load_json_tensor() -> str:
    """A Relax constant: its tensor is written by the tensor type's own JSON hooks."""
    import tvm
    from tvm import relax

    data = _rng().standard_normal((3, 5), dtype=np.float32)
    const = relax.const(data)
    text = tvm.ir.save_json(const)
    loaded = tvm.ir.load_json(text)
    np.testing.assert_array_equal(loaded.value.numpy(), data)
    tvm.ir.assert_structural_equal(loaded, const)
    return f"relax.const of a 3x5 tensor -> {len(text)} bytes of JSON -> the same values"


# -- 6. Relax ------------------------------------------------------------------------------------


def _mlp_module(batch: int, features: int, hidden: int, classes: int):
    import tvm
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((batch, features), "float32"))
    w1 = relax.Var("w1", relax.TensorType((features, hidden), "float32"))
    w2 = relax.Var("w2", relax.TensorType((hidden, classes), "float32"))
    with bb.function("main", [x, w1, w2]):
        with bb.dataflow():
            h = bb.emit(relax.op.nn.relu(relax.op.matmul(x, w1)))
            y = bb.emit(relax.op.nn.softmax(relax.op.matmul(h, w2)))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    mod = bb.get()
    _check(isinstance(mod, tvm.IRModule), "BlockBuilder did not give an IRModule")
    return mod


def _mlp_reference(x, w1, w2):
    logits = np.maximum(x @ w1, 0) @ w2
    exp = np.exp(logits - logits.max(axis=1, keepdims=True))
    return exp / exp.sum(axis=1, keepdims=True)


def _mlp_inputs(batch=4, features=10, hidden=32, classes=5):
    rng = _rng()
    return (
        rng.standard_normal((batch, features), dtype=np.float32),
        rng.standard_normal((features, hidden), dtype=np.float32) * 0.3,
        rng.standard_normal((hidden, classes), dtype=np.float32) * 0.3,
    )


@case
def relax_mlp_vm() -> str:
    import tvm
    from tvm import relax

    x, w1, w2 = _mlp_inputs()
    mod = _mlp_module(x.shape[0], x.shape[1], w1.shape[1], w2.shape[1])
    executable = tvm.compile(mod, target="llvm")
    dev = tvm.cpu()
    vm = relax.VirtualMachine(executable, dev)
    out = vm["main"](*(tvm.runtime.tensor(v, dev) for v in (x, w1, w2)))
    np.testing.assert_allclose(out.numpy(), _mlp_reference(x, w1, w2), rtol=1e-5, atol=1e-6)
    # The TVMScript module with call_tir as well.
    vm2 = relax.VirtualMachine(tvm.compile(_script_module(), target="llvm"), dev)
    data = _rng().standard_normal((4, 4), dtype=np.float32)
    np.testing.assert_allclose(vm2["main"](tvm.runtime.tensor(data)).numpy(), data * 4, rtol=1e-6)
    return "2-layer MLP (matmul, relu, softmax) and a call_tir module on the Relax VM match numpy"


# -- 7. export_library and load_module ------------------------------------------------------------


@case
def export_library_reload() -> str:
    import tvm
    from tvm import te

    n = 64
    a_ph = te.placeholder((n,), name="A", dtype="float32")
    b_ph = te.compute((n,), lambda i: a_ph[i] * a_ph[i] - 1.0, name="B")
    lib = _build(te.create_prim_func([a_ph, b_ph]))
    a = _rng().standard_normal(n, dtype=np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.so"
        lib.export_library(str(path))
        _check(path.stat().st_size > 0, "export_library wrote nothing")
        loaded = tvm.runtime.load_module(str(path))
        _check(loaded.kind == "library", f"loaded a module of kind {loaded.kind!r}")
        out = tvm.runtime.empty((n,), "float32", tvm.cpu())
        loaded["main"](tvm.runtime.tensor(a), out)
        np.testing.assert_allclose(out.numpy(), a * a - 1, rtol=1e-6)
        _check(loaded.implements_function("main"), "the loaded library lacks main")
        _check(not loaded.implements_function("no_such_function"), "implements everything")
    return "export_library -> load_module -> call matches numpy"


@case
def relax_export_reload() -> str:
    import tvm
    from tvm import relax

    x, w1, w2 = _mlp_inputs(batch=3)
    mod = _mlp_module(x.shape[0], x.shape[1], w1.shape[1], w2.shape[1])
    executable = tvm.compile(mod, target="llvm")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mlp.so"
        executable.export_library(str(path))
        loaded = tvm.runtime.load_module(str(path))
        vm = relax.VirtualMachine(loaded, tvm.cpu())
        out = vm["main"](*(tvm.runtime.tensor(v) for v in (x, w1, w2)))
    np.testing.assert_allclose(out.numpy(), _mlp_reference(x, w1, w2), rtol=1e-5, atol=1e-6)
    return "Relax executable -> export_library -> load_module -> VM matches numpy"


# -- 8. time_evaluator ----------------------------------------------------------------------------


@case
def time_evaluator() -> str:
    import tvm
    from tvm import te

    n = 1 << 16
    a_ph = te.placeholder((n,), name="A", dtype="float32")
    b_ph = te.compute((n,), lambda i: a_ph[i] + 1.0, name="B")
    lib = _build(te.create_prim_func([a_ph, b_ph]))
    a = tvm.runtime.tensor(np.zeros(n, dtype=np.float32))
    out = tvm.runtime.empty((n,), "float32", tvm.cpu())
    timer = lib.mod.time_evaluator("main", tvm.cpu(), number=5, repeat=3)
    result = timer(a, out)
    _check(len(result.results) == 3, f"{len(result.results)} repeats")
    _check(all(0 < t < 1 for t in result.results), f"times {result.results}")
    _check(0 < result.mean < 1, f"mean {result.mean}")
    np.testing.assert_array_equal(out.numpy(), np.ones(n, dtype=np.float32))
    return f"3 repeats of 5 runs of a {n}-element add, mean {result.mean * 1e6:.2f} us"


# -- More: tensors, the registry, errors, passes ------------------------------------------------


@case
def tensor_copies() -> str:
    import tvm

    dev = tvm.cpu()
    data = _rng().standard_normal((5, 7), dtype=np.float32)
    tensor = tvm.runtime.tensor(data, dev)
    _check(tuple(tensor.shape) == (5, 7), f"shape {tensor.shape}")
    _check(str(tensor.dtype) == "float32", f"dtype {tensor.dtype}")
    np.testing.assert_array_equal(tensor.numpy(), data)
    other = tvm.runtime.empty((5, 7), "float32", dev)
    tensor.copyto(other)
    np.testing.assert_array_equal(other.numpy(), data)
    other.copyfrom(data * 2)
    np.testing.assert_array_equal(other.numpy(), data * 2)
    np.testing.assert_array_equal(tensor.numpy(), data)  # the copy is not a view
    view = np.from_dlpack(tensor)  # DLPack to numpy: shares the memory
    np.testing.assert_array_equal(view, data)
    view[0, 0] = 42.0
    _check(tensor.numpy()[0, 0] == 42.0, "the DLPack view does not share the tensor's memory")
    back = tvm.runtime.from_dlpack(tensor)  # and back into TVM: the same memory again
    np.testing.assert_array_equal(back.numpy(), view)
    for dtype in ("int8", "int64", "float16", "float64", "uint16"):
        values = (np.arange(12) % 7).astype(dtype).reshape(3, 4)
        np.testing.assert_array_equal(tvm.runtime.tensor(values).numpy(), values)
    return "tensor from numpy, copyto, copyfrom, DLPack views both ways, 5 dtypes"


@case
def global_function_registry() -> str:
    import tvm_ffi

    import tvm

    names = tvm_ffi.registry.list_global_func_names()
    _check(len(names) > 1000, f"only {len(names)} global functions")
    for name in ("ffi.String", "ffi.ModuleLoadFromFile", "relax.VMCodeGen", "tirx.PrimFunc"):
        _check(name in names, f"{name} is not registered")
        _check(tvm.get_global_func(name) is not None, f"get_global_func({name!r}) is None")
    _check(tvm.get_global_func("no.such.function", allow_missing=True) is None, "missing found")

    calls = []

    @tvm.register_global_func("workloads.test.scale")
    def scale(x, factor):
        calls.append((x, factor))
        return x * factor

    func = tvm.get_global_func("workloads.test.scale")
    _check(func(7, 3) == 21, "the Python callback through the registry")
    _check(calls == [(7, 3)], f"calls {calls}")
    _check("workloads.test.scale" in tvm_ffi.registry.list_global_func_names(), "not listed")
    return f"{len(names)} global functions listed; a Python function registered and called"


@case
def error_propagation() -> str:
    import tvm
    from tvm import te

    n = 8
    a_ph = te.placeholder((n,), name="A", dtype="float32")
    b_ph = te.compute((n,), lambda i: a_ph[i] + 1.0, name="B")
    lib = _build(te.create_prim_func([a_ph, b_ph]))
    wrong = tvm.runtime.tensor(np.zeros(n + 1, dtype=np.float32))
    out = tvm.runtime.empty((n,), "float32", tvm.cpu())
    try:
        lib(wrong, out)
    except Exception as error:  # the kind Apache TVM gives: checked by message and class
        kind, message = type(error).__name__, str(error)
    else:
        raise AssertionError("a wrong shape was accepted")
    _check("shape" in message.lower() or "match" in message.lower(), message)

    # A Python exception raised in a callback crosses the C++ frames and comes back as itself.
    @tvm.register_global_func("workloads.test.raise")
    def fail(x):
        raise KeyError(f"no {x}")

    try:
        tvm.get_global_func("workloads.test.raise")("thing")
    except KeyError as error:
        _check("no thing" in str(error), str(error))
    else:
        raise AssertionError("the callback's KeyError was lost")
    # An error raised by the compiler's C++ code.
    try:
        tvm.script.from_source("this is not TVMScript (")
    except Exception as error:
        parse_kind = type(error).__name__
    else:
        raise AssertionError("nonsense parsed")
    return f"wrong shape: {kind}; callback KeyError kept; bad script: {parse_kind}"


@case
def python_pass_in_pipeline() -> str:
    """A Python pass, called from the C++ pass infrastructure, in a Sequential with C++ passes."""
    import tvm_ffi

    import tvm
    from tvm import tirx

    visited = []

    @tirx.transform.prim_func_pass(opt_level=0)
    def record(func, mod, ctx):
        visited.append(str(func.attrs["global_symbol"]) if "global_symbol" in func.attrs else "?")
        return func

    mod = _te_module("add", n=32)
    seq = tvm.transform.Sequential([tirx.transform.StmtSimplify(), record])
    with tvm.transform.PassContext(opt_level=3):
        out = seq(mod)
    _check(visited == ["main"], f"visited {visited}")
    _check(isinstance(out, tvm.IRModule), f"got {type(out).__name__}")
    analyzer = tvm.sym.Analyzer()
    x = tirx.Var("x", "int32")
    simplified = analyzer.simplify((x * 4 + 8) // 4 - 2)
    _check(tvm_ffi.structural_equal(simplified, x), f"simplified to {simplified}")
    return "Python prim_func_pass ran in a Sequential; the analyzer simplifies (4x+8)//4-2 to x"


# -- Entry point ----------------------------------------------------------------------------------


def run(name: str) -> dict:
    try:
        detail = CASES[name]()
    except Exception as error:
        lines = traceback.format_exc().strip().splitlines()
        return {
            "case": name,
            "status": "failed",
            "detail": f"{type(error).__name__}: {str(error).strip()[:2000]}",
            "traceback": "\n".join(lines[-40:]),
        }
    return {"case": name, "status": "passed", "detail": detail}


def main(argv: list[str]) -> int:
    if argv == ["--list"]:
        print("\n".join(CASES))
        return 0
    if len(argv) == 2 and argv[0] == "--export-parallel-kernel":
        export_parallel_kernel(argv[1])
        return 0
    if len(argv) != 1 or argv[0] not in CASES:
        print(f"usage: {Path(__file__).name} CASE | --list; cases: {', '.join(CASES)}")
        return 2
    # Which libtvm_ffi.so runs (the sides differ only in that), for the caller to check.
    import tvm  # noqa: F401  (loads libtvm_ffi.so)

    mapped = sorted(
        {line.split()[-1] for line in open("/proc/self/maps") if "libtvm_ffi.so" in line}
    )
    result = run(argv[0])
    result["libtvm_ffi"] = mapped
    print(json.dumps(result), flush=True)
    return 0 if result["status"] == "passed" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
