"""Loading of the native runtime (tvm.base) and the one-owner rule for process-wide state.

These tests use only ctypes and the C API of ``cpp-abi/include/tvm/ffi/c_api.h``: a library
loaded after ``import tvm`` (by undefined symbols, or by a NEEDED ``libtvm_ffi.so``) must see the
very registry the native library holds.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import tvm
import tvm.base
from isolated import run_isolated
from tvm.base import load_backend_libs

TESTS_DIR = Path(__file__).resolve().parent
C_INCLUDE_DIR = TESTS_DIR.parents[1] / "cpp-abi" / "include"
K_TVMFFI_INT = 1  # kTVMFFIInt


class ByteArray(ctypes.Structure):
    """TVMFFIByteArray."""

    _fields_ = [("data", ctypes.c_char_p), ("size", ctypes.c_size_t)]


class Any(ctypes.Structure):
    """TVMFFIAny, with the payload read as v_int64 (16 bytes)."""

    _fields_ = [
        ("type_index", ctypes.c_int32),
        ("zero_padding", ctypes.c_uint32),
        ("v_int64", ctypes.c_int64),
    ]


def _c_function(lib: ctypes.CDLL, name: str, restype, *argtypes):
    """A fresh prototype bound to `name` in `lib` (leaves lib's cached attributes alone)."""
    return ctypes.CFUNCTYPE(restype, *argtypes)((name, lib))


def _native() -> ctypes.CDLL:
    return tvm.base._LOADED_LIBS[tvm.base._NATIVE_LIB_NAME]


def _call_global_int(lib: ctypes.CDLL, name: str) -> int | None:
    """Looks `name` up through `lib`'s C API, calls it without arguments, returns the int."""
    get_global = _c_function(
        lib,
        "TVMFFIFunctionGetGlobal",
        ctypes.c_int,
        ctypes.POINTER(ByteArray),
        ctypes.POINTER(ctypes.c_void_p),
    )
    call = _c_function(
        lib,
        "TVMFFIFunctionCall",
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.POINTER(Any),
        ctypes.c_int32,
        ctypes.POINTER(Any),
    )
    dec_ref = _c_function(lib, "TVMFFIObjectDecRef", ctypes.c_int, ctypes.c_void_p)

    encoded = name.encode()
    func = ctypes.c_void_p()
    assert get_global(ctypes.byref(ByteArray(encoded, len(encoded))), ctypes.byref(func)) == 0
    if not func.value:
        return None
    try:
        result = Any(0, 0, 0)
        assert call(func, None, 0, ctypes.byref(result)) == 0
        assert result.type_index == K_TVMFFI_INT
        return result.v_int64
    finally:
        dec_ref(func)


def _header_functions() -> list[str]:
    header = (C_INCLUDE_DIR / "tvm" / "ffi" / "c_api.h").read_text()
    names = re.findall(r"^TVM_FFI_DLL\b[^;(]*?\b(TVMFFI\w+)\s*\(", header, flags=re.M)
    return sorted(set(names))


def _clean_env() -> dict[str, str]:
    """The environment of a child interpreter: no loader search path, no preloads."""
    env = dict(os.environ)
    for key in ("LD_LIBRARY_PATH", "LD_PRELOAD", "DYLD_LIBRARY_PATH"):
        env.pop(key, None)
    return env


def _run_python(
    code: str, *args: str, env_overrides: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = _clean_env()
    env.update(env_overrides or {})
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def _readelf_dynamic(path: Path) -> str:
    readelf = shutil.which("readelf")
    assert readelf is not None, "readelf (binutils, installed with gcc) is needed"
    return subprocess.run(
        [readelf, "-d", str(path)], capture_output=True, text=True, check=True
    ).stdout


# -- (a) the native library ---------------------------------------------------------------------

_FRESH_IMPORT = r"""
import ctypes, json, sys
import tvm
import tvm.base
import tvm._native

libs = tvm.base._LOADED_LIBS
native_path = libs[tvm.base._NATIVE_LIB_NAME]._name
maps = runtime_maps = []
if sys.platform.startswith("linux"):
    with open("/proc/self/maps") as f:
        files = {line.split()[-1] for line in f}
    maps = sorted(name for name in files if "/_native" in name)
    runtime_maps = sorted(name for name in files if "libtvm_ffi" in name)
print(json.dumps({
    "names": list(libs),
    "native_name": tvm.base._NATIVE_LIB_NAME,
    "handle_resolves": all(hasattr(h, "TVMFFIFunctionGetGlobal") for h in libs.values()),
    "global_scope_resolves": hasattr(ctypes.CDLL(None), "TVMFFIFunctionGetGlobal"),
    "native_path": native_path,
    "module_file": tvm._native.__file__,
    "maps": maps,
    "runtime_maps": runtime_maps,
}))
"""


def test_import_loads_exactly_the_native_library_into_global_scope():
    # Backend autoload (entry points of other installed packages) may load more libraries.
    proc = _run_python(_FRESH_IMPORT, env_overrides={"TVM_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["names"] == [report["native_name"]]
    assert report["native_name"] == "libtvm_ffi.so"
    assert report["handle_resolves"]
    # RTLD_GLOBAL: the C API is visible through the global scope (dlopen(NULL)).
    assert report["global_scope_resolves"]
    # The runtime library is tvm/lib/libtvm_ffi.so beside the extension, mapped once: the
    # extension's NEEDED entry resolved to the file base.py loaded, not to a second copy.
    native = Path(report["native_path"]).resolve()
    assert native == Path(report["module_file"]).resolve().parent / "lib" / "libtvm_ffi.so"
    if sys.platform.startswith("linux"):
        assert report["runtime_maps"] == [str(native)]
        assert report["maps"] == [str(Path(report["module_file"]).resolve())]


def test_native_library_exports_every_header_function():
    declared = _header_functions()
    assert len(declared) >= 40, declared  # the header parser found the declarations
    missing = [name for name in declared if not hasattr(_native(), name)]
    assert missing == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SONAME is an ELF feature")
def test_native_library_soname_is_libtvm_ffi():
    dynamic = _readelf_dynamic(Path(_native()._name))
    assert "Library soname: [libtvm_ffi.so]" in dynamic


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF dynamic sections")
def test_runtime_library_has_no_python_in_it():
    # C, C++ and Rust hosts link it with no interpreter in the process.
    runtime = Path(_native()._name)
    needed = _readelf_dynamic(runtime)
    assert "libpython" not in needed
    undefined = _dynamic_symbols(runtime, "--undefined-only")
    assert sorted(s for s in undefined if s.startswith(("Py", "_Py"))) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF dynamic sections")
def test_extension_links_the_runtime_library_and_holds_no_state():
    extension = Path(tvm._native.__file__)
    dynamic = _readelf_dynamic(extension)
    assert "Shared library: [libtvm_ffi.so]" in dynamic
    assert "[$ORIGIN/lib]" in dynamic
    # Every C function of the state is the library's: the extension defines none of them.
    defined = _dynamic_symbols(extension, "--defined-only")
    assert sorted(s for s in defined if s.startswith("TVMFFI")) == []
    assert "TVMFFIFunctionGetGlobal" in _dynamic_symbols(extension, "--undefined-only")


_IMPORT_AFTER_ANOTHER_RUNTIME = r"""
import ctypes, sys
ctypes.CDLL(sys.argv[1], ctypes.RTLD_GLOBAL)
try:
    import tvm
except ImportError as err:
    print(err)
else:
    print("imported")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="global symbol scope of ELF")
def test_import_refuses_a_process_with_another_runtime_library(tmp_path):
    # A second libtvm_ffi.so (a copy at another path stands for apache-tvm-ffi's) loaded into
    # global scope first: importing tvm says so with both paths instead of running two
    # registries side by side.
    other = tmp_path / "other" / "libtvm_ffi.so"
    other.parent.mkdir()
    shutil.copyfile(_native()._name, other)
    proc = _run_python(_IMPORT_AFTER_ANOTHER_RUNTIME, str(other))
    assert proc.returncode == 0, proc.stderr
    message = proc.stdout.strip()
    assert "another TVM FFI runtime library is already loaded" in message
    assert str(other) in message
    assert str(Path(_native()._name)) in message or Path(_native()._name).name in message


_IMPORT_AND_CALL_AFTER_ANOTHER_LIBRARY = r"""
import ctypes, sys
ctypes.CDLL(sys.argv[1], ctypes.RTLD_GLOBAL)
try:
    import tvm
except ImportError as err:
    print("ImportError:", err)
else:
    print(dict(tvm.get_global_func("ffi.Map")("a", 1)), tvm.support.libinfo.find_lib_path()[0])
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SONAME is an ELF feature")
@pytest.mark.parametrize("defines_the_c_api", [False, True])
def test_a_foreign_library_claiming_the_soname(compile_c, tmp_path, defines_the_c_api):
    # A library that is neither ours nor apache-tvm-ffi's, with the SONAME libtvm_ffi.so, loaded
    # first: without the C API it is ignored (the extension binds to ours); with a symbol of the
    # C API it is named in a clear ImportError. Never a crash.
    symbol = "TVMFFIFunctionCall" if defines_the_c_api else "unrelated_symbol"
    library = compile_c(
        f"int {symbol}(void) {{ return -1; }}\n",
        name="libtvm_ffi.so",
        extra_flags=["-Wl,-soname,libtvm_ffi.so"],
        out_dir=tmp_path / "foreign",
    )
    proc = _run_python(_IMPORT_AND_CALL_AFTER_ANOTHER_LIBRARY, str(library))
    assert proc.returncode == 0, proc.stderr
    if defines_the_c_api:
        assert proc.stdout.startswith("ImportError: another TVM FFI runtime library"), proc.stdout
        assert str(library) in proc.stdout
    else:
        assert proc.stdout.split() == ["{'a':", "1}", str(Path(_native()._name))]


_LOAD_WITHOUT_IMPORT = r"""
import ctypes, json, sys

class ByteArray(ctypes.Structure):
    _fields_ = [("data", ctypes.c_char_p), ("size", ctypes.c_size_t)]

# Loaded as apache-tvm-ffi's Python package loads libtvm_ffi.so: no Python module init runs.
lib = ctypes.CDLL(sys.argv[1], ctypes.RTLD_GLOBAL)
found = {}
for name in sys.argv[2:]:
    handle = ctypes.c_void_p()
    key = name.encode()
    rc = lib.TVMFFIFunctionGetGlobal(ctypes.byref(ByteArray(key, len(key))), ctypes.byref(handle))
    assert rc == 0
    found[name] = bool(handle.value)
print(json.dumps({"found": found, "tvm_imported": "tvm" in sys.modules}))
"""


def test_loading_the_library_registers_the_runtime_without_the_python_module():
    # The module, RPC and device globals are registered by the library's constructor, so the
    # same file works as a drop-in libtvm_ffi.so; these are a sample of each kind.
    names = [
        "ffi.ModuleLoadFromFile",
        "ffi.SystemLib",
        "ffi.ModuleGetFunction",
        "ffi.ModuleGlobalsAdd",
        "ffi.MakeFieldGetter",
        "ffi._RegisterFFIInit",
        "rpc.Connect",
        "ffi.Module.load_from_bytes.vulkan",
    ]
    proc = _run_python(_LOAD_WITHOUT_IMPORT, _native()._name, *names)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert not report["tvm_imported"]
    assert report["found"] == dict.fromkeys(names, True)


def test_base_has_no_legacy_helpers():
    # The old names, spelled in parts so that searches for them find only real uses.
    for legacy in ("py" + "_str", "__version__", "TVM" + "Error", "_RUNTIME_ONLY"):
        assert not hasattr(tvm.base, legacy), legacy


# -- (b) a library loaded later sees the same registry -----------------------------------------

_REGISTERING_KERNEL = r"""
#include <string.h>
#include <tvm/ffi/c_api.h>

static TVMFFIByteArray as_bytes(const char* text) {
  TVMFFIByteArray bytes = {text, strlen(text)};
  return bytes;
}

static int answer(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)num_args;
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = @VALUE@;
  return 0;
}

/* 1 when the runtime's builtin "ffi.Array" is visible from here, 0 when not, -1 on error. */
TVM_FFI_DLL_EXPORT int @PREFIX@_has_builtin(void) {
  TVMFFIByteArray name = as_bytes("ffi.Array");
  TVMFFIObjectHandle func = NULL;
  if (TVMFFIFunctionGetGlobal(&name, &func) != 0) return -1;
  if (func == NULL) return 0;
  TVMFFIObjectDecRef(func);
  return 1;
}

/* Registers answer() as the global function "@GLOBAL@". */
TVM_FFI_DLL_EXPORT int @PREFIX@_init(void) {
  TVMFFIObjectHandle func = NULL;
  if (TVMFFIFunctionCreate(NULL, answer, NULL, &func) != 0) return -1;
  TVMFFIByteArray name = as_bytes("@GLOBAL@");
  int status = TVMFFIFunctionSetGlobal(&name, func, 1);
  TVMFFIObjectDecRef(func);
  return status;
}
"""


def _kernel_source(prefix: str, global_name: str, value: int) -> str:
    return (
        _REGISTERING_KERNEL.replace("@PREFIX@", prefix)
        .replace("@GLOBAL@", global_name)
        .replace("@VALUE@", str(value))
    )


def test_library_loaded_after_import_shares_the_registry(compile_c):
    path = compile_c(_kernel_source("ctest", "ctest.answer", 42), name="libctest_registry.so")
    kernel = ctypes.CDLL(str(path))  # RTLD_LOCAL; TVMFFI* resolve through the global scope
    assert kernel.ctest_has_builtin() == 1
    assert kernel.ctest_init() == 0
    assert _call_global_int(_native(), "ctest.answer") == 42


# -- (c) a library linked against libtvm_ffi.so ------------------------------------------------

_LINKED_KERNEL_RUN = r"""
import ctypes, sys
if sys.argv[2] == "import":
    import tvm
    import tvm.base
kernel = ctypes.CDLL(sys.argv[1])
assert kernel.clinked_init() == 0
print("loaded")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SONAME matching is ELF's")
@pytest.mark.parametrize("link", ["symlink", "file-name"])
def test_library_linked_against_libtvm_ffi_resolves_to_loaded_runtime(compile_c, tmp_path, link):
    native_path = Path(_native()._name)
    if link == "symlink":
        link_dir = tmp_path / "link"
        link_dir.mkdir()
        (link_dir / "libtvm_ffi.so").symlink_to(native_path)
        flags = [f"-L{link_dir}", "-ltvm_ffi"]
    else:
        flags = [f"-L{native_path.parent}", f"-l:{native_path.name}"]
    # Keep the NEEDED entry even where the toolchain defaults to --as-needed (Debian, Ubuntu).
    flags.insert(0, "-Wl,--no-as-needed")
    global_name = f"ctest.linked_{link.replace('-', '_')}"
    path = compile_c(
        _kernel_source("clinked", global_name, 43),
        name="libclinked.so",
        extra_flags=flags,
        out_dir=tmp_path / "kernel",
    )
    dynamic = _readelf_dynamic(path)
    assert "Shared library: [libtvm_ffi.so]" in dynamic
    assert "RPATH" not in dynamic
    assert "RUNPATH" not in dynamic

    # Without the runtime loaded, the loader cannot find libtvm_ffi.so anywhere ...
    alone = _run_python(_LINKED_KERNEL_RUN, str(path), "alone")
    assert alone.returncode != 0
    assert "libtvm_ffi.so" in alone.stderr

    # ... after `import tvm` the NEEDED entry matches the loaded library's SONAME, and the
    # function the kernel registers lands in the registry Python's runtime holds.
    code = (
        _LINKED_KERNEL_RUN
        + f"sys.path.insert(0, {str(TESTS_DIR)!r})\n"
        + "from test_loading import _call_global_int, _native\n"
        + f"assert _call_global_int(_native(), {global_name!r}) == 43\n"
        + "print('shared')\n"
    )
    linked = _run_python(code, str(path), "import")
    assert linked.returncode == 0, linked.stderr
    assert linked.stdout.split() == ["loaded", "shared"]


# -- (d) load_backend_libs -----------------------------------------------------------------------


@pytest.fixture
def restore_loaded_libs():
    """Forgets the entries a test adds to _LOADED_LIBS (the libraries stay mapped)."""
    before = dict(tvm.base._LOADED_LIBS)
    yield
    tvm.base._LOADED_LIBS.clear()
    tvm.base._LOADED_LIBS.update(before)


def test_load_backend_libs_missing_name(tmp_path, restore_loaded_libs):
    with pytest.raises(FileNotFoundError) as info:
        load_backend_libs(["tvm_no_such_backend"], search_dirs=[tmp_path])
    message = str(info.value)
    assert "tvm_no_such_backend" in message
    assert str(tmp_path) in message


def test_load_backend_libs_missing_path(tmp_path, restore_loaded_libs):
    missing = tmp_path / "libgone.so"
    with pytest.raises(FileNotFoundError, match=r"libgone\.so"):
        load_backend_libs([missing])


def test_load_backend_libs_not_a_shared_library(tmp_path, restore_loaded_libs):
    bogus = tmp_path / "libbogus_backend.so"
    bogus.write_text("this is not an ELF file\n")
    with pytest.raises(OSError) as info:
        load_backend_libs([str(bogus)])
    assert not isinstance(info.value, FileNotFoundError)
    assert str(bogus) in str(info.value)
    assert "libbogus_backend.so" not in tvm.base._LOADED_LIBS


def test_load_backend_libs_refuses_a_library_cut_short(compile_c, tmp_path):
    # ctypes' dlopen maps a cut file as it is: touching a missing page was SIGBUS.
    whole = compile_c("int tvmtest_cut(void) { return 7; }\n", name="libwhole_backend.so")
    cut = tmp_path / "libcut_backend.so"
    cut.write_bytes(whole.read_bytes()[:3000])
    out = run_isolated(
        f"""
        import tvm
        from tvm.base import load_backend_libs
        try:
            load_backend_libs([{str(cut)!r}])
        except OSError as err:
            print(type(err).__name__, err)
        print("libcut_backend.so" in tvm.base._LOADED_LIBS)
        """
    )
    first, loaded = out.splitlines()
    assert first.startswith(f"OSError cannot load '{cut}' as a shared library"), first
    assert "the file is cut short (3000 bytes, but its " in first, first
    assert loaded == "False"


def test_load_backend_libs_loads_each_basename_once(compile_c, tmp_path, restore_loaded_libs):
    tag = uuid.uuid4().hex[:12]
    base_name = f"libtvmtest_once_{tag}.so"
    first = compile_c(
        f"int tvmtest_once_{tag}(void) {{ return 7; }}\n",
        name=base_name,
        out_dir=tmp_path / "a",
    )
    # Same basename elsewhere, and not loadable: loading it at all would raise OSError.
    other_dir = tmp_path / "b"
    other_dir.mkdir()
    (other_dir / base_name).write_text("not a library\n")

    [handle] = load_backend_libs([first])
    assert tvm.base._LOADED_LIBS[base_name] is handle
    assert getattr(handle, f"tvmtest_once_{tag}")() == 7

    again = load_backend_libs(
        [first, other_dir / base_name, f"tvmtest_once_{tag}"], search_dirs=[other_dir]
    )
    assert all(h is handle for h in again)
    assert len(again) == 3


def test_load_backend_libs_accepts_a_single_entry_and_skips_the_runtime(restore_loaded_libs):
    assert load_backend_libs(tvm.base._NATIVE_LIB_NAME) == [_native()]
    assert load_backend_libs([]) == []


# -- one owner of the C API ---------------------------------------------------------------------


def _dynamic_symbols(path: Path, *flags: str) -> set[str]:
    nm = shutil.which("nm")
    assert nm is not None, "nm (binutils, installed with gcc) is needed"
    result = subprocess.run(
        [nm, "-D", *flags, str(path)], capture_output=True, text=True, check=True
    )
    return {line.split()[-1] for line in result.stdout.splitlines() if line.strip()}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF symbol tables")
def test_only_the_native_runtime_defines_the_c_api():
    # libtvm_ffi_testing.so links the safe API and tvm-runtime (its device layer registers the
    # test device); it must leave every TVMFFI* symbol to the runtime of the process.
    testing = Path(os.environ["TVM_FFI_TESTING_LIB"])
    defined = {s for s in _dynamic_symbols(testing, "--defined-only") if s.startswith("TVMFFI")}
    assert defined == set(), f"{testing.name} defines {sorted(defined)}"
    undefined = _dynamic_symbols(testing, "--undefined-only")
    assert {"TVMFFIFunctionGetGlobal", "TVMFFIFunctionSetGlobal"} <= undefined
    native = Path(tvm.base._LOADED_LIBS[tvm.base._NATIVE_LIB_NAME]._name)
    assert "TVMFFIFunctionGetGlobal" in _dynamic_symbols(native, "--defined-only")


def test_load_backend_libs_takes_a_dot_relative_path_as_a_path(
    compile_c, tmp_path, monkeypatch, restore_loaded_libs
):
    tag = uuid.uuid4().hex[:12]
    base_name = f"libtvmtest_dot_{tag}.so"
    compile_c(f"int tvmtest_dot_{tag}(void) {{ return 9; }}\n", name=base_name, out_dir=tmp_path)
    monkeypatch.chdir(tmp_path)
    # Searched in the current directory, not in search_dirs (which does not hold it).
    [handle] = load_backend_libs(f"./{base_name}", search_dirs=[tmp_path / "elsewhere"])
    assert getattr(handle, f"tvmtest_dot_{tag}")() == 9
    with pytest.raises(FileNotFoundError, match=r"searched: \."):
        load_backend_libs(f"./libtvmtest_absent_{tag}.so")


@pytest.mark.parametrize(
    ("argument", "error", "named"),
    [
        (b"libx.so", TypeError, "b'libx.so'"),
        (3, TypeError, "got 3"),
        ([b"libx.so"], TypeError, "b'libx.so'"),
        ([None], TypeError, "None"),
        ("", ValueError, "empty"),
    ],
)
def test_load_backend_libs_rejects_entries_that_are_not_names(
    argument, error, named, restore_loaded_libs
):
    with pytest.raises(error, match=named.replace("(", r"\(")):
        load_backend_libs(argument)


def test_load_backend_libs_takes_a_trailing_separator_as_a_path(tmp_path, restore_loaded_libs):
    with pytest.raises(FileNotFoundError, match="searched: "):
        load_backend_libs(f"{tmp_path}/missing_dir/")
