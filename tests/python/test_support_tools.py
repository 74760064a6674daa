"""tvm.support.nvcc, rocm, ndk, xcode, clang and emcc: pure parsing functions, the global
functions they register, and the clear errors when a tool is not installed (PATH without it).
The tools themselves are not installed here, so no real compile runs; where one is found on
PATH the test checks the working path instead."""

import os
import shutil
import sys
import warnings
from pathlib import Path

import pytest

import tvm
from stand_ins import fake_tool
from tvm.support import clang, emcc, ndk, nvcc, rocm, xcode

# ---- nvcc ----------------------------------------------------------------------------------


def test_parse_compute_version_and_feature_checks():
    assert nvcc.parse_compute_version("8.6") == (8, 6)
    assert nvcc.parse_compute_version("9.0.a") == (9, 0)
    with pytest.raises(RuntimeError, match="Compute version parsing error"):
        nvcc.parse_compute_version("sm_80")
    assert nvcc.have_fp16("5.3") and nvcc.have_fp16("6.0") and not nvcc.have_fp16("5.2")
    assert nvcc.have_int8("6.1") and not nvcc.have_int8("5.3")
    assert nvcc.have_tensorcore("7.0") and not nvcc.have_tensorcore("6.1")
    assert nvcc.have_tensorcore(target={"arch": "sm_80"})
    with pytest.warns(UserWarning, match="Tensorcore will be disabled"):
        assert not nvcc.have_tensorcore()
    assert nvcc.have_bf16("8.0") and not nvcc.have_bf16("7.5")
    assert nvcc.have_fp8("8.9") and nvcc.have_fp8("9.0") and not nvcc.have_fp8("8.6")
    assert nvcc.have_fp4("10.0") and not nvcc.have_fp4("9.0") and not nvcc.have_fp4("12.0")


def test_get_target_compute_version_from_arch():
    assert nvcc.get_target_compute_version("sm_86") == "8.6"
    assert nvcc.get_target_compute_version({"arch": "sm_90a"}) == "9.0.a"
    assert nvcc.get_target_compute_version("cuda -arch=sm_100a") == "10.0.a"

    class Target:
        def __init__(self):
            self.attrs = {"arch": "sm_75"}

    assert nvcc.get_target_compute_version(Target()) == "7.5"


def test_get_target_compute_version_without_arch_or_gpu(bare_path):
    with pytest.raises(ValueError, match="No CUDA architecture was specified"):
        nvcc.get_target_compute_version()


def test_get_target_compute_version_from_nvidia_smi(bare_path):
    fake_tool(bare_path, "nvidia-smi", 'echo "9.0"')
    assert nvcc.get_target_compute_version() == "9.0.a"
    fake_tool(bare_path, "nvidia-smi", 'echo "8.6"')
    assert nvcc.get_target_compute_version() == "8.6"


def test_nvcc_global_functions_keep_their_names():
    for prefix in ("tvm.contrib.nvcc", "tvm.support.nvcc"):
        assert tvm.get_global_func(f"{prefix}.supports_bf16")("8.0") is True
        assert tvm.get_global_func(f"{prefix}.supports_fp8")("8.6") is False
        assert tvm.get_global_func(f"{prefix}.supports_fp4")("10.0") is True
        assert tvm.get_global_func(f"{prefix}.get_compute_version")("sm_89") == "8.9"
    assert tvm.get_global_func("tvm_callback_cuda_compile", allow_missing=True) is not None
    assert tvm.get_global_func("tvm_callback_libdevice_path", allow_missing=True) is not None


def test_missing_cuda_toolkit(bare_path):
    with pytest.raises(RuntimeError, match=r"Cannot find CUDA path.*CUDA_PATH"):
        nvcc.find_cuda_path()
    if not Path("/usr/local/cuda/bin/nvcc").exists():
        with pytest.raises(RuntimeError, match=r"nvcc was not found.*CUDA_PATH"):
            nvcc.compile_cuda("__global__ void k() {}", arch="sm_80", compiler="nvcc")
    assert not nvcc.have_cudagraph()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert nvcc.callback_libdevice_path(80) == ""
    assert "libdevice" in str(caught[0].message)


def test_nvrtc_without_cuda_python(monkeypatch):
    # As if cuda-python were not installed (whether it is or not).
    monkeypatch.setitem(sys.modules, "cuda", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    with pytest.raises(RuntimeError, match=r"cuda-python.*pip install cuda-python.*nvcc"):
        nvcc.compile_cuda("__global__ void k() {}", arch="sm_80")
    with pytest.raises(RuntimeError, match="cuda-python"):
        nvcc.tvm_callback_cuda_compile("__global__ void k() {}")


def test_compile_cuda_argument_errors(monkeypatch):
    with pytest.raises(ValueError, match="compiler must be 'nvcc' or 'nvrtc'"):
        nvcc.compile_cuda("", compiler="clang")
    with pytest.raises(ValueError, match="target_format"):
        nvcc.compile_cuda("", target_format="elf", arch="sm_80", compiler="nvcc")
    monkeypatch.setenv("TVM_CUDA_COMPILE_MODE", "hip")
    with pytest.raises(ValueError, match="TVM_CUDA_COMPILE_MODE"):
        nvcc.tvm_callback_cuda_compile("")


def test_cuda_toolkit_layout_queries(bare_path, tmp_path, monkeypatch):
    root = tmp_path / "cuda"
    (root / "bin").mkdir(parents=True)
    (root / "version.json").write_text('{"cuda": {"name": "CUDA SDK", "version": "12.4.131"}}')
    monkeypatch.setenv("CUDA_PATH", str(root))
    assert nvcc.find_cuda_path() == str(root)
    assert nvcc.get_cuda_version() == (12, 4, 131)
    assert nvcc.have_cudagraph()
    (root / "version.txt").write_text("CUDA Version 11.2.152\n")
    assert nvcc.get_cuda_version(str(root)) == (11, 2, 152)
    libdevice = root / "nvvm" / "libdevice"
    libdevice.mkdir(parents=True)
    (libdevice / "libdevice.10.bc").write_bytes(b"")
    assert nvcc.find_libdevice_path(80) == str(libdevice / "libdevice.10.bc")
    (root / "version.txt").unlink()
    (root / "version.json").unlink()
    fake_tool(root / "bin", "nvcc", 'echo "Cuda compilation tools, release 12.8, V12.8.93"')
    assert nvcc.get_cuda_version() == (12, 8, 93)
    with pytest.raises(RuntimeError, match=r"(?s)Cannot find NVSHMEM.*NVSHMEM_HOME"):
        nvcc.find_nvshmem_paths()
    nvshmem = tmp_path / "nvshmem"
    (nvshmem / "include").mkdir(parents=True)
    (nvshmem / "lib").mkdir()
    (nvshmem / "include" / "nvshmem.h").write_text("")
    (nvshmem / "lib" / "libnvshmem.a").write_bytes(b"")
    monkeypatch.setenv("NVSHMEM_HOME", str(nvshmem))
    assert nvcc.find_nvshmem_paths() == (str(nvshmem / "include"), str(nvshmem / "lib"))


def test_compile_cuda_with_a_stand_in_nvcc(bare_path, tmp_path):
    # A stand-in nvcc records its arguments and writes the output file, so the command line
    # compile_cuda builds can be checked without the CUDA toolkit.
    log = tmp_path / "args.txt"
    fake_tool(
        bare_path,
        "nvcc",
        f'printf "%s\\n" "$@" > {log}\n'
        'while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then printf PTX > "$2"; fi; shift; done',
    )
    out = tmp_path / "kernel.ptx"
    result = nvcc.compile_cuda(
        "__global__ void k() {}", arch="sm_80", compiler="nvcc", path_target=str(out)
    )
    assert result == bytearray(b"PTX") and out.read_bytes() == b"PTX"
    args = log.read_text().split("\n")
    assert args[:2] == ["--ptx", "-O3"] and ["-arch", "sm_80"] == args[2:4]
    assert "--use_fast_math" in args and "-U__CUDA_NO_HALF_OPERATORS__" in args
    assert any(a.startswith("--ptxas-options=-v,--register-usage-level=10") for a in args)
    fake_tool(bare_path, "nvcc", 'echo "kernel.cu(1): error: bad things"; exit 2')
    with pytest.raises(RuntimeError, match=r"Compilation error:\n.*bad things"):
        nvcc.compile_cuda("__global__ void k() {}", arch="sm_80", compiler="nvcc")


# ---- rocm ----------------------------------------------------------------------------------


def test_rocm_missing_tools(bare_path):
    if os.path.isdir("/opt/rocm"):
        # ROCm is installed in its default place: the missing-ROCm errors cannot happen.
        assert rocm.find_rocm_path() == "/opt/rocm"
        return
    with pytest.raises(RuntimeError, match=r"Cannot find the ROCm path.*ROCM_PATH"):
        rocm.find_rocm_path()
    assert rocm.find_lld(required=False) == []
    with pytest.raises(RuntimeError, match=r"cannot find ld.lld.*ROCM_PATH"):
        rocm.find_lld()
    with pytest.raises(RuntimeError, match=r"cannot find ld.lld"):
        rocm.callback_rocm_link(b"\x7fELF")
    with pytest.raises(RuntimeError, match=r"No ROCm runtime found.*ROCM_PATH"):
        rocm.have_matrixcore()
    with pytest.warns(UserWarning, match="gfx900"):
        assert rocm.get_rocm_arch() == "gfx900"


def test_rocm_parsing_and_stand_in_tools(bare_path, tmp_path, monkeypatch):
    assert rocm.parse_compute_version("9.0") == (9, 0)
    assert rocm.have_matrixcore("9.0") and not rocm.have_matrixcore("7.0")
    root = tmp_path / "rocm"
    (root / "bin").mkdir(parents=True)
    fake_tool(root / "bin", "rocminfo", 'echo "  Name:                    gfx90a"')
    monkeypatch.setenv("ROCM_PATH", str(root))
    assert rocm.find_rocm_path() == str(root)
    assert rocm.get_rocm_arch() == "gfx90a"
    assert rocm.have_matrixcore()
    bitcode = root / "amdgcn" / "bitcode"
    bitcode.mkdir(parents=True)
    with pytest.raises(RuntimeError, match=r"oclc_daz_opt_on.bc does not exist"):
        rocm.callback_rocm_bitcode_path()
    for name in (*rocm._BITCODE_NAMES[:-1], "oclc_isa_version_90a"):
        (bitcode / f"{name}.bc").write_bytes(b"")
    paths = rocm.callback_rocm_bitcode_path()
    assert paths[-1].endswith("oclc_isa_version_90a.bc") and len(paths) == 8
    fake_tool(bare_path, "ld.lld", 'while [ $# -gt 1 ]; do shift; done; printf CODEOBJ > "$1"')
    assert rocm.callback_rocm_link(b"object") == bytearray(b"CODEOBJ")
    for name in ("tvm_callback_rocm_link", "tvm_callback_rocm_get_arch"):
        assert tvm.get_global_func(name, allow_missing=True) is not None


# ---- ndk -----------------------------------------------------------------------------------


def test_ndk_requires_tvm_ndk_cc(bare_path, tmp_path):
    with pytest.raises(RuntimeError, match="TVM_NDK_CC"):
        ndk.create_shared(str(tmp_path / "lib.so"), ["a.o"])
    with pytest.raises(RuntimeError, match="TVM_NDK_CC"):
        ndk.create_staticlib(str(tmp_path / "lib.a"), ["a.o"])
    assert ndk.create_shared.output_format == "so"
    assert ndk.create_shared.get_target_triple() is None
    assert ndk.create_staticlib.output_format == "a"
    assert tvm.get_global_func("s_tir.meta_schedule.builder.export_ndk", allow_missing=True)


def test_ndk_with_a_real_compiler(monkeypatch, tmp_path):
    # gcc stands in for the NDK's clang: same command-line shape.
    monkeypatch.setenv("TVM_NDK_CC", shutil.which("gcc"))
    source = tmp_path / "k.c"
    source.write_text("int ndk_symbol(void) { return 1; }\n")
    ndk.create_shared(str(tmp_path / "libk.so"), [str(source)])
    assert (tmp_path / "libk.so").is_file()
    assert ndk.create_shared.get_target_triple()
    monkeypatch.setenv("TVM_NDK_CC", str(tmp_path / "missing-clang"))
    with pytest.raises(RuntimeError, match=r"missing-clang.*not an executable"):
        ndk.create_shared(str(tmp_path / "libk.so"), [str(source)])


# ---- xcode, clang, emcc --------------------------------------------------------------------


def test_xcode_missing_xcrun(bare_path, tmp_path):
    with pytest.raises(RuntimeError, match=r"xcrun was not found.*xcode-select --install"):
        xcode.xcrun(["--version"])
    with pytest.raises(RuntimeError, match="xcrun was not found"):
        xcode.create_dylib(str(tmp_path / "a.dylib"), ["a.o"], arch="arm64")
    with pytest.raises(RuntimeError, match="xcrun was not found"):
        xcode.compile_metal("kernel void k() {}")
    assert xcode.create_dylib.output_format == "dylib"


def test_xcode_compile_metal_failure_returns_none(bare_path, capsys):
    fake_tool(bare_path, "xcrun", 'echo "metal: error: no such sdk"; exit 1')
    assert xcode.compile_metal("kernel void k() {}") is None
    assert "no such sdk" in capsys.readouterr().err


def test_clang_missing(bare_path):
    assert clang.find_clang(required=False) == []
    with pytest.raises(RuntimeError, match=r"cannot find clang.*cc="):
        clang.create_llvm("int main() { return 0; }")
    with pytest.raises(RuntimeError, match="'clang-99' was not found"):
        clang.create_llvm("int x;", cc="clang-99")


def test_clang_with_a_stand_in(bare_path, tmp_path):
    log = tmp_path / "args.txt"
    fake_tool(
        bare_path,
        "clang-17",
        f'printf "%s\\n" "$@" > {log}\n'
        'while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then printf "; IR" > "$2"; fi; shift; done',
    )
    assert clang.find_clang() == ["clang-17"]
    assert clang.create_llvm(["int f(void) { return 1; }"], options=["-O2"]) == "; IR"
    args = log.read_text().split("\n")
    assert args[:2] == ["-S", "-emit-llvm"] and "-O2" in args
    assert args[-2].endswith("input0.cc")


def test_emcc_missing(bare_path, tmp_path):
    with pytest.raises(RuntimeError, match=r"'emcc' .*Emscripten.*emsdk_env.sh"):
        emcc.create_tvmjs_wasm(str(tmp_path / "out.wasm"), ["a.bc"])
    assert emcc.find_wasm_lib("wasm_runtime.bc", optional=True) is None
    with pytest.raises(RuntimeError, match=r"cannot find wasm_runtime.bc.*TVM_HOME"):
        emcc.find_wasm_lib("wasm_runtime.bc")
    assert emcc.create_tvmjs_wasm.object_format == "bc"


def test_emcc_finds_runtime_libraries_under_tvm_home(bare_path, tmp_path, monkeypatch):
    dist = tmp_path / "home" / "web" / "dist" / "wasm"
    dist.mkdir(parents=True)
    for name in ("wasm_runtime.bc", "tvmjs_support.bc", "webgpu_runtime.bc"):
        (dist / name).write_bytes(b"")
    monkeypatch.setenv("TVM_HOME", str(tmp_path / "home"))
    assert emcc.find_wasm_lib("tvmjs_support.bc") == str(dist / "tvmjs_support.bc")
    log = tmp_path / "args.txt"
    fake_tool(bare_path, "emcc", f'printf "%s\\n" "$@" > {log}')
    emcc.create_tvmjs_wasm(str(tmp_path / "out.wasm"), ["model.bc"], options=["-g"])
    args = log.read_text().split("\n")
    assert "STANDALONE_WASM=1" in args and "--no-entry" in args
    assert args.index(str(dist / "wasm_runtime.bc")) < args.index("model.bc")
    with pytest.raises(RuntimeError, match="does not exist"):
        emcc.create_tvmjs_wasm(str(tmp_path / "o.wasm"), ["m.bc"], libs=["/nonexistent.bc"])
