"""tvm.support.cpp with the real g++, gcc and ninja: inline C++ built, cached by its inputs and
loaded as a module; files built with their headers tracked; builds from several processes at
once; the compiler's own errors; CUDA sources through a stand-in nvcc (no CUDA toolkit here); and
the refusals of bad arguments. Exported metadata and docs are read back too."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tvm
from tvm.support import cpp
from tvm.support.cpp import _toolchain

ADD = "int64_t add(int64_t a, int64_t b) { return a + b; }"


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of this test's own."""
    root = tmp_path / "cache"
    monkeypatch.setenv("TVM_FFI_CACHE_DIR", str(root))
    return root


@pytest.fixture(params=["ninja", "direct"])
def build_tool(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each build twice: through ninja, and with the compilers called directly."""
    if request.param == "direct":
        monkeypatch.setattr(_toolchain, "ninja", lambda: None)
    elif _toolchain.ninja() is None:
        pytest.fail("ninja is needed (pip install ninja; scripts/test-all.sh installs it)")
    return request.param


def logging_compiler(directory: Path) -> tuple[Path, Path]:
    """A g++ wrapper that appends each of its compilations to a log; (wrapper, log)."""
    log = directory / "compilations.log"
    wrapper = directory / "logging-g++"
    gxx = shutil.which("g++")
    assert gxx is not None, "g++ is needed"
    wrapper.write_text(
        f'#!/bin/sh\ncase " $* " in *" -c "*) echo compile >> "{log}";; esac\nexec "{gxx}" "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return wrapper, log


def test_inline_functions_run_with_their_docs_and_metadata(build_tool: str, cache: Path):
    mod = cpp.load_inline(
        "add",
        cpp_sources=[
            ADD,
            'tvm::ffi::String greet(tvm::ffi::String who) { return "hi " + who.str(); }',
        ],
        functions={"add": 'Adds "two"\nintegers.', "greet": None},
    )
    assert mod.add(2, 3) == 5 and mod.greet("you") == "hi you"
    assert mod.get_function_doc("add") == 'Adds "two"\nintegers.'
    assert mod.add.__doc__ == 'Adds "two"\nintegers.'
    assert mod.get_function_doc("greet") is None
    metadata = mod.get_function_metadata("add")
    assert metadata is not None and '"type":"int"' in metadata["type_schema"]
    assert mod.get_function_metadata("missing") is None
    (directory,) = cache.iterdir()
    assert directory.name.startswith("add_")
    assert (directory / "build.ninja").is_file() == (build_tool == "ninja")
    with pytest.raises(TypeError, match="add"):
        mod.add("two", 3)


def test_unchanged_inputs_load_the_cached_library_and_a_change_builds_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: Path
):
    wrapper, log = logging_compiler(tmp_path)
    monkeypatch.setenv("CXX", str(wrapper))
    first = cpp.build_inline("cached", cpp_sources=ADD, functions=["add"])
    again = cpp.build_inline("cached", cpp_sources=ADD, functions=["add"])
    assert first == again and log.read_text().count("compile") == 1
    changed = cpp.build_inline("cached", cpp_sources=ADD + "\n// edited", functions=["add"])
    flagged = cpp.build_inline("cached", cpp_sources=ADD, functions=["add"], extra_cflags=["-O0"])
    assert len({first, changed, flagged}) == 3 and log.read_text().count("compile") == 3
    # A build whose library went missing is built again, in place (ninja only links again).
    Path(first).unlink()
    assert cpp.build_inline("cached", cpp_sources=ADD, functions=["add"]) == first
    assert tvm.runtime.load_module(first).add(1, 2) == 3


def test_a_build_directory_holds_the_build_and_new_code_loads(tmp_path: Path, cache: Path):
    out = tmp_path / "out"
    path = Path(cpp.build_inline("here", cpp_sources=ADD, functions=["add"], build_directory=out))
    assert path.parent == out and path.name.startswith("here.") and (out / "main.cpp").is_file()
    assert not cache.exists()
    assert tvm.runtime.load_module(path).add(1, 1) == 2
    # Changed code in the same directory: a library file of its own, so this process loads the
    # new code (the loader hands back a library it has loaded from the same path).
    one = "int64_t one() { return 1; }"
    two = "int64_t one() { return 2; }"
    options = {"functions": ["one"], "build_directory": out}
    assert cpp.load_inline("again", cpp_sources=one, **options).one() == 1
    assert cpp.load_inline("again", cpp_sources=two, **options).one() == 2


def test_compiler_errors_reach_the_caller_in_the_compilers_words(build_tool: str):
    broken = "int64_t add(int64_t a) {\n  return a + ;\n}"
    with pytest.raises(cpp.BuildError) as info:
        cpp.load_inline("broken", cpp_sources=broken, functions=["add"])
    message = str(info.value)
    assert "expected primary-expression" in message and "main.cpp:4" in message, message
    assert "broken" in message and "g++" in message
    # Exporting a function the source lacks is the compiler's error too.
    with pytest.raises(cpp.BuildError, match="was not declared"):
        cpp.load_inline("missing", cpp_sources=ADD, functions=["sub"])


def test_files_build_with_their_headers_tracked(tmp_path: Path):
    if _toolchain.ninja() is None:
        pytest.fail("ninja is needed (pip install ninja; scripts/test-all.sh installs it)")
    (tmp_path / "scale.h").write_text("constexpr int64_t kScale = 2;\n")
    (tmp_path / "twice.cc").write_text(
        textwrap.dedent(
            """
            #include <tvm/ffi/ffi.h>
            #include "scale.h"
            extern "C" int64_t c_add(int64_t a, int64_t b);
            int64_t Twice(int64_t x) { return c_add(x, x) * kScale / 2; }
            int64_t Scaled(int64_t x) { return x * kScale; }
            TVM_FFI_DLL_EXPORT_TYPED_FUNC(twice, Twice);
            TVM_FFI_DLL_EXPORT_TYPED_FUNC(scaled, Scaled);
            """
        )
    )
    (tmp_path / "add.c").write_text(
        "#include <stdint.h>\nint64_t c_add(int64_t a, int64_t b) { return a + b; }\n"
    )
    files = [tmp_path / "twice.cc", tmp_path / "add.c"]
    out = tmp_path / "build"
    mod = cpp.load("twice", cpp_files=files, build_directory=out)
    assert mod.twice(21) == 42 and mod.scaled(5) == 10
    # A changed header is seen through ninja's dependency files.
    (tmp_path / "scale.h").write_text("constexpr int64_t kScale = 3;\n")
    path = cpp.build("twice2", cpp_files=files, build_directory=tmp_path / "build2")
    assert tvm.runtime.load_module(path).scaled(5) == 15


def test_builds_of_one_key_from_several_processes_wait_for_each_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    wrapper, log = logging_compiler(tmp_path)
    program = textwrap.dedent(
        f"""
        from tvm.support import cpp
        mod = cpp.load_inline("shared", cpp_sources={ADD!r}, functions=["add"])
        assert mod.add(40, 2) == 42
        """
    )
    env = {**os.environ, "CXX": str(wrapper)}
    procs = [
        subprocess.Popen([sys.executable, "-c", program], env=env, stderr=subprocess.PIPE)
        for _ in range(4)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()
    assert log.read_text().count("compile") == 1


def test_cuda_sources_compile_with_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A stand-in CUDA toolkit: its nvcc logs its arguments and compiles the file as C++ with
    g++, and its libcudart is an empty library, so the CUDA path (the device compiler, its
    flags, the architectures, the runtime library linked) runs without one."""
    toolkit = tmp_path / "cuda"
    (toolkit / "bin").mkdir(parents=True)
    (toolkit / "lib64").mkdir()
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(toolkit / "lib64" / "libcudart.so"), "-x", "c", "-"],
        input=b"int cudart_stand_in;\n",
        check=True,
    )
    log = tmp_path / "nvcc.log"
    nvcc = toolkit / "bin" / "nvcc"
    nvcc.write_text(
        textwrap.dedent(
            f"""\
            #!/bin/sh
            [ "$1" = --version ] && {{ echo "nvcc stand-in"; exit 0; }}
            echo "$*" >> "{log}"
            args=""
            skip=0
            for a in "$@"; do
              if [ $skip = 1 ]; then args="$args $a"; skip=0; continue; fi
              case "$a" in -Xcompiler) skip=1;; -gencode=*) ;; *) args="$args $a";; esac
            done
            exec g++ -x c++ $args
            """
        )
    )
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{toolkit / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("TVM_FFI_CUDA_ARCH_LIST", "8.0;9.0+PTX")
    mod = cpp.load_inline(
        "device",
        cpp_sources="int64_t scale(int64_t x);",
        cuda_sources="int64_t scale(int64_t x) { return 3 * x; }",
        functions=["scale"],
    )
    assert mod.scale(7) == 21
    compiled = log.read_text()
    assert "cuda.cu" in compiled and "-Xcompiler -fPIC" in compiled
    assert "-gencode=arch=compute_80,code=sm_80" in compiled
    assert "-gencode=arch=compute_90,code=compute_90" in compiled
    # Only device sources: the exports go with them.
    mod = cpp.load_inline(
        "device_only", cuda_sources="int64_t one() { return 1; }", functions=["one"]
    )
    assert mod.one() == 1


def test_device_sources_without_a_toolkit_say_what_was_looked_for(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvcc, no hipcc
    for variable in ("CUDA_PATH", "CUDA_HOME", "ROCM_PATH", "TVM_FFI_GPU_BACKEND"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(_toolchain, "_nvcc", lambda: None)
    monkeypatch.setattr(_toolchain, "_hipcc", lambda: None)
    monkeypatch.setenv("CXX", shutil.which("g++") or "g++")
    with pytest.raises(RuntimeError, match="neither was found"):
        cpp.build_inline("gpu", cuda_sources="int x;")
    with pytest.raises(RuntimeError, match="hipcc"):
        cpp.build_inline("gpu", cuda_sources="int x;", backend="hip")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"name": "a b", "cpp_sources": ADD}, ValueError, "'a b'"),
        ({"name": "../up", "cpp_sources": ADD}, ValueError, "'../up'"),
        ({"name": 3, "cpp_sources": ADD}, TypeError, "int"),
        ({"name": "x"}, ValueError, "cpp_sources or cuda_sources"),
        ({"name": "x", "cpp_sources": b"int x;"}, TypeError, "bytes"),
        ({"name": "x", "cpp_sources": ADD, "functions": "add"}, TypeError, r"\['add'\]"),
        ({"name": "x", "cpp_sources": ADD, "functions": ["a-b"]}, ValueError, "'a-b'"),
        ({"name": "x", "cpp_sources": ADD, "functions": ["add", "add"]}, ValueError, "twice"),
        ({"name": "x", "cpp_sources": ADD, "functions": {"add": 1}}, TypeError, "doc of 'add'"),
        ({"name": "x", "cpp_sources": ADD, "extra_cflags": "-O3"}, TypeError, "extra_cflags"),
        ({"name": "x", "cpp_sources": ADD, "extra_cflags": ["-DX=\0"]}, ValueError, "NUL"),
        ({"name": "x", "cpp_sources": ADD, "extra_include_paths": ["a\nb"]}, ValueError, "line"),
        ({"name": "x", "cpp_sources": ADD, "extra_cflags": [3]}, TypeError, "item 3"),
        ({"name": "x", "cpp_sources": ADD, "functions": [["x"]]}, TypeError, r"\['x'\]"),
        ({"name": "x", "cpp_sources": ADD, "functions": {"add": "a\0b"}}, ValueError, "NUL"),
        ({"name": "x", "cpp_sources": ADD, "build_directory": ""}, ValueError, "directory"),
        ({"name": "x", "cuda_sources": "int x;", "backend": "opencl"}, ValueError, "'opencl'"),
    ],
)
def test_bad_arguments_are_refused_by_name(kwargs: dict, error: type, match: str):
    with pytest.raises(error, match=match):
        cpp.build_inline(**kwargs)


def test_a_compiler_variable_with_a_wrapper_runs_the_wrapper(
    build_tool: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """`CXX="wrapper g++"` (ccache and the like): the wrapper is the program, g++ its first
    argument, for compiling and linking alike."""
    log = tmp_path / "wrapper.log"
    wrapper = tmp_path / "wrap"
    wrapper.write_text(f'#!/bin/sh\necho "$1" >> "{log}"\nexec "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CXX", f"{wrapper} g++")
    assert cpp.load_inline("wrapped", cpp_sources=ADD, functions=["add"]).add(2, 2) == 4
    assert log.read_text().split() == ["--version", "g++", "g++"]


def test_flags_from_a_generator_are_passed(build_tool: str):
    guarded = "#ifndef FROM_GENERATOR\n#error the flag was lost\n#endif\n" + ADD
    flags = (flag for flag in ["-DFROM_GENERATOR=1"])
    mod = cpp.load_inline("gen", cpp_sources=guarded, functions=["add"], extra_cflags=flags)
    assert mod.add(1, 2) == 3


def test_file_builds_refuse_missing_and_foreign_files(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match=r"nothing\.cc"):
        cpp.build("x", cpp_files=[tmp_path / "nothing.cc"])
    (tmp_path / "k.py").write_text("")
    with pytest.raises(ValueError, match=r"k\.py"):
        cpp.build("x", cpp_files=[tmp_path / "k.py"])
    with pytest.raises(TypeError, match="single path"):
        cpp.build("x", cpp_files=str(tmp_path / "k.py"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cpp_files or cuda_files"):
        cpp.build("x")


def test_global_function_metadata_and_docs():
    @tvm.register_func("testing.cpp_support.echo", override=True)
    def echo(x):
        return x

    assert tvm.ffi.get_global_func_metadata("testing.cpp_support.echo") == {}
    assert tvm.ffi.get_global_func_doc("testing.cpp_support.echo") is None
    with pytest.raises(KeyError, match=r"no\.such\.function"):
        tvm.ffi.get_global_func_metadata("no.such.function")
