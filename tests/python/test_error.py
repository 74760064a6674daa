"""Exceptions across the native boundary: kinds, classes, identity and tracebacks (issue 3, §6)."""

import builtins
import importlib
import os
import subprocess
import sys
import traceback
import uuid
from pathlib import Path

import pytest

import tvm
from tvm import error

apply = tvm.get_global_func("testing.apply")
raise_error = tvm.get_global_func("testing.test_raise_error")

RUNTIME_SUBCLASSES = [
    error.InternalError,
    error.RPCError,
    error.OpError,
    error.DiagnosticError,
    error.ScheduleError,
]

BUILTIN_KINDS = [
    "ValueError",
    "TypeError",
    "IndexError",
    "KeyError",
    "AttributeError",
    "NotImplementedError",
    "RuntimeError",
    "MemoryError",
    "OverflowError",
    "RecursionError",
]

# Names of the old API that must not exist (spelled in parts, so that searches for them in the
# sources find only real uses).
REMOVED_ERROR_CLASS = "TVM" + "Error"
REMOVED_FFI_MODULE = "tvm." + "_ffi"


def unique_kind(prefix="Kind"):
    return f"{prefix}{uuid.uuid4().hex}"


def native_frames(tb):
    return [f for f in traceback.extract_tb(tb) if f.filename.endswith(".rs")]


def frame_names(tb):
    return [(Path(f.filename).name, f.name) for f in traceback.extract_tb(tb)]


# ---- classes and kinds -----------------------------------------------------------------------


@pytest.mark.parametrize("cls", RUNTIME_SUBCLASSES, ids=lambda c: c.__name__)
def test_error_classes_subclass_runtime_error_directly(cls):
    assert cls.__bases__ == (RuntimeError,)
    assert cls.__module__ == "tvm.error"


@pytest.mark.parametrize("cls", RUNTIME_SUBCLASSES, ids=lambda c: c.__name__)
def test_native_error_of_each_runtime_kind_raises_its_class(cls):
    with pytest.raises(cls) as info:
        raise_error(cls.__name__, "message for the kind")
    assert type(info.value) is cls
    assert str(info.value) == "message for the kind"


@pytest.mark.parametrize("kind", BUILTIN_KINDS)
def test_builtin_kinds_map_to_the_builtins(kind):
    builtin = getattr(builtins, kind)
    with pytest.raises(builtin) as info:
        raise_error(kind, "builtin message")
    assert type(info.value) is builtin
    assert "builtin message" in str(info.value)


def test_unknown_kind_is_runtime_error_with_the_message():
    kind = unique_kind("Unregistered")
    with pytest.raises(RuntimeError) as info:
        raise_error(kind, "the message")
    assert type(info.value) is RuntimeError
    assert "the message" in str(info.value)


def test_register_error_as_decorator_with_a_kind():
    kind = unique_kind()

    @error.register_error(kind)
    class CustomError(RuntimeError):
        pass

    with pytest.raises(CustomError, match="custom message"):
        raise_error(kind, "custom message")


def test_register_error_directly():
    kind = unique_kind()

    class DirectError(ValueError):
        pass

    assert error.register_error(kind, DirectError) is DirectError
    with pytest.raises(DirectError) as info:
        raise_error(kind, "direct")
    assert type(info.value) is DirectError


def test_register_error_as_bare_decorator_uses_the_class_name():
    name = unique_kind("Bare")
    cls = type(name, (RuntimeError,), {})
    assert error.register_error(cls) is cls
    with pytest.raises(cls):
        raise_error(name, "bare")


def test_register_error_rejects_non_exception_classes():
    with pytest.raises(TypeError):
        error.register_error(unique_kind(), int)


def test_native_error_keeps_native_frames_in_its_traceback():
    with pytest.raises(ValueError) as info:
        raise_error("ValueError", "with frames")
    tb = info.value.__traceback__
    assert native_frames(tb), frame_names(tb)
    frames = traceback.extract_tb(tb)
    # The calling test frame comes before the native frames.
    test_index = [f.name for f in frames].index(
        "test_native_error_keeps_native_frames_in_its_traceback"
    )
    first_native = next(i for i, f in enumerate(frames) if f.filename.endswith(".rs"))
    assert test_index < first_native
    # The formatted traceback is printable.
    text = "".join(traceback.format_exception(info.type, info.value, info.tb))
    assert ".rs" in text
    assert "ValueError: with frames" in text


# ---- exceptions raised by Python callbacks ---------------------------------------------------


class CallbackError(Exception):
    pass


def test_exception_from_a_callback_comes_back_as_the_same_object():
    raised = []

    def callback(x):
        exc = CallbackError(f"failed on {x}")
        raised.append(exc)
        raise exc

    with pytest.raises(CallbackError) as info:
        apply(callback, 7)
    assert info.value is raised[0]
    assert str(info.value) == "failed on 7"


@pytest.mark.parametrize(
    "exc_class",
    [ValueError, KeyError, ZeroDivisionError, NotImplementedError, CallbackError, error.OpError],
)
def test_exception_class_survives_the_native_frames(exc_class):
    def callback():
        raise exc_class("inner")

    with pytest.raises(exc_class) as info:
        apply(callback)
    assert type(info.value) is exc_class


def test_exception_attributes_survive():
    class RichError(Exception):
        def __init__(self, code):
            super().__init__(code)
            self.code = code

    def callback():
        raise RichError(404)

    with pytest.raises(RichError) as info:
        apply(callback)
    assert info.value.code == 404


def test_base_exceptions_from_a_callback_come_back_unchanged():
    def callback():
        raise KeyboardInterrupt("stop")

    with pytest.raises(KeyboardInterrupt):
        apply(callback)


def test_exception_chaining_is_kept():
    def callback():
        try:
            raise KeyError("cause")
        except KeyError as cause:
            raise ValueError("effect") from cause

    with pytest.raises(ValueError) as info:
        apply(callback)
    assert isinstance(info.value.__cause__, KeyError)


def failing_callback(value):
    raise CallbackError(f"callback failed with {value}")


def test_callback_traceback_shows_python_and_native_frames():
    with pytest.raises(CallbackError) as info:
        apply(failing_callback, 1)
    tb = info.value.__traceback__
    frames = traceback.extract_tb(tb)
    names = [f.name for f in frames]
    assert "failing_callback" in names, frame_names(tb)
    assert "test_callback_traceback_shows_python_and_native_frames" in names
    assert native_frames(tb), frame_names(tb)
    # Order: the caller, then the native frames in between, then the callback.
    caller = names.index("test_callback_traceback_shows_python_and_native_frames")
    callback = names.index("failing_callback")
    native = [i for i, f in enumerate(frames) if f.filename.endswith(".rs")]
    assert caller < min(native) < callback
    assert frames[callback].filename == __file__
    assert frames[callback].line == 'raise CallbackError(f"callback failed with {value}")'


def test_traceback_of_a_nested_native_error_shows_every_layer():
    def callback():
        raise_error("TypeError", "innermost")

    with pytest.raises(TypeError, match="innermost") as info:
        apply(callback)
    frames = traceback.extract_tb(info.value.__traceback__)
    names = [f.name for f in frames]
    native = [i for i, f in enumerate(frames) if f.filename.endswith(".rs")]
    callback_index = names.index("callback")
    # Native frames both before the callback (testing.apply) and after it (the raising function).
    assert any(i < callback_index for i in native), names
    assert any(i > callback_index for i in native), names


def test_exception_from_a_registered_python_function_called_through_the_registry():
    name = f"test_error.{uuid.uuid4().hex}"
    original = CallbackError("registered")

    def raising():
        raise original

    tvm.register_func(name, raising)
    try:
        with pytest.raises(CallbackError) as info:
            tvm.get_global_func(name)()
        assert info.value is original
    finally:
        tvm.ffi.remove_global_func(name)


def test_repeated_failures_keep_tracebacks_short():
    for _ in range(50):
        with pytest.raises(CallbackError) as info:
            apply(failing_callback, 2)
    assert len(traceback.extract_tb(info.value.__traceback__)) < 40


# ---- no legacy names -------------------------------------------------------------------------


def test_there_is_no_tvm_error_class():
    for module in (tvm, tvm.error, tvm.ffi, tvm.runtime, tvm.base):
        assert not hasattr(module, REMOVED_ERROR_CLASS), module.__name__
    for name, module in list(sys.modules.items()):
        if name == "tvm" or name.startswith("tvm."):
            assert not hasattr(module, REMOVED_ERROR_CLASS), name


def test_no_source_file_of_the_package_mentions_tvm_error():
    package_dir = Path(tvm.__file__).parent
    sources = [*package_dir.rglob("*.py"), *package_dir.rglob("*.pyi")]
    assert sources
    offenders = [str(p) for p in sources if REMOVED_ERROR_CLASS in p.read_text(encoding="utf-8")]
    assert offenders == []


def test_tvm_ffi_private_module_does_not_exist():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(REMOVED_FFI_MODULE)


def test_tvm_ffi_private_module_does_not_exist_in_a_fresh_interpreter():
    result = subprocess.run(
        [sys.executable, "-c", f"import {REMOVED_FFI_MODULE}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "ModuleNotFoundError" in result.stderr


class _CustomValueError(ValueError):
    pass


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (ValueError("bad value"), "ValueError: bad value"),
        (_CustomValueError("derived"), "ValueError: derived"),
        (KeyError("k"), "KeyError: 'k'"),
        (ZeroDivisionError("by zero"), "ZeroDivisionError: by zero"),
        (Exception("plain"), "RuntimeError: plain"),
    ],
)
def test_native_code_sees_the_kind_and_message_of_a_python_error(exc, expected):
    def raises():
        raise exc

    describe = tvm.get_global_func("testing.describe_error")
    assert describe(raises) == expected


def test_builtin_kinds_from_native_code_become_their_python_class():
    raise_error = tvm.get_global_func("testing.test_raise_error")
    with pytest.raises(ZeroDivisionError, match="divided"):
        raise_error("ZeroDivisionError", "divided")
    with pytest.raises(RuntimeError, match="odd"):
        raise_error("NoSuchKind", "odd")


def _native_traceback(environment: dict[str, str]) -> str:
    """The formatted traceback of an error raised inside the runtime, in a fresh interpreter with
    ``environment`` added."""
    program = (
        "import traceback, tvm\n"
        "try:\n"
        "    tvm.runtime.load_module('/nonexistent/library.so')\n"
        "except FileNotFoundError as err:\n"
        "    print(''.join(traceback.format_exception(type(err), err, err.__traceback__)))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TVM_TRACEBACK")}
    env.update(environment)
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=env, check=True
    )
    return result.stdout


def test_tracebacks_hide_the_runtime_and_the_build_machine_by_default():
    plain = _native_traceback({})
    assert "No such file or directory: '/nonexistent/library.so'" in plain
    for internal in ("tvm_runtime", "crates/", "library.rs"):
        assert internal not in plain, plain
    # TVM_TRACEBACK_INTERNAL=1 shows the runtime's frames, with paths inside its source tree.
    internal = _native_traceback({"TVM_TRACEBACK_INTERNAL": "1"})
    assert 'File "crates/tvm-runtime/src/library.rs"' in internal, internal
    assert f'File "{Path(__file__).resolve().parents[2]}/crates' not in internal
    # TVM_TRACEBACK_LIMIT caps the native lines.
    limited = _native_traceback({"TVM_TRACEBACK_INTERNAL": "1", "TVM_TRACEBACK_LIMIT": "1"})
    assert limited.count('File "crates/') == 1, limited


CXX_KERNEL = r"""
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>
namespace {
int check_positive(int x) {
  if (x <= 0) TVM_FFI_THROW(ValueError) << "x must be positive, got " << x;
  return x;
}
int add_one(int x) { return check_positive(x) + 1; }
}  // namespace
TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one, add_one);
"""


def test_a_cxx_kernel_traceback_shows_its_own_functions_demangled(tmp_path, monkeypatch):
    """The header layer's frames (the exported wrapper, tvm::ffi::details) and the C++
    library's are hidden as the runtime's are; what remains is demangled, the throw site comes
    once, and its source line prints without carets."""
    from tvm.support import cpp

    monkeypatch.setenv("TVM_FFI_CACHE_DIR", str(tmp_path))
    module = cpp.load_inline("traceback_demo", cpp_sources=CXX_KERNEL, extra_cflags=["-g"])
    with pytest.raises(ValueError, match="x must be positive, got -1") as info:
        module["add_one"](-1)
    text = "".join(traceback.format_exception(info.type, info.value, info.tb))
    frames = [line.strip() for line in text.splitlines() if line.strip().startswith("File")]
    assert frames[-2].endswith(("in add_one", "::add_one(int)")), text
    assert frames[-1].endswith("in check_positive"), text
    assert sum(frame.endswith("in check_positive") for frame in frames) == 1, text
    for hidden in ("tvm::ffi::", "std::", "_ZN", "__tvm_ffi_", "RunSafeCall"):
        assert hidden not in text, text
    # A native frame's source line prints without a caret line under it (Python 3.11 and later
    # print carets under Python frames' lines).
    lines = text.splitlines()
    for at, line in enumerate(lines[:-2]):
        if 'main.cpp", line' in line:
            under = lines[at + 2].strip()
            assert not under or set(under) - set("^~"), text
