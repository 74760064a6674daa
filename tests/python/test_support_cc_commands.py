"""The compiler command lines of tvm.support.cc for each kind of output and platform, with a
stand-in compiler on PATH that records its arguments: nvcc as the driver, object files, macOS
and Windows (clang with a target), launchers given as lists, and the failures of the tools."""

import sys

import pytest

from stand_ins import fake_tool, logged_args, recording_tool
from tvm.support import cc, libinfo

#: What every command line ends with: the TVM header directories.
INCLUDE = [f"-I{directory}" for directory in libinfo.find_include_path()]


@pytest.fixture
def stand_in(bare_path, tmp_path, monkeypatch):
    """A compiler named ``cc-stand-in`` on PATH; returns its argument log."""
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.delenv("CC", raising=False)
    log = tmp_path / "cc.args"
    recording_tool(bare_path, "cc-stand-in", log, output="BINARY")
    return log


def test_outputs_of_each_kind(stand_in, tmp_path):
    cc.create_executable(tmp_path / "kernel.obj", "k.c", cc="cc-stand-in")
    assert logged_args(stand_in) == ["-c", "-o", str(tmp_path / "kernel.obj"), "k.c", *INCLUDE]
    cc.create_executable(tmp_path / "lib.so", ["k.c"], options="-O2", cc=["cc-stand-in"])
    assert logged_args(stand_in) == [
        "-shared",
        "-fPIC",
        "-o",
        str(tmp_path / "lib.so"),
        "k.c",
        "-O2",
        *INCLUDE,
    ]
    cc.create_executable(tmp_path / "app", [], cc="cc-stand-in")
    assert logged_args(stand_in) == ["-o", str(tmp_path / "app"), *INCLUDE]


def test_nvcc_as_the_driver_takes_no_fpic(bare_path, tmp_path):
    log = tmp_path / "nvcc.args"
    recording_tool(bare_path, "nvcc", log)
    cc.create_shared(tmp_path / "lib.so", ["k.cu"], cc="nvcc")
    assert logged_args(log) == ["-shared", "-o", str(tmp_path / "lib.so"), "k.cu", *INCLUDE]


def test_macos_shared_libraries_look_symbols_up_at_load_time(stand_in, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    cc.create_shared(tmp_path / "lib.dylib", ["k.c"], cc="cc-stand-in")
    assert logged_args(stand_in)[:4] == ["-shared", "-fPIC", "-undefined", "dynamic_lookup"]
    fake_tool(tmp_path / "bin", "nm", 'echo "$@" > "${0%/*}/nm.args"; echo "1 T _f"')
    (tmp_path / "lib.a").write_bytes(b"")
    nm = str(tmp_path / "bin" / "nm")
    assert cc.get_global_symbol_section_map(tmp_path / "lib.a", nm=nm) == {"_f": "T"}
    assert (tmp_path / "bin" / "nm.args").read_text() == f"-gU {tmp_path / 'lib.a'}\n"


def test_windows_compiles_with_clang_for_a_target(bare_path, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.delenv("TVM_WIN_CC", raising=False)
    monkeypatch.delenv("TVM_WIN_TARGET", raising=False)
    assert cc.get_cc() is None
    with pytest.raises(RuntimeError, match=r"LLVM clang compiler 'clang' needed on Windows"):
        cc.create_shared(tmp_path / "k.dll", ["k.c"])
    log = tmp_path / "clang.args"
    # A path: shutil.which looks for clang.EXE and the like by name on Windows.
    monkeypatch.setenv("TVM_WIN_CC", str(recording_tool(bare_path, "clang", log, output="DLL")))
    cc.create_shared(tmp_path / "k.dll", ["k.c"], options=["-g"])
    assert logged_args(log) == [
        "-O2",
        "--target=x86_64",
        "-shared",
        "-o",
        str(tmp_path / "k.dll"),
        "k.c",
        "-g",
        *INCLUDE,
    ]
    assert (tmp_path / "k.dll").read_text() == "DLL"
    monkeypatch.setenv("TVM_WIN_TARGET", "aarch64-pc-windows-msvc")
    cc.create_executable(tmp_path / "k.obj", ["k.c"])
    assert logged_args(log)[:3] == ["-O2", "--target=aarch64-pc-windows-msvc", "-c"]
    cc.create_executable(tmp_path / "k.exe", ["k.c"])
    assert logged_args(log)[2:] == ["-o", str(tmp_path / "k.exe"), "k.c", *INCLUDE]
    with pytest.raises(ValueError, match="Unsupported platform 'win32'"):
        cc.create_staticlib(tmp_path / "k.lib", ["k.obj"])


def test_unknown_platform(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "platform", "plan9")
    with pytest.raises(ValueError, match="Unsupported platform 'plan9'"):
        cc.create_shared(tmp_path / "k.so", ["k.c"])


def test_compiler_that_cannot_run_or_is_empty(stand_in, bare_path, tmp_path):
    with pytest.raises(
        RuntimeError, match=r"empty C/C\+\+ compiler command \(from the cc= argument\)"
    ):
        cc.create_shared(tmp_path / "k.so", ["k.c"], cc=" ")
    (bare_path / "cc-stand-in").write_text("no interpreter line")
    with pytest.raises(
        RuntimeError, match=r"cannot run 'cc-stand-in': .*\nCommand line: cc-stand-in -shared"
    ):
        cc.create_shared(tmp_path / "k.so", ["k.c"], cc="cc-stand-in")


def test_target_triple_when_dumpmachine_fails(stand_in, bare_path, monkeypatch):
    assert cc.get_target_by_dump_machine(None)() is None, "no compiler at all"
    fake_tool(bare_path, "g++", 'echo "unknown option" >&2; exit 1')
    assert cc.get_target_by_dump_machine(None)() is None
    fake_tool(bare_path, "g++", "exit 0")  # prints nothing
    assert cc.get_target_by_dump_machine("g++")() is None
    fake_tool(bare_path, "g++", 'echo "riscv64-linux-gnu"')
    assert cc.create_shared.get_target_triple() == "riscv64-linux-gnu"
    monkeypatch.setenv("CXX", "missing-compiler")
    assert cc.create_executable.get_target_triple() is None


def test_nm_failure_names_the_file(bare_path, tmp_path):
    fake_tool(bare_path, "nm", 'echo "nm: file format not recognized"; exit 1')
    (tmp_path / "k.o").write_bytes(b"junk")
    with pytest.raises(RuntimeError, match=r"nm failed on .*k\.o:\nnm: file format not recognized"):
        cc.get_global_symbol_section_map(tmp_path / "k.o")
