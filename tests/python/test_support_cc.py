"""tvm.support.cc and tvm.support.libinfo with the real gcc/g++, ar and nm: building and loading
a kernel against the C header, executables, static archives, cross compilers, and the errors
for a missing compiler and a failed compilation."""

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import tvm
from tvm.support import cc, libinfo, utils

REPO_ROOT = Path(__file__).resolve().parents[2]

KERNEL = r"""
#include <tvm/ffi/c_api.h>

TVM_FFI_DLL_EXPORT int __tvm_ffi_add_ints(void* handle, const TVMFFIAny* args, int32_t num_args,
                                          TVMFFIAny* result) {
  (void)handle;
  if (num_args != 2 || args[0].type_index != kTVMFFIInt || args[1].type_index != kTVMFFIInt) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "add_ints: expects two ints");
    return -1;
  }
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = args[0].v_int64 + args[1].v_int64;
  return 0;
}
"""


def include_flags():
    return [f"-I{directory}" for directory in libinfo.find_include_path()]


# ---- libinfo -------------------------------------------------------------------------------


def test_find_include_path_has_the_c_header(monkeypatch):
    monkeypatch.delenv("TVM_INCLUDE_PATH", raising=False)
    paths = libinfo.find_include_path()
    assert any((Path(p) / "tvm" / "ffi" / "c_api.h").is_file() for p in paths)
    assert any((Path(p) / "dlpack" / "dlpack.h").is_file() for p in paths)
    # The headers found (shipped in the wheel, or the source tree's) are this repository's.
    header = next(Path(p) / "tvm" / "ffi" / "c_api.h" for p in paths)
    assert header.read_bytes() == (REPO_ROOT / "cpp-abi/include/tvm/ffi/c_api.h").read_bytes()


def test_find_include_path_honours_env(monkeypatch, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    monkeypatch.setenv("TVM_INCLUDE_PATH", f"{extra}{os.pathsep}{tmp_path / 'missing'}")
    paths = libinfo.find_include_path()
    assert paths[0] == str(extra.resolve())
    assert str(tmp_path / "missing") not in paths


def test_find_lib_path_is_the_loaded_runtime():
    (path,) = libinfo.find_lib_path()
    assert Path(path).is_file()
    assert Path(path).name == "libtvm_ffi.so"
    assert (
        Path(path).resolve()
        == Path(tvm._native.__file__).resolve().parent / "lib" / "libtvm_ffi.so"
    )


def test_libinfo_command_prints_compile_and_link_flags(tmp_path):
    def run(*flags: str) -> str:
        command = [sys.executable, "-m", "tvm.support.libinfo", *flags]
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()

    assert run("--cflags").split() == include_flags()
    assert run("--includedir") == libinfo.find_include_path()[0]
    assert run("--version") == tvm.__version__
    libs = run("--libs").split()
    library = Path(libinfo.find_lib_path()[0])
    assert libs == [f"-L{library.parent}", f"-Wl,-rpath,{library.parent}", "-ltvm_ffi"]
    assert run("--libdir") == str(library.parent)
    assert Path(run("--pkgconfigdir"), "tvm_ffi.pc").is_file()
    assert Path(run("--cmakedir"), "tvm_ffiConfig.cmake").is_file()
    summary = run()
    assert "headers:" in summary and "build options:" in summary
    assert "device drivers: cuda not found" in summary  # no machine here has a CUDA driver
    drivers = libinfo.device_drivers()
    assert drivers["cuda"] is False and set(drivers) >= {"cuda", "vulkan"}
    assert drivers["vulkan"] is tvm.vulkan(0).exist
    # The flags compile a kernel, as a user's build line would use them.
    source = tmp_path / "kernel.c"
    source.write_text(KERNEL)
    output = tmp_path / "libflags.so"
    build = ["gcc", "-shared", "-fPIC", *run("--cflags").split(), str(source), "-o", str(output)]
    subprocess.run(build, check=True)
    assert tvm.runtime.load_module(str(output))["add_ints"](2, 3) == 5
    bad = subprocess.run(
        [sys.executable, "-m", "tvm.support.libinfo", "--nope"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "--nope" in bad.stderr


def test_version_and_build_options(monkeypatch):
    assert libinfo.__version__ == tvm.__version__
    # The build decides, not the environment.
    monkeypatch.setenv("TVM_USE_CUDA", "OFF")
    info = tvm.support.libinfo()  # the module is callable, as the former function was
    assert info == libinfo.libinfo()
    compiled = set(tvm._native._device_backends)
    assert info["USE_CUDA"] == ("ON" if "cuda" in compiled else "OFF")
    assert info["USE_ROCM"] == ("ON" if "rocm" in compiled else "OFF")
    assert info["USE_LLVM"] == "OFF" and info["USE_NCCL"] == "OFF" and info["USE_NVTX"] == "OFF"


# ---- compiling -----------------------------------------------------------------------------


def test_get_cc(monkeypatch):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.delenv("CC", raising=False)
    found = cc.get_cc()
    assert found is not None and os.access(found, os.X_OK)
    monkeypatch.setenv("CC", "my-cc")
    assert cc.get_cc() == "my-cc"
    monkeypatch.setenv("CXX", "my-cxx")
    assert cc.get_cc() == "my-cxx"


def test_create_shared_kernel_loads_and_runs(tmp_path):
    source = tmp_path / "kernel.c"
    source.write_text(KERNEL)
    output = tmp_path / "libkernel.so"
    cc.create_shared(
        str(output),
        [str(source)],
        options=[*include_flags(), "-std=c11", "-Wall", "-Werror"],
        cc="gcc",  # g++ would compile the .c file as C++
    )
    module = tvm.runtime.load_module(str(output))
    assert module["add_ints"](40, 2) == 42
    with pytest.raises(TypeError, match="expects two ints"):
        module["add_ints"]("x", 2)


def test_create_shared_defaults_find_the_headers_and_compile_c_as_c(tmp_path, monkeypatch):
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("CXX", raising=False)
    # Valid C, invalid C++ (void* to int* without a cast): compiled by the C compiler.
    source = tmp_path / "kernel.c"
    source.write_text(KERNEL + "int* as_ints(void* p) { int* q = p; return q; }\n")
    output = tmp_path / "libdefaults.so"
    cc.create_shared(str(output), [str(source)])
    assert tvm.runtime.load_module(str(output))["add_ints"](1, 2) == 3
    # The include directories are added unless the options name them already.
    assert cc._include_flags([]) == include_flags()
    assert cc._include_flags(["-O2", *include_flags()]) == []
    # A C++ source keeps the C++ compiler.
    (tmp_path / "lib.cc").write_text(
        "#include <tvm/ffi/c_api.h>\n"
        'extern "C" int first(const TVMFFIAny* a) { return static_cast<int>(a->v_int64); }\n'
    )
    cc.create_shared(str(tmp_path / "libcxx.so"), [str(tmp_path / "lib.cc")])
    symbols = cc.get_global_symbol_section_map(tmp_path / "libcxx.so")
    assert symbols["first"] == "T"


def test_create_shared_with_cxx_and_cwd(tmp_path):
    (tmp_path / "lib.cc").write_text('extern "C" int twice(int x) { return 2 * x; }\n')
    cc.create_shared("libtwice.so", ["lib.cc"], options=["-std=c++17"], cc="g++", cwd=tmp_path)
    symbols = cc.get_global_symbol_section_map(tmp_path / "libtwice.so")
    assert symbols["twice"] == "T"


def test_create_executable(tmp_path):
    source = tmp_path / "main.c"
    source.write_text('#include <stdio.h>\nint main(void) { puts("hello from cc"); return 0; }\n')
    exe = tmp_path / "hello"
    cc.create_executable(exe, [source], options=["-O1"])
    assert subprocess.run([exe], capture_output=True, text=True, check=True).stdout == (
        "hello from cc\n"
    )


def test_compile_error_carries_compiler_output(tmp_path):
    source = tmp_path / "broken.c"
    source.write_text("int f(void) { return undeclared_name; }\n")
    with pytest.raises(RuntimeError) as info:
        cc.create_shared(tmp_path / "libbroken.so", [source])
    message = str(info.value)
    assert message.startswith("Compilation error:")
    assert "undeclared_name" in message
    assert "Command line:" in message and "broken.c" in message


def test_missing_compiler_is_a_clear_error(monkeypatch, tmp_path):
    source = tmp_path / "x.c"
    source.write_text("int x;\n")
    with pytest.raises(RuntimeError, match=r"'no-such-compiler-xyz'.*not found.*CXX.*cc="):
        cc.create_shared(tmp_path / "x.so", [source], cc="no-such-compiler-xyz")
    cxx_source = tmp_path / "x.cc"
    cxx_source.write_text("int x;\n")
    monkeypatch.setenv("CXX", "/nonexistent/bin/g++")
    with pytest.raises(RuntimeError, match=r"/nonexistent/bin/g\+\+.*\$CXX"):
        cc.create_shared(tmp_path / "x.so", [cxx_source])
    monkeypatch.setenv("CC", "/nonexistent/bin/gcc")
    with pytest.raises(RuntimeError, match=r"/nonexistent/bin/gcc.*\$CC"):
        cc.create_shared(tmp_path / "x.so", [source])
    monkeypatch.delenv("CXX")
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(RuntimeError, match=r"no C/C.. compiler found.*CXX"):
        cc.create_shared(tmp_path / "x.so", [source])
    assert cc.get_cc() is None


def test_compiler_command_with_launcher(monkeypatch, tmp_path):
    # A compiler given as a command line, e.g. "env g++" (how "ccache g++" would be written).
    source = tmp_path / "a.c"
    source.write_text("int a(void) { return 1; }\n")
    monkeypatch.setenv("CXX", "env gcc")
    cc.create_shared(tmp_path / "liba.so", [source])
    assert (tmp_path / "liba.so").is_file()


def test_ccache(tmp_path):
    source = tmp_path / "c.c"
    source.write_text("int c(void) { return 3; }\n")
    if shutil.which("ccache") is None:
        with pytest.raises(ValueError, match="ccache not found"):
            cc.create_shared(tmp_path / "libc.so", [source], ccache_env={"CCACHE_DIR": "x"})
    else:
        env = {"CCACHE_DIR": str(tmp_path / "cache")}
        cc.create_shared(tmp_path / "libc.so", [source], ccache_env=env)
        assert (tmp_path / "libc.so").is_file()


def test_create_staticlib_and_symbol_map(tmp_path):
    first, second = tmp_path / "first.c", tmp_path / "second.c"
    first.write_text("int first_symbol(void) { return 1; }\nint first_data = 3;\n")
    second.write_text("int second_symbol(void) { return 2; }\n")
    objects = []
    for source in (first, second):
        obj = source.with_suffix(".o")
        subprocess.run(["gcc", "-c", "-fPIC", source, "-o", obj], check=True)
        objects.append(obj)
    # A .tar input contributes the objects it holds.
    bundle = tmp_path / "second.tar"
    with tarfile.open(bundle, "w") as archive:
        archive.add(objects[1], arcname="second.o")
    lib = tmp_path / "libboth.a"
    cc.create_staticlib(lib, [objects[0], bundle])
    symbols = cc.get_global_symbol_section_map(lib)
    assert symbols["first_symbol"] == "T" and symbols["second_symbol"] == "T"
    assert symbols["first_data"] == "D"
    assert cc.create_staticlib.output_format == "a"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        cc.get_global_symbol_section_map(tmp_path / "missing.a")
    with pytest.raises(RuntimeError, match=r"'no-such-ar'.*AR"):
        cc.create_staticlib(tmp_path / "x.a", [objects[0]], ar="no-such-ar")
    with pytest.raises(RuntimeError, match=r"'no-such-nm'.*NM"):
        cc.get_global_symbol_section_map(lib, nm="no-such-nm")


def test_target_triple():
    expected = subprocess.run(
        ["gcc", "-dumpmachine"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert cc.get_target_by_dump_machine("gcc")() == expected
    assert cc.get_target_by_dump_machine("no-such-compiler-xyz")() is None
    assert cc.create_shared.output_format == "so"
    assert isinstance(cc.create_shared.get_target_triple(), str)


def test_cross_compiler_with_compiler_name(tmp_path):
    helper = tmp_path / "helper.c"
    helper.write_text("int helper(void) { return 5; }\n")
    main = tmp_path / "main.c"
    main.write_text("int helper(void);\nint entry(void) { return helper(); }\n")
    fcompile = cc.cross_compiler("gcc", options=["-O2"], add_files=[str(helper)])
    assert fcompile.output_format == "so"
    assert fcompile.get_target_triple() == cc.get_target_by_dump_machine("gcc")()
    fcompile(str(tmp_path / "libentry.so"), [str(main)], options=["-g"])
    symbols = cc.get_global_symbol_section_map(tmp_path / "libentry.so")
    assert "entry" in symbols and "helper" in symbols


def test_cross_compiler_wraps_a_compile_function():
    calls = []

    def record(output, objects, options=None):
        calls.append((output, list(objects), list(options)))

    record.output_format = "o"
    record.get_target_triple = lambda: "riscv64-unknown-elf"
    fcompile = cc.cross_compiler(record, options=["-march=rv64"], add_files=["extra.o"])
    assert fcompile.output_format == "o"
    assert fcompile.get_target_triple() == "riscv64-unknown-elf"
    objects = ["a.o"]
    fcompile("out1", objects, options=["-g"])
    fcompile("out2", ["b.o"])
    assert calls == [
        ("out1", ["a.o", "extra.o"], ["-march=rv64", "-g"]),
        ("out2", ["b.o", "extra.o"], ["-march=rv64"]),  # nothing accumulates across calls
    ]
    assert objects == ["a.o"]  # the caller's list is left alone
    overridden = cc.cross_compiler(record, output_format="bin", get_target_triple=lambda: "t")
    assert overridden.output_format == "bin" and overridden.get_target_triple() == "t"


def test_tempdir_for_builds():
    with utils.tempdir() as temp:
        path = temp.relpath("x.txt")
        Path(path).write_text("x")
        assert temp.listdir() == ["x.txt"]
    assert not os.path.exists(path)
