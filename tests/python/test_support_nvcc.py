"""tvm.support.nvcc compiling with stand-ins for the CUDA tools this machine lacks: the nvcc and
nvlink command lines (from PATH or a toolkit under CUDA_PATH, the environment switches, NVSHMEM
linking), NVRTC through a stand-in ``cuda.bindings`` package written to the same API, and the
toolkit layout queries (versions, libdevice, GPU compute capability)."""

import os
import sys
from pathlib import Path

import pytest

from stand_ins import fake_tool, logged_args, recording_tool
from tvm.support import nvcc

KERNEL = "__global__ void k() {}"


@pytest.fixture
def cuda_root(bare_path, tmp_path, monkeypatch):
    """A CUDA toolkit layout under CUDA_PATH with headers; nvcc is not on PATH."""
    root = tmp_path / "cuda"
    (root / "include").mkdir(parents=True)
    (root / "include" / "cuda_runtime.h").write_text("")
    monkeypatch.setenv("CUDA_PATH", str(root))
    for name in (
        "TVM_KERNEL_DUMP",
        "TVM_KERNEL_DEBUG",
        "TVM_CUDA_NVCC_NO_FAST_MATH",
        "TVM_CUDA_PTXAS_REG_LEVEL",
        "TVM_CUDA_NVRTC_EXTRA_OPTS",
        "TVM_CUDA_COMPILE_MODE",
    ):
        monkeypatch.delenv(name, raising=False)
    return root


# ---- nvcc ----------------------------------------------------------------------------------


def test_nvcc_of_the_toolkit_under_cuda_path(cuda_root, tmp_path):
    with pytest.raises(RuntimeError, match=r"nvcc was not found.*/bin/nvcc does not exist"):
        nvcc.compile_cuda(KERNEL, arch="sm_80", compiler="nvcc")
    log = tmp_path / "nvcc.args"
    tool = recording_tool(cuda_root / "bin", "nvcc", log, output="CUBIN")
    assert nvcc.compile_cuda(KERNEL, "cubin", arch="sm_75", compiler="nvcc") == b"CUBIN"
    args = logged_args(log)
    assert args[:4] == ["--cubin", "-O3", "-arch", "sm_75"]
    assert args[-1].endswith("tvm_kernels.cu") and args[-3] == "-o"
    assert args[-2].endswith("tvm_kernels.cubin")
    tool.chmod(0o644)  # there, but not executable
    with pytest.raises(RuntimeError, match=r"cannot run .*/bin/nvcc: .*set CUDA_PATH"):
        nvcc.compile_cuda(KERNEL, arch="sm_75", compiler="nvcc")


def test_nvcc_environment_switches_and_options(cuda_root, bare_path, tmp_path, monkeypatch):
    log = tmp_path / "nvcc.args"
    recording_tool(bare_path, "nvcc", log, output="FATBIN")
    dump = tmp_path / "dump"
    monkeypatch.setenv("TVM_KERNEL_DUMP", str(dump))
    monkeypatch.setenv("TVM_KERNEL_DEBUG", "1")
    monkeypatch.setenv("TVM_CUDA_NVCC_NO_FAST_MATH", "1")
    monkeypatch.setenv("TVM_CUDA_PTXAS_REG_LEVEL", "3")
    result = nvcc.compile_cuda(
        KERNEL,
        arch=["-gencode", "arch=compute_90a,code=sm_90a"],
        options=["-DX=1", Path("-Iinc")],
        compiler="nvcc",
    )
    assert result == b"FATBIN"
    args = logged_args(log)
    assert args[:2] == ["--fatbin", "-O3"], "a kernel dump keeps the cubin: fatbin"
    assert args[2:5] == ["-lineinfo", "--keep", f"--keep-dir={dump}"]
    assert args[5:9] == ["-g", "-G", "-gencode", "arch=compute_90a,code=sm_90a"]
    assert "--use_fast_math" not in args
    assert "--ptxas-options=-v,--register-usage-level=3,--warn-on-local-memory-usage" in args
    assert args[-5:-3] == ["-DX=1", "-Iinc"]
    assert args[-1] == str(dump / "tvm_kernels.cu"), "the source stays in the dump directory"
    assert (dump / "tvm_kernels.cu").read_text() == KERNEL
    assert (dump / "tvm_kernels.fatbin").read_bytes() == b"FATBIN"

    monkeypatch.setenv("TVM_CUDA_COMPILE_MODE", "nvcc")
    fake_tool(bare_path, "nvidia-smi", 'echo "8.0"')
    assert nvcc.tvm_callback_cuda_compile(KERNEL) == b"FATBIN"
    assert "arch=compute_80,code=sm_80" in logged_args(log)
    with pytest.raises(ValueError, match="options must be a str or a list of str"):
        nvcc.compile_cuda(KERNEL, arch="sm_80", options=3, compiler="nvcc")  # type: ignore[arg-type]


def test_nvcc_default_arch_from_the_gpu(cuda_root, bare_path, tmp_path):
    log = tmp_path / "nvcc.args"
    recording_tool(bare_path, "nvcc", log, output="PTX")
    fake_tool(bare_path, "nvidia-smi", 'echo "8.6"')
    assert nvcc.compile_cuda(KERNEL, compiler="nvcc", options="-DONE") == b"PTX"
    args = logged_args(log)
    assert args[:5] == [
        "--ptx",
        "-O3",
        "-gencode",
        "arch=compute_86,code=sm_86",
        "-U__CUDA_NO_HALF_OPERATORS__",
    ]
    assert "-DONE" in args


def test_nvcc_empty_output_is_an_error(cuda_root, bare_path, tmp_path):
    recording_tool(bare_path, "nvcc", tmp_path / "nvcc.args", output="")
    with pytest.raises(RuntimeError, match="empty result"):
        nvcc.compile_cuda(KERNEL, arch="sm_80", compiler="nvcc")


@pytest.fixture
def nvshmem_home(tmp_path, monkeypatch):
    home = tmp_path / "nvshmem"
    (home / "include").mkdir(parents=True)
    (home / "include" / "nvshmem.h").write_text("")
    (home / "lib").mkdir()
    (home / "lib" / "libnvshmem.a").write_bytes(b"")
    (home / "lib" / "libnvshmem_device.a").write_bytes(b"")
    monkeypatch.setenv("NVSHMEM_HOME", str(home))
    return home


def test_nvcc_nvshmem_code_is_compiled_relocatable_and_linked(cuda_root, nvshmem_home, tmp_path):
    nvcc_log, nvlink_log = tmp_path / "nvcc.args", tmp_path / "nvlink.args"
    recording_tool(cuda_root / "bin", "nvcc", nvcc_log, output="OBJECT")
    recording_tool(cuda_root / "bin", "nvlink", nvlink_log, output="LINKED")
    code = "#include <nvshmem.h>\n" + KERNEL
    target = tmp_path / "out" / "kernel.ptx"
    target.parent.mkdir()
    result = nvcc.compile_cuda(code, "ptx", arch="sm_90", path_target=str(target), compiler="nvcc")
    assert result == b"LINKED"
    args = logged_args(nvcc_log)
    assert args[0] == "--cubin", "NVSHMEM code is always compiled to cubin"
    object_file = str(tmp_path / "out" / "kernel.o")
    assert args[-7:] == [
        "-o",
        object_file,
        "-c",
        args[-4],
        "-rdc=true",
        "-I",
        str(nvshmem_home / "include"),
    ]
    assert logged_args(nvlink_log) == [
        "-arch=sm_90",
        "-L",
        str(nvshmem_home / "lib"),
        "-L",
        str(cuda_root / "lib64"),
        "-l",
        "nvshmem_device",
        "-l",
        "cudadevrt",
        "-o",
        str(tmp_path / "out" / "kernel.cubin"),
        object_file,
    ]


def test_nvcc_nvshmem_with_raw_arch_flags_takes_the_gpu_arch_for_nvlink(
    cuda_root, nvshmem_home, bare_path, tmp_path
):
    nvlink_log = tmp_path / "nvlink.args"
    recording_tool(bare_path, "nvcc", tmp_path / "nvcc.args", output="OBJECT")
    recording_tool(bare_path, "nvlink", nvlink_log, output="LINKED")
    fake_tool(bare_path, "nvidia-smi", 'echo "9.0"')
    code = "#include <nvshmemx.h>\n" + KERNEL
    result = nvcc.compile_cuda(
        code, arch=["-gencode", "arch=compute_90a,code=sm_90a"], compiler="nvcc"
    )
    assert result == b"LINKED"
    assert logged_args(nvlink_log)[0] == "-arch=sm_90a"


def test_nvcc_nvshmem_missing_is_a_clear_error(cuda_root, bare_path, tmp_path, monkeypatch):
    recording_tool(bare_path, "nvcc", tmp_path / "nvcc.args", output="OBJECT")
    monkeypatch.delenv("NVSHMEM_HOME", raising=False)
    if any(Path(root, "include", "nvshmem.h").exists() for root in ("/usr/local", "/usr")):
        pytest.skip("NVSHMEM is installed on this machine")
    with pytest.raises(RuntimeError, match=rf"(?s)Cannot find NVSHMEM.*  - {cuda_root}\n"):
        nvcc.compile_cuda("#include <nvshmem.h>\n" + KERNEL, arch="sm_90", compiler="nvcc")


# ---- NVRTC ---------------------------------------------------------------------------------

# A stand-in for the NVRTC bindings of cuda-python (cuda.bindings.nvrtc), with its calling
# convention: every call returns a tuple whose first item is an nvrtcResult. It records the
# options and the source it is given; a source with "#error" fails to compile.
STAND_IN_NVRTC = """
import enum

class nvrtcResult(enum.IntEnum):
    NVRTC_SUCCESS = 0
    NVRTC_ERROR_INVALID_INPUT = 3
    NVRTC_ERROR_COMPILATION = 6

PROGRAMS = []
FAIL = set()  # names of calls that return NVRTC_ERROR_INVALID_INPUT

class Program:
    def __init__(self, source, name):
        self.source, self.name, self.options, self.destroyed = source, name, None, False

def _result(call):
    return nvrtcResult.NVRTC_ERROR_INVALID_INPUT if call in FAIL else nvrtcResult.NVRTC_SUCCESS

def nvrtcGetErrorString(result):
    return nvrtcResult.NVRTC_SUCCESS, result.name.encode()

def nvrtcCreateProgram(source, name, num_headers, headers, include_names):
    program = Program(source, name)
    PROGRAMS.append(program)
    return _result("nvrtcCreateProgram"), program

def nvrtcCompileProgram(program, num_options, options):
    assert num_options == len(options)
    program.options = [option.decode() for option in options]
    if b"#error" in program.source:
        return (nvrtcResult.NVRTC_ERROR_COMPILATION,)
    return (nvrtcResult.NVRTC_SUCCESS,)

LOG = b"tvm_kernels.cu(3): error: stand-in failure\\0"

def nvrtcGetProgramLogSize(program):
    return nvrtcResult.NVRTC_SUCCESS, len(LOG)

def nvrtcGetProgramLog(program, log):
    log[:] = LOG
    return (nvrtcResult.NVRTC_SUCCESS,)

def _binary(program, kind):
    arch = [o for o in program.options if o.startswith("--gpu-architecture=")][0]
    return (kind + ":" + arch.split("=")[1]).encode()

def nvrtcGetCUBINSize(program):
    return _result("nvrtcGetCUBINSize"), len(_binary(program, "CUBIN"))

def nvrtcGetCUBIN(program, buffer):
    buffer[:] = _binary(program, "CUBIN")
    return (_result("nvrtcGetCUBIN"),)

def nvrtcGetPTXSize(program):
    return nvrtcResult.NVRTC_SUCCESS, len(_binary(program, "PTX"))

def nvrtcGetPTX(program, buffer):
    buffer[:] = _binary(program, "PTX")
    return (nvrtcResult.NVRTC_SUCCESS,)

def nvrtcDestroyProgram(program):
    program.destroyed = True
    return (nvrtcResult.NVRTC_SUCCESS,)
"""

# The driver linker of cuda-python (cuda.bindings.driver), as used to link NVSHMEM code:
# records the inputs and returns their concatenation as the linked image.
STAND_IN_DRIVER = """
import ctypes
import enum

class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_NO_DEVICE = 100

class CUjitInputType(enum.IntEnum):
    CU_JIT_INPUT_CUBIN = 0
    CU_JIT_INPUT_LIBRARY = 4

CALLS = []
NO_DEVICE = [False]
_IMAGES = []

def cuInit(flags):
    CALLS.append("cuInit")
    return (CUresult.CUDA_ERROR_NO_DEVICE if NO_DEVICE[0] else CUresult.CUDA_SUCCESS,)

def cuDeviceGet(ordinal):
    return CUresult.CUDA_SUCCESS, ordinal

def cuCtxCreate(params, flags, device):
    CALLS.append("cuCtxCreate")
    return CUresult.CUDA_SUCCESS, "context"

def cuCtxDestroy(context):
    CALLS.append("cuCtxDestroy")
    return (CUresult.CUDA_SUCCESS,)

def cuLinkCreate(num_options, options, values):
    return CUresult.CUDA_SUCCESS, []

def cuLinkAddData(state, kind, data, size, name, num_options, options, values):
    assert kind == CUjitInputType.CU_JIT_INPUT_CUBIN and size == len(data)
    state.append(bytes(data))
    return (CUresult.CUDA_SUCCESS,)

def cuLinkAddFile(state, kind, path, num_options, options, values):
    assert kind == CUjitInputType.CU_JIT_INPUT_LIBRARY
    state.append(b"+" + path)
    return (CUresult.CUDA_SUCCESS,)

def cuLinkComplete(state):
    image = ctypes.create_string_buffer(b"".join(state))
    _IMAGES.append(image)
    return CUresult.CUDA_SUCCESS, ctypes.addressof(image), len(image.raw) - 1

def cuLinkDestroy(state):
    CALLS.append("cuLinkDestroy")
    return (CUresult.CUDA_SUCCESS,)
"""


@pytest.fixture
def stand_in_cuda_python(tmp_path, monkeypatch):
    """The stand-in ``cuda.bindings`` package, importable in place of cuda-python."""
    package = tmp_path / "site" / "cuda" / "bindings"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "nvrtc.py").write_text(STAND_IN_NVRTC)
    (package / "driver.py").write_text(STAND_IN_DRIVER)
    for name in [name for name in sys.modules if name == "cuda" or name.startswith("cuda.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    from cuda.bindings import driver, nvrtc  # type: ignore[import-not-found]

    assert nvrtc.__file__.startswith(str(tmp_path))
    return nvrtc, driver


def test_nvrtc_options_source_and_result(cuda_root, stand_in_cuda_python, tmp_path, monkeypatch):
    nvrtc_module, _ = stand_in_cuda_python
    monkeypatch.setenv("TVM_CUDA_NVRTC_EXTRA_OPTS", "-DEXTRA=1 --extra-device-vectorization")
    target = tmp_path / "kernel.cubin"
    code = "#include <cuda.h>\n__global__ void k(CUtensorMap map) {}"
    result = nvcc.compile_cuda(
        code,
        arch="sm_80",
        options=["-O3", b"-DBYTES=2", "-std=c++17", "-lineinfo"],
        path_target=str(target),
    )
    assert result == b"CUBIN:sm_80" and target.read_bytes() == b"CUBIN:sm_80"
    (program,) = nvrtc_module.PROGRAMS
    assert program.destroyed and program.name == b"tvm_kernels.cu"
    source = program.source.decode()
    assert "#include <cuda.h>" not in source, "NVRTC has no driver header"
    assert "using cuda::std::int32_t;" in source and "struct __align__(64) CUtensorMap" in source
    assert "namespace std" not in source
    options = program.options
    assert options[:4] == [
        "--gpu-architecture=sm_80",
        "-default-device",
        "--device-int128",
        f"-I{cuda_root / 'include'}",
    ]
    assert "--use_fast_math" in options and "-U__CUDA_NO_BFLOAT16_OPERATORS__" in options
    assert options[-4:] == ["-DEXTRA=1", "--extra-device-vectorization", "-DBYTES=2", "-lineinfo"]
    assert "-O3" not in options and "-std=c++17" not in options, "nvcc-only options are dropped"


def test_nvrtc_ptx_and_default_arch(cuda_root, stand_in_cuda_python, bare_path, monkeypatch):
    monkeypatch.setenv("TVM_CUDA_NVCC_NO_FAST_MATH", "yes")
    assert nvcc.compile_cuda(KERNEL, "ptx", arch="sm_90a") == b"PTX:compute_90a"
    fake_tool(bare_path, "nvidia-smi", 'echo "7.5"')
    assert nvcc.tvm_callback_cuda_compile(KERNEL) == b"CUBIN:sm_75"
    nvrtc_module, _ = stand_in_cuda_python
    assert all("--use_fast_math" not in p.options for p in nvrtc_module.PROGRAMS)


def test_nvrtc_argument_errors(cuda_root, stand_in_cuda_python):
    with pytest.raises(ValueError, match="NVRTC cannot produce fatbin"):
        nvcc.compile_cuda(KERNEL, "fatbin", arch="sm_80")
    with pytest.raises(ValueError, match="target_format must be 'cubin' or 'ptx'"):
        nvcc.compile_cuda(KERNEL, "elf", arch="sm_80")
    with pytest.raises(ValueError, match="NVRTC takes arch as one string"):
        nvcc.compile_cuda(KERNEL, arch=["-arch", "sm_80"])
    with pytest.raises(ValueError, match="cannot read a CUDA architecture from 'gfx90a'"):
        nvcc.compile_cuda(KERNEL, arch="gfx90a")


def test_nvrtc_failures_are_reported(cuda_root, stand_in_cuda_python):
    nvrtc_module, _ = stand_in_cuda_python
    with pytest.raises(
        RuntimeError, match=r"(?s)#error no\nCompilation error \(NVRTC\):\n.*stand-in failure$"
    ):
        nvcc.compile_cuda("#error no", arch="sm_80")
    nvrtc_module.FAIL.add("nvrtcGetCUBIN")
    with pytest.raises(
        RuntimeError, match=r"NVRTC: nvrtcGetCUBIN failed: b'NVRTC_ERROR_INVALID_INPUT'"
    ):
        nvcc.compile_cuda(KERNEL, arch="sm_80")
    nvrtc_module.FAIL.add("nvrtcCreateProgram")
    with pytest.raises(RuntimeError, match="NVRTC: nvrtcCreateProgram failed"):
        nvcc.compile_cuda(KERNEL, arch="sm_80")
    assert all(program.destroyed for program in nvrtc_module.PROGRAMS[:2])


def test_nvrtc_needs_the_cuda_headers(cuda_root, stand_in_cuda_python):
    (cuda_root / "include" / "cuda_runtime.h").unlink()
    with pytest.raises(RuntimeError, match=r"cannot find the CUDA headers \(cuda_runtime.h\)"):
        nvcc.compile_cuda(KERNEL, arch="sm_80")


def test_nvrtc_per_target_include_directories(cuda_root, stand_in_cuda_python):
    import platform

    (cuda_root / "include" / "cuda_runtime.h").unlink()
    per_target = (
        cuda_root / "targets" / f"{platform.machine()}-{platform.system().lower()}" / "include"
    )
    (per_target / "cccl").mkdir(parents=True)
    (per_target / "cuda_runtime.h").write_text("")
    nvcc.compile_cuda(KERNEL, arch="sm_80")
    nvrtc_module, _ = stand_in_cuda_python
    includes = [o for o in nvrtc_module.PROGRAMS[0].options if o.startswith("-I")]
    assert includes == [f"-I{cuda_root / 'include'}", f"-I{per_target}", f"-I{per_target / 'cccl'}"]


def test_nvrtc_nvshmem_is_linked_with_the_driver(cuda_root, stand_in_cuda_python, nvshmem_home):
    nvrtc_module, driver = stand_in_cuda_python
    code = "#include <nvshmem.h>\n" + KERNEL
    linked = nvcc.compile_cuda(code, arch="sm_90")
    library = nvshmem_home / "lib" / "libnvshmem_device.a"
    assert linked == b"CUBIN:sm_90+" + str(library).encode()
    assert driver.CALLS == ["cuInit", "cuCtxCreate", "cuLinkDestroy", "cuCtxDestroy"]
    program = nvrtc_module.PROGRAMS[0]
    assert "namespace std" in program.source.decode()
    assert program.options[3:5] == ["-rdc", "true"]
    assert f"-I{nvshmem_home / 'include'}" in program.options
    assert "-D__CUDA_NO_FP8_CONVERSIONS__" in program.options

    driver.NO_DEVICE[0] = True
    with pytest.raises(RuntimeError, match="CUDA driver: cuInit failed while linking NVSHMEM"):
        nvcc.compile_cuda(code, arch="sm_90")
    library.unlink()
    with pytest.raises(
        RuntimeError, match=r"NVSHMEM device library .*libnvshmem_device.a does not exist"
    ):
        nvcc.compile_cuda(code, arch="sm_90")


def test_nvrtc_nvshmem_needs_the_driver_bindings(cuda_root, stand_in_cuda_python, monkeypatch):
    import cuda.bindings  # type: ignore[import-not-found]

    (Path(cuda.bindings.__file__).parent / "driver.py").unlink()
    monkeypatch.delitem(sys.modules, "cuda.bindings.driver")
    with pytest.raises(
        RuntimeError, match=r"NVSHMEM code compiled with NVRTC needs cuda\.bindings\.driver"
    ):
        nvcc.compile_cuda("#include <nvshmem.h>\n" + KERNEL, arch="sm_90")


# ---- toolkit layout ------------------------------------------------------------------------


def test_toolkit_found_from_nvcc_on_path(bare_path, tmp_path):
    root = tmp_path / "toolkit"
    fake_tool(root / "bin", "nvcc", "exit 1")  # gives no version
    (bare_path / "nvcc").symlink_to(root / "bin" / "nvcc")
    assert nvcc.find_cuda_path() == str(root), "the directory above the real bin/nvcc"
    with pytest.raises(
        RuntimeError, match=r"Cannot read the CUDA version of .*--version gave none"
    ):
        nvcc.get_cuda_version()
    assert not nvcc.have_cudagraph()
    (root / "lib" / "cuda").mkdir(parents=True)
    (root / "lib" / "cuda" / "version.txt").write_text("CUDA Version 12.0.1\n")
    assert nvcc.get_cuda_version() == (12, 0, 1), "the Debian/Ubuntu place of version.txt"


def test_cuda_version_without_any_source(tmp_path):
    with pytest.raises(RuntimeError, match="Cannot read the CUDA version"):
        nvcc.get_cuda_version(str(tmp_path / "nowhere"))


def test_libdevice_picks_the_newest_arch_not_above_the_target(bare_path, tmp_path, monkeypatch):
    root = tmp_path / "cuda"
    monkeypatch.setenv("CUDA_PATH", str(root))
    (root).mkdir()
    (root / "version.txt").write_text("CUDA Version 11.8.89\n")
    with pytest.raises(RuntimeError, match=r"Cannot find libdevice: .*libdevice cannot be read"):
        nvcc.find_libdevice_path(80)
    # Debian's layout, with per-arch files beside other ones.
    lib_dir = root / "lib" / "nvidia-cuda-toolkit" / "libdevice"
    lib_dir.mkdir(parents=True)
    (lib_dir / "README").write_text("")
    with pytest.raises(RuntimeError, match="Cannot find libdevice for arch 80 in"):
        nvcc.find_libdevice_path(80)
    for arch in (30, 50, 70, 90):
        (lib_dir / f"libdevice.compute_{arch}.10.bc").write_bytes(b"")
    assert nvcc.find_libdevice_path(80) == str(lib_dir / "libdevice.compute_70.10.bc")
    assert nvcc.find_libdevice_path(90) == str(lib_dir / "libdevice.compute_90.10.bc")
    with pytest.raises(RuntimeError, match="Cannot find libdevice for arch 20"):
        nvcc.find_libdevice_path(20)
    (lib_dir / "libdevice.10.bc").write_bytes(b"")
    assert nvcc.find_libdevice_path(20) == str(lib_dir / "libdevice.10.bc"), "the generic one"


def test_nvshmem_search_without_a_toolkit(bare_path, tmp_path, monkeypatch):
    home = tmp_path / "nvshmem"
    (home / "include" / "nvshmem_12").mkdir(parents=True)
    (home / "include" / "nvshmem_12" / "nvshmem.h").write_text("")
    monkeypatch.setenv("NVSHMEM_HOME", str(home))
    with pytest.raises(RuntimeError, match=rf"(?s)Searched:\n  - {home}\n.*  - /usr/local\n"):
        nvcc.find_nvshmem_paths()  # the header but no library
    lib = home / "lib64" / f"{os.uname().machine}-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libnvshmem.so").write_bytes(b"")
    assert nvcc.find_nvshmem_paths() == (str(home / "include" / "nvshmem_12"), str(lib))


def test_target_arch_forms():
    class WithArch:
        arch = "sm_89"

    class WithBrokenAttrs:
        arch = None
        attrs = 42  # `in` raises TypeError

    assert nvcc.get_target_compute_version(WithArch()) == "8.9"
    assert nvcc._target_arch(WithBrokenAttrs()) is None
    assert nvcc._target_arch("cuda -keys=gpu") is None
    assert nvcc._target_arch({"arch": ""}) is None
    with pytest.raises(ValueError, match="cannot read a compute version from arch 'sm_8'"):
        nvcc.get_target_compute_version("sm_8")


def test_nvidia_smi_that_fails_or_cannot_run(bare_path):
    smi = fake_tool(bare_path, "nvidia-smi", 'echo "No devices were found"; exit 6')
    assert nvcc._gpu_compute_version() is None
    fake_tool(bare_path, "nvidia-smi", "exit 0")  # no output at all
    assert nvcc._gpu_compute_version() is None
    smi.write_text("not a script")  # executable, but no interpreter line: exec fails
    assert nvcc._gpu_compute_version() is None
    with pytest.raises(ValueError, match="no CUDA GPU was found"):
        nvcc.get_target_compute_version()
