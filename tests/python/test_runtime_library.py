"""The runtime library as C and C++ hosts use it: ``tvm/lib/libtvm_ffi.so`` linked by a program
built with the flags ``tvm.support.libinfo`` prints (or pkg-config, or the CMake package), running
with no Python in the process.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tvm
from tvm import rpc
from tvm.support import libinfo

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the host programs are built for Linux"
)

REPO_ROOT = Path(__file__).resolve().parents[2]
HOSTS_DIR = Path(__file__).resolve().parent / "hosts"
HOST_SOURCE = HOSTS_DIR / "c_host.c"
#: Host programs by language: source, compiler (environment variable and default), flags.
HOST_LANGUAGES = {
    "c": (HOST_SOURCE, ("CC", "gcc"), ["-std=c11"]),
    "cpp": (HOSTS_DIR / "cpp_host.cc", ("CXX", "g++"), ["-std=c++17"]),
}
KERNEL_SOURCE = REPO_ROOT / "cpp-abi" / "examples" / "add_one_c.c"


def _compiler(variable: str = "CC", default: str = "gcc") -> str:
    compiler = os.environ.get(variable) or shutil.which(default)
    if compiler is None:
        pytest.fail(f"{default} is needed to build the host programs (scripts/test-all.sh)")
    return compiler


def _libinfo_flags(*options: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "tvm.support.libinfo", *options],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return shlex.split(out)


def _build(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{shlex.join(command)}\n{result.stderr}"


def _host_env() -> dict[str, str]:
    """An environment without Python's variables: the host must not need them."""
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "COV_CORE", "COVERAGE", "VIRTUAL_ENV"))
    }


@pytest.fixture(scope="module")
def kernel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("kernel") / "libadd_one_c.so"
    cflags = _libinfo_flags("--cflags")
    _build(
        [_compiler(), "-shared", "-fPIC", "-std=c11", *cflags, str(KERNEL_SOURCE), "-o", str(out)]
    )
    return out


@pytest.fixture(scope="module")
def server():
    srv = rpc.Server(port=0)
    yield srv
    srv.terminate()


def _run_host(host: Path, kernel: Path, port: int) -> list[str]:
    result = subprocess.run(
        [str(host), str(kernel), str(port)],
        capture_output=True,
        text=True,
        env=_host_env(),
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.splitlines()


def _check_host_output(lines: list[str]) -> None:
    assert lines[0] == "load module: ok"
    assert lines[1] == "call add_one: 1 2 3 4"
    assert lines[2].startswith("bad call: TypeError: "), lines[2]
    vulkan = tvm.runtime.device("vulkan", 0).exist
    if vulkan:
        assert lines[3] == "vulkan tensor: device 7, 256 elements"
    else:
        assert lines[3] == "vulkan: absent"
    assert lines[4:] == ["rpc: remote cpu exists = 1"]


def _dynamic_dependencies(program: Path) -> str:
    return subprocess.run(
        ["ldd", str(program)], capture_output=True, text=True, check=True, env=_host_env()
    ).stdout


def _build_host(language: str, out_dir: Path) -> Path:
    """The host program in ``language``, built with the flags libinfo prints."""
    source, (variable, default), standard = HOST_LANGUAGES[language]
    host = out_dir / f"{language}_host"
    flags = _libinfo_flags("--cflags", "--libs")
    compiler = _compiler(variable, default)
    _build([compiler, *standard, "-Wall", "-Werror", str(source), "-o", str(host), *flags])
    return host


@pytest.mark.parametrize("language", sorted(HOST_LANGUAGES))
def test_host_built_with_libinfo_flags_runs_without_python(tmp_path, kernel, server, language):
    host = _build_host(language, tmp_path)
    dependencies = _dynamic_dependencies(host)
    assert "libpython" not in dependencies
    runtime = Path(libinfo.find_lib_path()[0])
    assert f"libtvm_ffi.so => {runtime}" in dependencies
    _check_host_output(_run_host(host, kernel, server.port))


@pytest.mark.parametrize("language", sorted(HOST_LANGUAGES))
def test_hosts_load_a_kernel_library_written_in_rust(tmp_path, rust_kernels, server, language):
    """``examples/rust-kernels`` exports the same ``add_one`` as the C kernel, from Rust."""
    host = _build_host(language, tmp_path)
    lines = _run_host(host, rust_kernels, server.port)
    _check_host_output(lines)
    assert "Expected `ffi.Tensor` but got `ffi.String`" in lines[2], lines[2]


def test_libinfo_libdir_holds_the_runtime_library():
    [libdir] = _libinfo_flags("--libdir")
    assert Path(libdir, "libtvm_ffi.so").is_file()
    assert Path(libdir) == Path(libinfo.find_lib_path()[0]).parent


def test_c_host_built_with_pkg_config(tmp_path, kernel, server):
    pkg_config = shutil.which("pkg-config")
    if pkg_config is None:
        pytest.skip("pkg-config is not installed")
    env = dict(os.environ, PKG_CONFIG_PATH=libinfo.find_pkgconfig_dir())
    result = subprocess.run(
        [pkg_config, "--cflags", "--libs", "tvm_ffi"], capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr
    version = subprocess.run(
        [pkg_config, "--modversion", "tvm_ffi"], capture_output=True, text=True, env=env
    ).stdout.strip()
    assert version == tvm.__version__
    host = tmp_path / "c_host"
    _build(
        [_compiler(), "-std=c11", str(HOST_SOURCE), "-o", str(host), *shlex.split(result.stdout)]
    )
    _check_host_output(_run_host(host, kernel, server.port))


_CMAKE_PROJECT = """
cmake_minimum_required(VERSION 3.18)
project(c_host C)
find_package(tvm_ffi {version} CONFIG REQUIRED)
add_executable(c_host {source})
target_link_libraries(c_host PRIVATE tvm_ffi::tvm_ffi)
"""


def test_c_host_built_with_the_cmake_package(tmp_path, kernel, server):
    cmake = shutil.which("cmake") or shutil.which("cmake", path=os.path.dirname(sys.executable))
    if cmake is None:
        pytest.skip("cmake is not installed (scripts/test-all.sh installs it from PyPI)")
    source_dir = tmp_path / "project"
    source_dir.mkdir()
    (source_dir / "CMakeLists.txt").write_text(
        _CMAKE_PROJECT.format(version=tvm.__version__, source=HOST_SOURCE.as_posix())
    )
    build_dir = tmp_path / "build"
    configure = [
        cmake,
        "-S",
        str(source_dir),
        "-B",
        str(build_dir),
        f"-Dtvm_ffi_DIR={libinfo.find_cmake_dir()}",
        f"-DCMAKE_C_COMPILER={_compiler()}",
    ]
    _build(configure)
    _build([cmake, "--build", str(build_dir)])
    _check_host_output(_run_host(build_dir / "c_host", kernel, server.port))


def test_cmake_package_refuses_a_newer_version(tmp_path):
    cmake = shutil.which("cmake") or shutil.which("cmake", path=os.path.dirname(sys.executable))
    if cmake is None:
        pytest.skip("cmake is not installed (scripts/test-all.sh installs it from PyPI)")
    source_dir = tmp_path / "project"
    source_dir.mkdir()
    (source_dir / "CMakeLists.txt").write_text(
        _CMAKE_PROJECT.format(version="0.2", source=HOST_SOURCE.as_posix())
    )
    result = subprocess.run(
        [
            cmake,
            "-S",
            str(source_dir),
            "-B",
            str(tmp_path / "build"),
            f"-Dtvm_ffi_DIR={libinfo.find_cmake_dir()}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "tvm_ffi" in result.stderr and "0.1.0" in result.stderr


# -- state the extension and the library share ---------------------------------------------------

_EXPORT_FLAGS_KERNEL = r"""
#include <tvm/ffi/c_api.h>

/* export_flags(t: Tensor) -> int: the flags of the tensor's versioned DLPack export, made by the
   runtime library's C API (not by the Python extension, which imported the tensor). */
TVM_FFI_DLL_EXPORT int __tvm_ffi_export_flags(void* self, const TVMFFIAny* args, int32_t num_args,
                                              TVMFFIAny* result) {
  (void)self;
  if (num_args != 1 || args[0].type_index != kTVMFFITensor) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "export_flags takes one tensor");
    return -1;
  }
  DLManagedTensorVersioned* exported = NULL;
  if (TVMFFITensorToDLPackVersioned(args[0].v_obj, &exported) != 0) return -1;
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = (int64_t)exported->flags;
  exported->deleter(exported);
  return 0;
}
"""


def test_read_only_mark_of_an_imported_tensor_holds_in_the_library(compile_c):
    # The extension imports a read-only numpy array; the library's C API exports it. The mark
    # is process state, so the export says read-only and a consumer cannot be handed writes.
    np = pytest.importorskip("numpy")
    kernel = tvm.runtime.load_module(str(compile_c(_EXPORT_FLAGS_KERNEL, name="libflags.so")))
    data = np.arange(4.0)
    data.setflags(write=False)
    read_only = 1  # DLPACK_FLAG_BITMASK_READ_ONLY
    assert kernel["export_flags"](tvm.ffi.from_dlpack(data)) & read_only
    assert not kernel["export_flags"](tvm.ffi.from_dlpack(np.arange(4.0))) & read_only
