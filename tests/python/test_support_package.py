"""The tvm.support package: its rule, lazy submodules (import cost), no tvm.contrib shims, and
the exit guard that keeps interpreter shutdown quiet."""

import importlib
import subprocess
import sys
import textwrap

import pytest

import tvm.contrib
import tvm.support
from tvm.support import _exit_guard

SUBMODULES = [
    "cc",
    "clang",
    "cpp",
    "emcc",
    "libinfo",
    "ndk",
    "nvcc",
    "popen_pool",
    "rocm",
    "stubgen",
    "tar",
    "utils",
    "xcode",
]


def run_python(code):
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False
    )


def test_docstring_states_the_rule():
    doc = tvm.support.__doc__
    assert "tvm.contrib" in doc and "vendor SDK integrations and experimental features" in doc
    assert "host toolchains" in doc
    assert "vendor SDK integrations and experimental features" in tvm.contrib.__doc__


def test_submodules_load_lazily_and_cheaply():
    result = run_python(
        """
        import sys
        import tvm.support
        loaded = sorted(m for m in sys.modules if m.startswith("tvm.support."))
        print(loaded, "numpy" in sys.modules, "subprocess" in sys.modules)
        tvm.support.cc.get_cc
        print("tvm.support.cc" in sys.modules, "numpy" in sys.modules)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[] False False", "True False"]


@pytest.mark.parametrize("name", SUBMODULES)
def test_every_submodule_is_reachable(name):
    module = getattr(tvm.support, name)
    assert module is importlib.import_module(f"tvm.support.{name}")
    assert module.__doc__
    assert name in dir(tvm.support)


def test_unknown_attribute():
    with pytest.raises(AttributeError, match="no attribute 'spirv'"):
        tvm.support.spirv


@pytest.mark.parametrize("name", [*SUBMODULES, "spirv", "rpc"])
def test_no_contrib_shims(name):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"tvm.contrib.{name}")


def test_describe(capsys):
    tvm.support.describe()
    out = capsys.readouterr().out
    assert f"TVM version   = {tvm.__version__}" in out
    assert "libtvm_ffi.so" in out and "USE_CUDA" in out


def test_exit_guard_outside_exit_lets_errors_through():
    assert not _exit_guard.interpreter_exiting()

    @_exit_guard.quiet_at_exit
    def broken():
        raise OSError("real problem")

    with pytest.raises(OSError, match="real problem"):
        broken()
    with pytest.raises(ValueError), _exit_guard.suppress_at_exit():
        raise ValueError("also real")
    assert _exit_guard.call_quiet_at_exit(lambda x: x + 1, 1) == 2


def test_exit_guard_silences_errors_during_shutdown():
    # The same failing cleanup, guarded and not, in an atexit callback and in a finalizer that
    # runs while the interpreter shuts down: only the unguarded ones print.
    code = """
        import atexit, weakref
        from tvm.support._exit_guard import quiet_at_exit

        def fail(tag):
            raise RuntimeError(f"cleanup failed: {tag}")

        class Holder:
            pass

        guarded, unguarded = Holder(), Holder()
        weakref.finalize(guarded, quiet_at_exit(fail), "guarded finalizer")
        weakref.finalize(unguarded, fail, "unguarded finalizer")
        atexit.register(quiet_at_exit(fail), "guarded atexit")
        atexit.register(fail, "unguarded atexit")

        class Native:
            @quiet_at_exit
            def __del__(self):
                fail("guarded __del__")

        keep = Native()
        """
    result = run_python(code)
    assert result.returncode == 0
    assert "unguarded finalizer" in result.stderr and "unguarded atexit" in result.stderr
    assert "guarded" not in result.stderr.replace("unguarded", "")
