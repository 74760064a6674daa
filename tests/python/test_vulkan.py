"""The Vulkan backend on a real driver (Mesa lavapipe in CI): devices and attributes, tensors
moved between numpy, the CPU and Vulkan, DLPack export, SPIR-V kernels (GLSL from
``crates/device-vulkan/tests/shaders`` compiled with ``glslangValidator`` at test time) loaded from
``.spv`` files, from bytes and from a library compiled by the test, and the bad-input list.

Every test skips, saying why, only when no Vulkan driver (or no shader compiler) is installed. The
conftest turns the validation layer on (``TVM_VULKAN_VALIDATION=1``); each test fails if the layer
printed anything."""

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kernel_blobs
import tvm
from gpu_kernel_checks import (
    ADD_ONE,
    check_bad_launches,
    check_dlpack_export,
    check_one_queue_streams,
    run_add_one,
    skip_without_devices,
    write_add_one_metadata,
)
from tvm.runtime import cpu, empty, tensor, vulkan

SHADERS = Path(__file__).resolve().parents[2] / "crates" / "device-vulkan" / "tests" / "shaders"


pytestmark = skip_without_devices("vulkan", "the Vulkan driver lists no device")

SCALE_2D = {
    "name": "scale_2d",
    "arg_types": ["handle", "handle", "int32", "int32", "int64", "float32"],
    "launch_param_tags": ["blockIdx.x", "blockIdx.y", "threadIdx.x", "threadIdx.y"],
}


@pytest.fixture(autouse=True)
def validation_is_quiet(capfd: pytest.CaptureFixture[str]):
    """Fails the test if the validation layer printed a message during it."""
    yield
    err = capfd.readouterr().err
    assert "tvm vulkan validation" not in err, err


@pytest.fixture(scope="module")
def spirv_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``<kernel>.spv`` of every shader of the suite, compiled now."""
    compiler = shutil.which("glslangValidator")
    if compiler is None:
        pytest.skip("glslangValidator is not installed (Debian: glslang-tools)")
    out = tmp_path_factory.mktemp("spirv")
    for name in ("add_one", "scale_2d"):
        command = [compiler, "-V", "--target-env", "vulkan1.1", "-e", name]
        command += ["--source-entrypoint", "main", "-o", str(out / f"{name}.spv")]
        result = subprocess.run(
            [*command, str(SHADERS / f"{name}.comp")], capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout + result.stderr
    return out


def module_bytes(kernels: list[tuple[dict, bytes]]) -> bytes:
    """The serialized ``vulkan`` module of (metadata, SPIR-V) pairs."""

    def shader(spirv: bytes) -> bytes:
        return struct.pack("<IQ", 0, len(spirv) // 4) + spirv

    return kernel_blobs.module_bytes("vulkan", kernels, shader)


@pytest.fixture(scope="module")
def kernels(spirv_dir: Path) -> tvm.ffi.Module:
    """``add_one`` and ``scale_2d`` in one module, loaded from its serialized form."""
    pairs = [
        (info, (spirv_dir / f"{info['name']}.spv").read_bytes()) for info in (ADD_ONE, SCALE_2D)
    ]
    module = tvm.get_global_func("ffi.Module.load_from_bytes.vulkan")(module_bytes(pairs))
    assert module.kind == "vulkan"
    return module


def test_device_and_attributes():
    dev = vulkan(0)
    names = list(tvm.get_global_func("runtime.vulkan.device_names")())
    assert dev.exist and dev.device_name == names[0]
    assert dev.max_threads_per_block >= 128 and dev.warp_size >= 1
    assert dev.max_shared_memory_per_block >= 16384 and dev.total_global_memory > 0
    assert dev.api_version.startswith("1.")
    assert dev.max_thread_dimensions.startswith("[")
    assert not vulkan(99).exist
    with pytest.raises(ValueError, match=f"no Vulkan device 99; present: .*{names[0][:8]}"):
        empty((4,), "float32", vulkan(99))


@pytest.mark.parametrize(
    ("env", "cause"),
    [
        (
            {"VK_DRIVER_FILES": "/nonexistent.json", "VK_ICD_FILENAMES": "/nonexistent.json"},
            "ERROR_INCOMPATIBLE_DRIVER",
        ),
        (
            {"TVM_VULKAN_LOADER": "/nonexistent/libvulkan.so.1"},
            "Vulkan loader '/nonexistent/libvulkan.so.1' could not be opened",
        ),
    ],
    ids=["no-driver", "no-loader"],
)
def test_without_a_driver_exist_is_false_and_allocation_names_the_cause(
    env: dict[str, str], cause: str
):
    """In a process whose loader finds no driver, or that has no loader; `import tvm` there leaves
    libvulkan unloaded."""
    script = """
import tvm
from tvm.runtime import empty, vulkan
maps = lambda: open("/proc/self/maps").read()
assert "libvulkan" not in maps(), "import tvm loaded libvulkan"
assert not vulkan(0).exist
try:
    empty((4,), "float32", vulkan(0))
except ValueError as err:
    print("ERROR:", err)
"""
    env = dict(os.environ, **env)
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "ERROR:" in result.stdout and cause in result.stdout, result.stdout


@pytest.mark.parametrize(
    "dtype",
    [
        *("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"),
        *("float16", "float32", "float64", "bool"),
    ],
)
def test_every_dtype_round_trips(dtype):
    data = (np.arange(-20, 40).reshape(6, 10) % 7).astype(dtype)
    x = tensor(data, device=vulkan(0))
    assert (x.device, x.shape, x.dtype) == (vulkan(0), (6, 10), dtype)
    np.testing.assert_array_equal(x.numpy(), data)


def test_copies_between_vulkan_and_cpu():
    data = np.arange(12, dtype="float32").reshape(3, 4)
    x = tensor(data, device=vulkan(0))
    np.testing.assert_array_equal(x.copyto(cpu()).numpy(), data)
    y = x.copyto(vulkan(0))
    np.testing.assert_array_equal(y.numpy(), data)
    # A strided numpy source (a transposed view) and copies into existing tensors.
    t = tensor(data.T, device="vulkan:0")
    np.testing.assert_array_equal(t.numpy(), data.T)
    into = empty((4, 3), "float32", vulkan(0))
    assert into.copyfrom(data.T) is into
    np.testing.assert_array_equal(np.asarray(into), data.T)
    host = empty((4, 3), "float32")
    assert t.copyto(host) is host
    np.testing.assert_array_equal(host.numpy(), data.T)
    with pytest.raises(ValueError, match=r"\[3, 4\].*\[4, 3\]"):
        into.copyfrom(x)


def test_raw_streams_other_than_the_default_are_refused():
    check_one_queue_streams(vulkan(0), "Vulkan")


def test_dlpack_export_carries_the_vulkan_device():
    check_dlpack_export(vulkan(0))
    x = tensor(np.arange(5, dtype="int32"), device=vulkan(0))
    with pytest.raises(RuntimeError, match="Unsupported device"):
        np.from_dlpack(x)  # numpy cannot read device memory


def test_add_one_from_a_spv_file_with_metadata(spirv_dir: Path):
    write_add_one_metadata(spirv_dir / "add_one.spv")
    module = tvm.runtime.load_module(spirv_dir / "add_one.spv")
    assert module.kind == "vulkan"
    run_add_one(module["add_one"], vulkan(0))


def test_strided_2d_kernel(kernels: tvm.ffi.Module):
    rows, cols, stride = 13, 10, 16
    source = np.arange(rows * stride, dtype="float32")
    src = tensor(source, device=vulkan(0))
    dst = empty((rows, cols), "float32", vulkan(0))
    kernels["scale_2d"](src, dst, rows, cols, stride, 0.5, (cols + 7) // 8, (rows + 7) // 8, 8, 8)
    expected = 0.5 * source.reshape(rows, stride)[:, :cols]
    np.testing.assert_array_equal(dst.numpy(), expected)


def test_module_embedded_in_a_compiled_library(compile_c, spirv_dir: Path):
    """A host library whose `__tvm_ffi__library_bin` holds a vulkan module imports it on load."""
    spirv = (spirv_dir / "add_one.spv").read_bytes()
    payload = module_bytes([(ADD_ONE, spirv)])
    source = kernel_blobs.embedding_library_source("vulkan", payload)
    library = tvm.runtime.load_module(compile_c(source, name="libembeds_vulkan.so"))
    (imported,) = library.imports
    assert imported.kind == "vulkan"
    run_add_one(library.get_function("add_one", query_imports=True), vulkan(0))


def test_bad_launches_name_the_kernel_and_leave_the_device_usable(kernels: tvm.ffi.Module):
    check_bad_launches(kernels["add_one"], vulkan(0), "Vulkan")


def test_modules_that_do_not_match_their_shaders_are_refused(spirv_dir: Path):
    spirv = (spirv_dir / "add_one.spv").read_bytes()
    load = tvm.get_global_func("ffi.Module.load_from_bytes.vulkan")
    renamed = dict(ADD_ONE, name="add_two")
    with pytest.raises(ValueError, match=r"`add_two` is not a compute entry point .*add_one"):
        load(module_bytes([(renamed, spirv)]))
    with pytest.raises(ValueError, match="not valid SPIR-V"):
        load(module_bytes([(ADD_ONE, b"\0" * 64)]))
    with pytest.raises(ValueError, match="malformed vulkan module"):
        load(module_bytes([(ADD_ONE, spirv)])[:-5])
    (spirv_dir / "lonely.spv").write_bytes(spirv)
    with pytest.raises(FileNotFoundError, match=r"lonely\.tvm_meta\.json"):
        tvm.runtime.load_module(spirv_dir / "lonely.spv")
