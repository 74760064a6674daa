"""Compiled kernels as modules: the C and C++ examples built with the real gcc and g++, loaded with
``tvm.runtime.load_module``, called with ints, strings, arrays and numpy tensors."""

import inspect
import os
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

import tvm
from isolated import run_isolated
from tvm import ffi

REPO_ROOT = Path(__file__).resolve().parents[2]
INCLUDE = REPO_ROOT / "cpp-abi" / "include"
EXAMPLES = REPO_ROOT / "cpp-abi" / "examples"


def build(source: Path, output: Path, compiler: str, std: str) -> Path:
    tool = shutil.which(compiler)
    if tool is None:
        pytest.fail(f"{compiler} is needed to build the example kernels")
    command = [tool, f"-std={std}", "-O1", "-shared", "-fPIC", f"-I{INCLUDE}", "-o", str(output)]
    result = subprocess.run([*command, str(source)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return output


@pytest.fixture(scope="module")
def c_module(tmp_path_factory: pytest.TempPathFactory) -> ffi.Module:
    out = tmp_path_factory.mktemp("c") / "libadd_one_c.so"
    return tvm.runtime.load_module(build(EXAMPLES / "add_one_c.c", out, "gcc", "c11"))


@pytest.fixture(scope="module")
def cpp_module(tmp_path_factory: pytest.TempPathFactory) -> ffi.Module:
    out = tmp_path_factory.mktemp("cpp") / "libadd_one_cpp.so"
    return tvm.runtime.load_module(build(EXAMPLES / "add_one_cpp.cc", out, "g++", "c++17"))


@pytest.fixture(params=["c", "cpp"])
def module(request: pytest.FixtureRequest, c_module: ffi.Module, cpp_module: ffi.Module):
    return c_module if request.param == "c" else cpp_module


def test_add_one_on_numpy_tensors(module: ffi.Module) -> None:
    np = pytest.importorskip("numpy")
    x = np.arange(12, dtype="float32").reshape(3, 4)
    y = np.zeros_like(x)
    module.add_one(x, y)
    np.testing.assert_array_equal(y, x + 1)
    # Through tvm tensors too, and through `mod["name"]`.
    tx, ty = ffi.from_dlpack(x), ffi.from_dlpack(y)
    module["add_one"](tx, ty)
    np.testing.assert_array_equal(y, x + 1)


def test_strings_and_arrays(module: ffi.Module) -> None:
    assert module.concat("tensor ", "compiler") == "tensor compiler"
    assert module.concat("", "") == ""
    assert module.sum_array([1, 2, 3, 40]) == 46
    assert module.sum_array(ffi.List([5, 6])) == 11
    assert module.sum_array([]) == 0


def test_wrong_dtype_is_a_type_error(module: ffi.Module) -> None:
    np = pytest.importorskip("numpy")
    x = np.zeros(4, dtype="float64")
    with pytest.raises(TypeError, match="float"):
        module.add_one(x, x)


def test_wrong_argument_type_names_function_and_position(cpp_module: ffi.Module) -> None:
    np = pytest.importorskip("numpy")
    x = np.zeros(4, dtype="float32")
    with pytest.raises(TypeError) as info:
        cpp_module.add_one(x, 5)
    message = str(info.value)
    assert "add_one(0: ffi.Tensor, 1: ffi.Tensor)" in message
    assert "argument #1" in message and "`int`" in message


def test_kernel_errors_keep_their_kind_message_and_frames(cpp_module: ffi.Module) -> None:
    with pytest.raises(ValueError, match="raise_value_error") as info:
        cpp_module.raise_value_error(3)
    files = [frame.filename for frame in traceback.extract_tb(info.value.__traceback__)]
    assert any(name.endswith("add_one_cpp.cc") for name in files), files


def test_metadata_and_docs(cpp_module: ffi.Module) -> None:
    add_one = cpp_module.get_function("add_one")
    assert add_one.__doc__ == "Writes x + 1 into y (float32 CPU tensors, same shape)."
    signature = inspect.signature(cpp_module.get_function("concat"))
    assert [p.annotation for p in signature.parameters.values()] == ["ffi.String"] * 2
    assert signature.return_annotation == "ffi.String"


def test_module_queries(c_module: ffi.Module) -> None:
    assert c_module.kind == "library"
    assert c_module.implements_function("add_one")
    assert not c_module.implements_function("no_such_function")
    assert c_module.imports == []
    with pytest.raises(AttributeError, match="no_such_function") as info:
        c_module.no_such_function
    assert "library" in str(info.value)


def test_load_time_registration_shares_the_registry(cpp_module: ffi.Module) -> None:
    registered = tvm.get_global_func("cpp_example.registered_at_load")
    assert registered(21) == 42
    assert "cpp_example.registered_at_load" in ffi.list_global_func_names()


def test_functions_outlive_their_module(tmp_path: Path) -> None:
    library = build(EXAMPLES / "add_one_c.c", tmp_path / "libshort_lived.so", "gcc", "c11")
    concat = tvm.runtime.load_module(library).get_function("concat")
    import gc

    gc.collect()
    assert concat("still ", "here") == "still here"


def test_libraries_load_by_the_names_users_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(EXAMPLES / "add_one_c.c", tmp_path / "libk.so", "gcc", "c11")
    shutil.copy(tmp_path / "libk.so", tmp_path / "libk.so.6")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    # A bare name is the file in the current directory, not one on the system's library path.
    for name in ("../libk.so", "../libk.so.6"):
        assert tvm.runtime.load_module(name)["concat"]("a", name) == "a" + name
    monkeypatch.chdir(tmp_path)
    for name in ("libk.so", "libk.so.6", "./sub/../libk.so"):
        assert tvm.runtime.load_module(name)["concat"]("x", "y") == "xy"
    # A bare name that is not a file here is searched for as the dynamic loader searches, as
    # Apache TVM FFI's loader does; one found nowhere is a FileNotFoundError naming it.
    with pytest.raises(FileNotFoundError, match=r"libk_nowhere\.so.*search path"):
        tvm.runtime.load_module("libk_nowhere.so")


_LOAD_BY_SEARCH = r"""
import sys
import tvm
module = tvm.runtime.load_module(sys.argv[1])
print(module["concat"]("found", " by the loader"))
"""


def test_a_bare_name_is_searched_on_the_loader_path(tmp_path: Path) -> None:
    build(EXAMPLES / "add_one_c.c", tmp_path / "libk_search.so", "gcc", "c11")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = dict(os.environ, LD_LIBRARY_PATH=str(tmp_path))
    result = subprocess.run(
        [sys.executable, "-c", _LOAD_BY_SEARCH, "libk_search.so"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "found by the loader"


def test_an_unbound_module_has_a_repr(c_module: ffi.Module) -> None:
    assert repr(ffi.Module()) == "<unbound Module>"
    assert repr(c_module) == "Module(kind='library')"


def test_from_dlpack_says_what_it_accepts() -> None:
    with pytest.raises(TypeError, match=r"DLPack producer .* got list: \[1, 2, 3\]; tvm\.runtime"):
        ffi.from_dlpack([1, 2, 3])


def test_missing_file_and_non_library(tmp_path: Path) -> None:
    missing = tmp_path / "missing.so"
    with pytest.raises(FileNotFoundError, match=r"missing\.so"):
        tvm.runtime.load_module(missing)
    text = tmp_path / "notes.so"
    text.write_text("not a shared library")
    with pytest.raises(OSError, match=r"notes\.so"):
        tvm.runtime.load_module(text)
    with pytest.raises(RuntimeError, match="extension"):
        tvm.runtime.load_module(tmp_path / "no_extension")


def test_libraries_cut_short_are_os_errors_not_crashes(tmp_path: Path) -> None:
    # dlopen maps a cut file as it is: touching a missing page was SIGBUS inside the loader.
    whole = build(EXAMPLES / "add_one_c.c", tmp_path / "libwhole.so", "gcc", "c11").read_bytes()
    cuts = sorted({40, 64, 1000, 3000, 5000, len(whole) // 2, len(whole) - 200, len(whole) - 1})
    paths = []
    for cut in cuts:
        path = tmp_path / f"libcut{cut}.so"
        path.write_bytes(whole[:cut])
        paths.append(str(path))
    out = run_isolated(
        f"""
        import tvm
        for path in {paths!r}:
            try:
                tvm.runtime.load_module(path)
                print(path, "loaded")
            except OSError as err:
                print(path, type(err).__name__, err)
        """
    )
    lines = out.splitlines()
    assert len(lines) == len(cuts), out
    for cut, path, line in zip(cuts, paths, lines):
        assert line.startswith(f"{path} OSError cannot load '{path}'"), line
        assert f"the file is cut short ({cut} bytes, but its " in line, line
    assert tvm.runtime.load_module(tmp_path / "libwhole.so").get_function("add_one") is not None


def test_libraries_for_another_abi_major_are_refused(compile_c) -> None:
    library = compile_c(
        "#include <stdint.h>\n"
        '__attribute__((visibility("default")))\n'
        "const uint32_t __tvm_ffi__abi_version = 9u << 16;\n",
        name="libfuture.so",
    )
    with pytest.raises(ImportError, match=r"9\.0") as info:
        tvm.runtime.load_module(library)
    assert "0.1" in str(info.value)


SYSTEM_LIB_SOURCE = r"""
#include <tvm/ffi/c_api.h>

static int triple(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* out) {
  (void)self;
  if (n != 1 || args[0].type_index != kTVMFFIInt) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "triple expects one int");
    return -1;
  }
  out->type_index = kTVMFFIInt;
  out->zero_padding = 0;
  out->v_int64 = 3 * args[0].v_int64;
  return 0;
}

__attribute__((constructor)) static void register_symbols(void) {
  TVMFFIEnvModRegisterSystemLibSymbol("__tvm_ffi_pytest_syslib.triple", (void*)triple);
}
"""


def test_system_library_finds_statically_registered_functions(compile_c) -> None:
    import ctypes

    library = compile_c(SYSTEM_LIB_SOURCE, name="libsyslib.so")
    ctypes.CDLL(str(library))  # its constructor registers the symbol, as static linking would
    lib = tvm.runtime.system_lib("pytest_syslib.")
    assert lib.kind == "system_lib"
    assert lib.triple(14) == 42
    assert tvm.runtime.system_lib("pytest_syslib.").same_as(lib)
    with pytest.raises(AttributeError, match="nothing"):
        lib.nothing


def test_load_module_accepts_path_like(tmp_path: Path) -> None:
    library = build(EXAMPLES / "add_one_c.c", tmp_path / "libpathlike.so", "gcc", "c11")
    assert tvm.ffi.load_module(os.fspath(library)).concat("a", "b") == "ab"
    assert tvm.ffi.load_module(library).concat("c", "d") == "cd"


BROKEN_DOC_KERNEL = r"""
#include <tvm/ffi/c_api.h>

TVM_FFI_DLL_EXPORT int __tvm_ffi_answer(void* self, const TVMFFIAny* args, int32_t num_args,
                                        TVMFFIAny* result) {
  (void)self, (void)args, (void)num_args;
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = 42;
  return 0;
}

/* A doc export that fails instead of returning a string. */
TVM_FFI_DLL_EXPORT int __tvm_ffi__doc_answer(void* self, const TVMFFIAny* args, int32_t num_args,
                                             TVMFFIAny* result) {
  (void)self, (void)args, (void)num_args, (void)result;
  TVMFFIErrorSetRaisedFromCStr("ValueError", "the doc is broken");
  return -1;
}
"""


def test_a_broken_doc_export_does_not_hide_the_function(compile_c) -> None:
    module = tvm.runtime.load_module(compile_c(BROKEN_DOC_KERNEL, name="libbroken_doc.so"))
    with pytest.warns(RuntimeWarning, match="doc export of `answer` is broken.*the doc is broken"):
        answer = module.get_function("answer")
    assert answer() == 42
