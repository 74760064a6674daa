"""Values sized by the caller that do not fit in memory raise ``MemoryError`` (or a
``ValueError`` for sizes no memory could hold) instead of aborting the process: strings, bytes
and bytearrays copied into native values, containers, tensors, JSON text and serialization.

Each case runs in a fresh interpreter whose address space is limited (``RLIMIT_AS``) to about
512 MiB above what it holds after ``import tvm``. Before these allocations were fallible, every
case but the three tensor ones (whose allocations already were) ended the process with status 134
("memory allocation of N bytes failed")."""

from __future__ import annotations

import textwrap

import pytest

from isolated import run_isolated

#: Sets the limit, then runs the case's statement and prints the class and message it raised.
PRELUDE = """
import resource
import numpy as np
import tvm
from tvm import ffi

MIB = 1 << 20
status = open("/proc/self/status").read()
held = int(status.split("VmSize:")[1].split()[0]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (held + 512 * MIB, resource.RLIM_INFINITY))
stringify = ffi.get_global_func("ffi.json.Stringify")
"""

DICT = "d = dict.fromkeys(range(3_000_000))"

CASES = {
    "str": ('big = "x" * (300 * MIB)', "ffi.Array([big])", "MemoryError", "a string of 314572800"),
    "bytes": ('big = b"x" * (300 * MIB)', "ffi.Array([big])", "MemoryError", "314572800 bytes"),
    "bytes_convert": ('big = b"x" * (300 * MIB)', "ffi.convert(big)", "MemoryError", "314572800"),
    "bytearray": ("big = bytearray(300 * MIB)", "ffi.List([big])", "MemoryError", "314572800"),
    "array": ("items = [None] * 30_000_000", "ffi.Array(items)", "MemoryError", "30000000 values"),
    "list": ("items = [None] * 30_000_000", "ffi.List(items)", "MemoryError", "30000000 values"),
    "shape": ("items = [1] * 25_000_000", "ffi.Shape(items)", "MemoryError", "25000000"),
    "dict": (DICT, "ffi.Dict(d)", "MemoryError", "3000000 entries"),
    "map": (DICT, "ffi.Map(d)", "MemoryError", "3000000 entries"),
    "json_indent": ("", "stringify(ffi.Array([1, 2]), 2**62)", "MemoryError", "JSON text"),
    "json_text": (
        'big = ffi.Array(["x" * (150 * MIB)])',
        "stringify(big, None)",
        "MemoryError",
        "bytes",
    ),
    "serialization": (
        'big = ffi.Array([b"x" * (150 * MIB)])',
        "ffi.to_json_graph_str(big)",
        "MemoryError",
        "bytes",
    ),
    "pickle": (
        'import pickle; big = ffi.Array([b"x" * (150 * MIB)])',
        "pickle.dumps(big)",
        "MemoryError",
        "bytes",
    ),
    "tensor_empty": ("", 'tvm.runtime.empty((1000 * MIB,), "uint8")', "MemoryError", "1048576000"),
    "tensor_copy": (
        'a = np.ones(300 * MIB, dtype="uint8")',
        "tvm.runtime.tensor(a)",
        "MemoryError",
        "314572800",
    ),
    "tensor_shape": (
        "",
        'tvm.runtime.empty((2**40, 2**40), "float32")',
        "ValueError",
        "1099511627776",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_sizes_past_memory_raise_instead_of_aborting(case: str) -> None:
    setup, statement, kind, message = CASES[case]
    script = PRELUDE + textwrap.dedent(
        f"""
        {setup}
        try:
            {statement}
        except Exception as err:
            print(type(err).__name__, err)
        else:
            print("no error")
        """
    )
    out = run_isolated(script)
    assert out.startswith(kind + " "), out
    assert message in out, out
