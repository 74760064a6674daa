"""CPU kernels that call the backend API (thread pool, barrier, workspaces), built by Apache TVM.

Run by an interpreter that has apache-tvm 0.27 installed::

    python backend_kernels.py OUT_DIR

writes one shared library per kernel (``tvm.compile(..., target="llvm").export_library``) and
``OUT_DIR/kernels.json``, which describes each: its file, the function to call, the shape and
dtype of every argument, and the ``__TVM*`` pointer slots the library holds (which the loader
must fill). ``tests/python/test_backend_api.py`` loads the libraries with our runtime, which has
no Apache TVM in its process, and checks the results against numpy.

Each kernel is checked here for the backend calls it exists to make (in the LLVM IR Apache TVM
generates): a kernel that stopped making them would leave the tests checking nothing, so the
build fails loudly instead.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Kernel:
    """A kernel: how to make it, its exported function, its arguments and the slots it uses."""

    make: Callable[[], object]  # a PrimFunc or an IRModule
    function: str
    args: tuple[tuple[tuple[int, ...], str], ...]  # (shape, dtype) of each tensor argument
    uses: tuple[str, ...]  # backend functions the generated code must call through slots
    about: str


KERNELS: dict[str, Kernel] = {}

MATMUL_N = 256
ROWS, COLS = 64, 1024
NESTED_OUTER, NESTED_INNER = 16, 64
CHECKED_N = 64
TINY_N = 64
PACKED_N = 256
PACKED_CALLEE = "backend_test.plus_one"


def _matmul():
    """``c = a @ b`` over 256x256 float32; the loop over rows of ``c`` is parallel."""
    from tvm.script import tirx as T  # noqa: N812  (TVMScript's own name)

    n = MATMUL_N

    @T.prim_func
    def matmul(
        a: T.Buffer((n, n), "float32"),
        b: T.Buffer((n, n), "float32"),
        c: T.Buffer((n, n), "float32"),
    ):
        T.func_attr({"global_symbol": "matmul", "tirx.noalias": True})
        for i in T.parallel(n):
            for j in range(n):
                c[i, j] = T.float32(0)
            for k in range(n):
                for j in range(n):
                    c[i, j] = c[i, j] + a[i, k] * b[k, j]

    return matmul


def _two_stage():
    """Two parallel stages separated by a barrier, with workspaces.

    Stage one writes ``mid = 2 * a`` into a 256 KiB workspace allocated by the function; after
    the barrier, stage two reads rows that other tasks wrote, through a 4 KiB workspace that each
    iteration allocates inside the parallel loop:
    ``c[i, j] = (mid[R-1-i, C-1-j] + 1) + mid[i, j]``, that is
    ``c = 2 * a[::-1, ::-1] + 1 + 2 * a``.
    """
    from tvm.script import tirx as T  # noqa: N812

    rows, cols = ROWS, COLS

    @T.prim_func
    def two_stage(a: T.Buffer((rows, cols), "float32"), c: T.Buffer((rows, cols), "float32")):
        T.func_attr({"global_symbol": "two_stage", "tirx.noalias": True})
        mid = T.decl_buffer((rows, cols), "float32")
        with T.attr(0, "pragma_parallel_launch_point", 1):
            with T.attr(0, "pragma_parallel_barrier_when_finish", 1):
                for i in T.parallel(rows):
                    for j in range(cols):
                        mid[i, j] = a[i, j] * T.float32(2)
            for i in T.parallel(rows):
                row = T.decl_buffer((cols,), "float32")
                for j in range(cols):
                    row[j] = mid[rows - 1 - i, j] + T.float32(1)
                for j in range(cols):
                    c[i, j] = row[cols - 1 - j] + mid[i, j]

    return two_stage


def _nested():
    """A parallel loop whose body launches a parallel loop: ``c[i, j] = 3 * a[i, j] + i``.

    Apache TVM's code generator refuses ``T.parallel`` directly inside ``T.parallel`` in one
    function, so the inner loop lives in a subroutine that the outer loop's body calls: each
    outer task makes a launch of its own (a nested launch, which runs serially).
    """
    from tvm.script import ir as I  # noqa: N812
    from tvm.script import tirx as T  # noqa: N812

    outer, inner = NESTED_OUTER, NESTED_INNER

    # (TVMScript's module class: its methods are PrimFuncs, with no ``self``.)
    @I.ir_module
    class Nested:
        # The subroutine returns int32: the launch's status is returned through it (a void
        # subroutine with a parallel loop fails LLVM's verifier in apache-tvm 0.27).
        @T.prim_func(private=True)
        def row(a: T.handle("float32"), c: T.handle("float32"), i: T.int32) -> T.int32:  # noqa: N805
            T.func_attr({"tirx.noalias": True})
            a_flat = T.decl_buffer((outer * inner,), "float32", data=a)
            c_flat = T.decl_buffer((outer * inner,), "float32", data=c)
            for j in T.parallel(inner):
                c_flat[i * inner + j] = a_flat[i * inner + j] * T.float32(3) + T.Cast("float32", i)
            return 0

        @T.prim_func
        def nested(
            a: T.Buffer((outer, inner), "float32"),  # noqa: N805
            c: T.Buffer((outer, inner), "float32"),
        ):
            T.func_attr({"global_symbol": "nested", "tirx.noalias": True})
            for i in T.parallel(outer):
                T.evaluate(Nested.row(a.data, c.data, i))

    return Nested


def _checked():
    """``c = 2 * a`` over int32, where a negative element fails the task that meets it with
    ``ValueError: negative input to checked``."""
    from tvm.script import tirx as T  # noqa: N812

    n = CHECKED_N

    @T.prim_func
    def checked(a: T.Buffer((n,), "int32"), c: T.Buffer((n,), "int32")):
        T.func_attr({"global_symbol": "checked", "tirx.noalias": True})
        for i in T.parallel(n):
            T.Assert(a[i] >= 0, "negative input to checked", error_kind="ValueError")
            c[i] = a[i] * 2

    return checked


def _tiny():
    """``a += 1`` over 64 int32 in a parallel loop: a launch with almost no work in it."""
    from tvm.script import tirx as T  # noqa: N812

    n = TINY_N

    @T.prim_func
    def tiny(a: T.Buffer((n,), "int32")):
        T.func_attr({"global_symbol": "tiny", "tirx.noalias": True})
        for i in T.parallel(n):
            a[i] = a[i] + 1

    return tiny


def _packed_call():
    """``c = 2 * (a + 1)`` over 256 float32: the global function ``backend_test.plus_one``
    (which the process loading the kernel registers) writes ``a + 1`` into ``c`` through
    ``T.call_packed``, then a parallel loop doubles ``c``."""
    from tvm.script import tirx as T  # noqa: N812

    n = PACKED_N

    @T.prim_func
    def packed_call(a: T.Buffer((n,), "float32"), c: T.Buffer((n,), "float32")):
        T.func_attr({"global_symbol": "packed_call", "tirx.noalias": True})
        T.evaluate(T.call_packed(PACKED_CALLEE, a, c))
        for i in T.parallel(n):
            c[i] = c[i] * T.float32(2)

    return packed_call


KERNELS["matmul"] = Kernel(
    _matmul,
    "matmul",
    (((MATMUL_N, MATMUL_N), "float32"),) * 3,
    ("TVMBackendParallelLaunch",),
    "c = a @ b, 256x256 float32, rows in parallel",
)
KERNELS["two_stage"] = Kernel(
    _two_stage,
    "two_stage",
    (((ROWS, COLS), "float32"),) * 2,
    (
        "TVMBackendParallelLaunch",
        "TVMBackendParallelBarrier",
        "TVMBackendAllocWorkspace",
        "TVMBackendFreeWorkspace",
    ),
    "c = 2 * a[::-1, ::-1] + 1 + 2 * a through a barrier and workspaces",
)
KERNELS["nested"] = Kernel(
    _nested,
    "nested",
    (((NESTED_OUTER, NESTED_INNER), "float32"),) * 2,
    ("TVMBackendParallelLaunch",),
    "c[i, j] = 3 * a[i, j] + i, a parallel launch in each parallel task",
)
KERNELS["checked"] = Kernel(
    _checked,
    "checked",
    (((CHECKED_N,), "int32"),) * 2,
    ("TVMBackendParallelLaunch",),
    "c = 2 * a; a negative element raises ValueError from its task",
)
KERNELS["tiny"] = Kernel(
    _tiny,
    "tiny",
    (((TINY_N,), "int32"),),
    ("TVMBackendParallelLaunch",),
    "a += 1 over 64 int32: fork-join latency",
)
KERNELS["packed_call"] = Kernel(
    _packed_call,
    "packed_call",
    (((PACKED_N,), "float32"),) * 2,
    ("TVMFFIEnvModLookupFromImports", "TVMFFIFunctionCall", "TVMBackendParallelLaunch"),
    f"c = 2 * (a + 1), with a + 1 computed by the global function {PACKED_CALLEE}",
)

_SLOT = re.compile(r"^@(__TVM\w+) = .*global ptr null", re.MULTILINE)
_FUNCTION = re.compile(r"^define [^@]*@([\w.]+)\(.*?^}$", re.MULTILINE | re.DOTALL)


def _slot_calls(ir: str) -> set[str]:
    """The backend functions the IR calls through slots (``load ptr, ptr @__Name``)."""
    return set(re.findall(r"load ptr, ptr @__(TVM\w+)", ir))


def _task_launches(ir: str) -> bool:
    """Whether the body of a parallel task (``__tvm_parallel_lambda*``) launches tasks itself."""
    return any(
        match.group(1).startswith("__tvm_parallel_lambda")
        and "TVMBackendParallelLaunch" in _slot_calls(match.group(0))
        for match in _FUNCTION.finditer(ir)
    )


def build(name: str, out_dir: Path) -> dict:
    """Builds one kernel into ``out_dir`` and returns its entry of ``kernels.json``."""
    import tvm

    kernel = KERNELS[name]
    lib = tvm.compile(kernel.make(), target="llvm")
    ir = lib.mod.inspect_source("ll")
    missing = [use for use in kernel.uses if use not in _slot_calls(ir)]
    if missing:
        raise RuntimeError(f"kernel {name}: the generated code does not call {missing}")
    if name == "nested" and not _task_launches(ir):
        raise RuntimeError("kernel nested: the parallel task does not launch tasks of its own")
    path = out_dir / f"{name}.so"
    lib.export_library(str(path))
    return {
        "file": path.name,
        "function": kernel.function,
        "args": [{"shape": list(shape), "dtype": dtype} for shape, dtype in kernel.args],
        "slots": sorted(_SLOT.findall(ir)),
        "about": kernel.about,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(f"usage: {Path(__file__).name} OUT_DIR", file=sys.stderr)
        return 2
    import tvm

    out_dir = Path(argv[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    kernels = {name: build(name, out_dir) for name in KERNELS}
    description = {"apache_tvm": tvm.__version__, "kernels": kernels}
    (out_dir / "kernels.json").write_text(json.dumps(description, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
