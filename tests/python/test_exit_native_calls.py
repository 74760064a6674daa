"""A process exits cleanly while daemon threads are inside every kind of native call that
releases the interpreter lock: tensor allocation and copies, device queries, synchronization and
streams, and packed calls marked ``release_gil``, on the local CPU and on a remote device whose
session and server go away at exit.

The same holds for daemon threads running Python callbacks that native calls make (Python code
with native frames below it).

Before these calls went through the exit gate, such runs printed the failures of calls cut off
by the exit, and some aborted ("FATAL: exception not rethrown") or crashed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys, threading, time
    import numpy as np
    import tvm
    from tvm import ffi, rpc

    server = rpc.Server(port=0)
    sess = rpc.connect("127.0.0.1", server.port)
    data = np.ones(1 << 14, dtype="float32")

    def copy_in(device):
        t = tvm.runtime.empty(data.shape, "float32", device)
        while True:
            t.copyfrom(data)

    def copy_out(device):
        t = tvm.runtime.tensor(data, device=device)
        while True:
            t.numpy()
            t.copyto(tvm.cpu(0))
            t.copyto(tvm.runtime.empty(data.shape, "float32", device))

    def alloc(device):
        while True:
            tvm.runtime.empty((1024,), "float32", device)

    def device_calls(device):
        while True:
            device.sync()
            device.exist
            device.max_threads_per_block
            device.free_raw_stream(device.create_raw_stream())

    def packed(device):
        copy = ffi.get_global_func("runtime.TensorCopyFromTo")
        copy.release_gil = True
        source = tvm.runtime.tensor(data)
        target = tvm.runtime.empty(data.shape, "float32", device)
        while True:
            copy(source, target)

    for device in (tvm.cpu(0), sess.cpu(0)):
        for kind in (copy_in, copy_out, alloc, device_calls, packed):
            threading.Thread(target=kind, args=(device,), daemon=True).start()
    time.sleep(float(sys.argv[1]))
    print("exiting", flush=True)
    """
)


@pytest.mark.parametrize("run", range(4))
def test_exit_with_daemon_threads_inside_native_calls_is_clean(run: int, tmp_path: Any) -> None:
    # Vary the moment of the exit relative to the daemon threads' calls.
    assert_clean_exit(tmp_path, SCRIPT, [str(LINGER[run])], status=0)


#: Daemon threads inside Python callbacks that native calls make (Python code with native frames
#: below it): a Python-backed function called from Python, `testing.apply`, a structural walk,
#: nested native -> Python -> native calls, callbacks that raise, and one that never returns; the
#: main thread then exits with status 3.
CALLBACK_SCRIPT = textwrap.dedent(
    """
    import sys, threading, time
    import tvm
    from tvm import ffi

    tvm.base.load_backend_libs(sys.argv[2])
    apply = ffi.get_global_func("testing.apply")
    echo = ffi.get_global_func("testing.echo")
    ffi.register_func("exit_test.identity", lambda x: x)
    identity = ffi.get_global_func("exit_test.identity")

    def busy(x):
        total = 0
        for i in range(200):
            total += i
        return x

    def raising(x):
        return 1 / 0

    def spin(x):
        while True:
            sum(range(100))

    def nested(x):
        return apply(lambda y: echo(y), x)

    def loop(call):
        while True:
            try:
                call()
            except Exception:
                pass

    calls = [
        lambda: identity(1),
        lambda: apply(busy, 1),
        lambda: ffi.structural_walk(ffi.Array([1, 2]), busy),
        lambda: apply(nested, 1),
        lambda: apply(raising, 1),
        lambda: apply(lambda x: apply(raising, x), 1),
        lambda: apply(spin, 1),
    ]
    for call in calls:
        threading.Thread(target=loop, args=(call,), daemon=True).start()
    time.sleep(float(sys.argv[1]))
    print("exiting", flush=True)
    sys.exit(3)
    """
)


@pytest.mark.parametrize("run", range(4))
def test_exit_with_daemon_threads_inside_python_callbacks_is_clean(run: int, tmp_path: Any) -> None:
    testing_lib = os.environ["TVM_FFI_TESTING_LIB"]
    assert_clean_exit(tmp_path, CALLBACK_SCRIPT, [str(LINGER[run]), testing_lib], status=3)


#: Seconds the main thread lets the daemon threads run before it exits, one per run.
LINGER = (0.1, 0.3, 0.5, 0.7)


def assert_clean_exit(tmp_path: Any, source: str, args: list[str], status: int) -> None:
    """Runs ``source`` as a script with ``args``: it must exit with ``status``, print only
    "exiting", and write nothing to stderr."""
    script = tmp_path / "exit_script.py"
    script.write_text(source)
    done = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )
    assert done.returncode == status, done.stderr[-3000:]
    assert done.stderr == ""
    assert done.stdout == "exiting\n"
