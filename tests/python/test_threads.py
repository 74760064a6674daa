"""Containers shared between Python threads while native functions run without the interpreter
lock (``release_gil = True``): every operation sees the container whole, so nothing crashes,
corrupts the heap or reads out of bounds. Each scenario runs in a fresh interpreter, so a crash
fails the test instead of the suite."""

import subprocess
import sys
import textwrap

import pytest

SCENARIO = textwrap.dedent(
    """
    import sys, threading
    import tvm

    kind, rounds = sys.argv[1], int(sys.argv[2])
    if kind == "list":
        c = tvm.ffi.List(["s%d" % i * 3 for i in range(50)])
        readers = [("ffi.ListGetItem", (3,)), ("ffi.ListContains", ("zz",)), ("ffi.ListSize", ())]
    else:
        c = tvm.ffi.Dict({"k%d" % i: "v%d" % i * 3 for i in range(50)})
        readers = [
            ("ffi.DictGetItemOrMissing", ("k3",)),
            ("ffi.DictCount", ("k7",)),
            ("ffi.DictSize", ()),
        ]
    stop = threading.Event()

    def mutate():
        i = 0
        while not stop.is_set():
            i += 1
            if kind == "list":
                c.clear()
                c.extend(["x%d" % j * 3 for j in range(50)])
            else:
                c["k%d" % (i % 100)] = "v" * 20
                if i % 200 == 0:
                    c.clear()

    writer = threading.Thread(target=mutate)
    writer.start()
    try:
        for name, args in readers:
            f = tvm.get_global_func(name)
            f.release_gil = True
            for _ in range(rounds):
                try:
                    f(c, *args)
                except (IndexError, KeyError):
                    pass  # the writer cleared it just now: a clean error, not a crash
    finally:
        stop.set()
        writer.join()
    print("ok", len(c) >= 0)
    """
)


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_native_readers_and_a_python_writer_share_a_container(kind):
    result = subprocess.run(
        [sys.executable, "-c", SCENARIO, kind, "20000"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "ok True"
