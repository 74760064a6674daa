"""Jobs for the popen-pool tests (no tests here).

Workers import this module by name to unpickle the jobs, so it imports nothing heavy: no pytest,
and ``tvm`` only inside the jobs that use it.
"""

import os
import signal
import subprocess
import sys
import threading
import time

_INIT_VALUES: tuple = ()
_INIT_CALLS = 0


def identity_after(value, seconds=0.0):
    time.sleep(seconds)
    return value


def getpid():
    return os.getpid()


def getpid_after(seconds):
    time.sleep(seconds)
    return os.getpid()


def exit_with(code, message=""):
    """Writes ``message`` to stderr, then leaves at once with exit status ``code``."""
    if message:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
    os._exit(code)


def sys_exit(code):
    sys.exit(code)


def kill_self(signum):
    os.kill(os.getpid(), signum)
    time.sleep(10)


def interrupt_self():
    """Sends SIGINT to the worker itself while the job runs (as ``kill -INT`` would)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # inherited as ignored
        signal.signal(signal.SIGINT, signal.default_int_handler)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(10)
    return "not interrupted"


def raise_value_error(message):
    raise ValueError(message)


def raise_key_error(key):
    raise KeyError(key)


class TwoArgumentError(Exception):
    """An exception type that cannot be rebuilt from a message alone."""

    def __init__(self, code, detail):
        super().__init__(code, detail)
        self.code = code
        self.detail = detail


def raise_two_argument_error():
    raise TwoArgumentError(7, "detail")


class CustomBaseError(BaseException):
    """A ``BaseException`` that is not an ``Exception``, as some libraries define."""


_BASE_EXCEPTIONS = {
    "KeyboardInterrupt": KeyboardInterrupt,
    "GeneratorExit": GeneratorExit,
    "CustomBaseError": CustomBaseError,
}


def raise_base_exception(name, message):
    """Raises the ``BaseException`` subclass called ``name`` (see ``_BASE_EXCEPTIONS``)."""
    raise _BASE_EXCEPTIONS[name](message)


def return_lock():
    return threading.Lock()


def init_values(a, b, c):
    global _INIT_VALUES, _INIT_CALLS
    _INIT_VALUES = (a, b, c)
    _INIT_CALLS += 1


def after_initializer():
    return _INIT_VALUES, _INIT_CALLS, os.getpid()


def failing_initializer():
    raise KeyError("initializer failed on purpose")


def start_grandchild():
    """Starts a long ``sleep`` process (a grandchild of the test) and returns its pid."""
    proc = subprocess.Popen(["sleep", "60"])
    return proc.pid


def fork_sleeper():
    """Forks (no exec: the child keeps every descriptor of the worker) a child that sleeps;
    returns its pid."""
    pid = os.fork()
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    return pid


def start_sleep_and_record(path, hold_seconds=0.0):
    """Starts ``sleep 1000``, writes its pid to ``path``, then keeps the job running for
    ``hold_seconds``; returns the pid."""
    proc = subprocess.Popen(["sleep", "1000"])
    with open(path + ".tmp", "w") as out:
        out.write(str(proc.pid))
    os.replace(path + ".tmp", path)
    time.sleep(hold_seconds)
    return proc.pid


def register_ffi():
    import tvm

    tvm.register_func("testing.popen_pool.triple", lambda x: 3 * x, override=True)


def call_py_ffi(x):
    import tvm

    return tvm.get_global_func("testing.popen_pool.triple")(x)


def call_cpp_ffi(x):
    import os

    import tvm

    # The worker is a fresh interpreter: it loads the testing library the suite's conftest named.
    tvm.base.load_backend_libs(os.environ["TVM_FFI_TESTING_LIB"])
    return tvm.get_global_func("testing.echo")(x)


def make_string(text):
    from tvm.ffi import String

    return String(text)


def print_to_streams(text):
    print(f"stdout: {text}", flush=True)
    print(f"stderr: {text}", file=sys.stderr, flush=True)
    return text


SIGKILL = signal.SIGKILL if hasattr(signal, "SIGKILL") else None
