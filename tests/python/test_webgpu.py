"""The WebGPU backend on a real adapter (Mesa lavapipe through wgpu's Vulkan backend in CI):
devices and attributes, tensors of every dtype the adapter's shaders take, copies between numpy,
the CPU, Vulkan and WebGPU, WGSL kernels (``crates/device-webgpu/tests/shaders``) loaded from
``.wgsl`` files, from bytes and from a library compiled by the test, the awaitable forms from
asyncio, and the bad-input list.

Every test skips, saying why, only when wgpu finds no adapter (no Vulkan driver installed)."""

import asyncio
import os
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
from tvm.runtime import cpu, empty, tensor, tensor_to_numpy_async, webgpu, webgpu_sync_async

SHADERS = Path(__file__).resolve().parents[2] / "crates" / "device-webgpu" / "tests" / "shaders"


pytestmark = skip_without_devices("webgpu", "wgpu lists no adapter")

SCALE_2D = {
    "name": "scale_2d",
    "arg_types": ["handle", "handle", "int32", "int32", "int32", "float32"],
    "launch_param_tags": ["blockIdx.x", "blockIdx.y", "threadIdx.x", "threadIdx.y"],
}
BUSY = {
    "name": "busy",
    "arg_types": ["handle", "int32", "int32"],
    "launch_param_tags": ["blockIdx.x", "threadIdx.x"],
}


def module_bytes(kernels: list[tuple[dict, str]]) -> bytes:
    """The serialized ``webgpu`` module of (metadata, WGSL) pairs."""
    pairs = [(info, source.encode()) for info, source in kernels]
    return kernel_blobs.module_bytes("webgpu", pairs, kernel_blobs.string_field)


def wgsl(name: str) -> str:
    return (SHADERS / f"{name}.wgsl").read_text()


@pytest.fixture(scope="module")
def kernels() -> tvm.ffi.Module:
    """``add_one``, ``scale_2d`` and ``busy`` in one module, loaded from its serialized form."""
    pairs = [(info, wgsl(info["name"])) for info in (ADD_ONE, SCALE_2D, BUSY)]
    module = tvm.get_global_func("ffi.Module.load_from_bytes.webgpu")(module_bytes(pairs))
    assert module.kind == "webgpu"
    return module


def test_device_and_attributes():
    dev = webgpu(0)
    names = list(tvm.get_global_func("runtime.webgpu.device_names")())
    assert dev.exist and dev.device_name == names[0]
    assert dev.max_threads_per_block >= 256 and dev.warp_size >= 1
    assert dev.max_shared_memory_per_block >= 16384
    assert dev.max_thread_dimensions.startswith("[")
    assert dev.api_version in ("vulkan", "metal", "dx12")
    assert not webgpu(99).exist
    with pytest.raises(ValueError, match=f"no WebGPU device 99; present: .*{names[0][:8]}"):
        empty((4,), "float32", webgpu(99))


def test_without_a_driver_exist_is_false_and_allocation_names_the_cause():
    """In a process whose Vulkan loader finds no driver; `import tvm` there loads no libvulkan."""
    script = """
import tvm
from tvm.runtime import empty, webgpu
maps = lambda: open("/proc/self/maps").read()
assert "libvulkan" not in maps(), "import tvm loaded libvulkan"
assert not webgpu(0).exist
try:
    empty((4,), "float32", webgpu(0))
except ValueError as err:
    print("ERROR:", err)
"""
    env = dict(
        os.environ, VK_DRIVER_FILES="/nonexistent.json", VK_ICD_FILENAMES="/nonexistent.json"
    )
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "ERROR:" in result.stdout and "no WebGPU adapter found" in result.stdout, result.stdout


def test_a_headless_process_prints_no_wayland_noise():
    """Without a desktop session (no XDG_RUNTIME_DIR), opening the WebGPU backend prints
    nothing: libwayland, which the Vulkan driver loads, would complain on stderr."""
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "WAYLAND_DISPLAY")}
    script = "import tvm; print(list(tvm.get_global_func('runtime.webgpu.device_names')()))"
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "XDG_RUNTIME_DIR" not in result.stderr, result.stderr


def test_every_supported_dtype_round_trips_and_others_are_refused():
    supported = list(tvm.get_global_func("runtime.webgpu.supported_dtypes")(webgpu(0)))
    assert {"float32", "int32", "uint32"} <= set(supported)
    for dtype in supported:
        for shape in [(6, 10), (7,), (1, 3)]:  # 7 and 3 elements: odd byte tails for 16 bits
            data = (np.arange(-20, -20 + int(np.prod(shape))).reshape(shape) % 7).astype(dtype)
            x = tensor(data, device=webgpu(0))
            assert (x.device, x.shape, x.dtype) == (webgpu(0), shape, dtype)
            np.testing.assert_array_equal(x.numpy(), data)
    for dtype in ("int8", "uint8", "bool", "int16", "bfloat16"):
        if dtype not in supported:
            with pytest.raises(TypeError, match=f"WebGPU tensors cannot hold {dtype}"):
                empty((4,), dtype, webgpu(0))


def test_copies_between_webgpu_and_cpu():
    data = np.arange(12, dtype="float32").reshape(3, 4)
    x = tensor(data, device=webgpu(0))
    np.testing.assert_array_equal(x.copyto(cpu()).numpy(), data)
    y = x.copyto(webgpu(0))
    np.testing.assert_array_equal(y.numpy(), data)
    # A strided numpy source (a transposed view) and copies into existing tensors.
    t = tensor(data.T, device="webgpu:0")
    np.testing.assert_array_equal(t.numpy(), data.T)
    into = empty((4, 3), "float32", webgpu(0))
    assert into.copyfrom(data.T) is into
    np.testing.assert_array_equal(np.asarray(into), data.T)
    host = empty((4, 3), "float32")
    assert t.copyto(host) is host
    np.testing.assert_array_equal(host.numpy(), data.T)
    with pytest.raises(ValueError, match=r"\[3, 4\].*\[4, 3\]"):
        into.copyfrom(x)


def test_copies_between_webgpu_and_vulkan():
    if not tvm.vulkan(0).exist:
        pytest.skip("no Vulkan device")
    data = np.arange(10, dtype="int32") * 3
    x = tensor(data, device=webgpu(0))
    v = x.copyto(tvm.vulkan(0))
    assert v.device == tvm.vulkan(0)
    np.testing.assert_array_equal(v.numpy(), data)
    back = v.copyto(webgpu(0))
    assert back.device == webgpu(0)
    np.testing.assert_array_equal(back.numpy(), data)


def test_raw_streams_other_than_the_default_are_refused():
    check_one_queue_streams(webgpu(0), "WebGPU")


def test_dlpack_export_carries_the_webgpu_device():
    check_dlpack_export(webgpu(0))


def test_add_one_from_a_wgsl_file_with_metadata(tmp_path: Path):
    (tmp_path / "add_one.wgsl").write_text(wgsl("add_one"))
    write_add_one_metadata(tmp_path / "add_one.wgsl")
    module = tvm.runtime.load_module(tmp_path / "add_one.wgsl")
    assert module.kind == "webgpu"
    run_add_one(module["add_one"], webgpu(0))


def test_strided_2d_kernel(kernels: tvm.ffi.Module):
    rows, cols, stride = 13, 10, 16
    source = np.arange(rows * stride, dtype="float32")
    src = tensor(source, device=webgpu(0))
    dst = empty((rows, cols), "float32", webgpu(0))
    kernels["scale_2d"](src, dst, rows, cols, stride, 0.5, (cols + 7) // 8, (rows + 7) // 8, 8, 8)
    expected = 0.5 * source.reshape(rows, stride)[:, :cols]
    np.testing.assert_array_equal(dst.numpy(), expected)


def _lcg(value: int, steps: int) -> int:
    for _ in range(steps):
        value = (value * 1664525 + 1013904223) & 0xFFFFFFFF
    return value


def test_asyncio_loop_keeps_running_while_the_gpu_works(kernels: tvm.ffi.Module):
    n, steps = 1 << 16, 20000
    x = tensor(np.zeros(n, dtype="uint32"), device=webgpu(0))

    async def main() -> tuple[int, np.ndarray]:
        kernels["busy"](x, n, steps, n // 64, 64)
        sync = asyncio.ensure_future(webgpu_sync_async(webgpu(0)))
        ticks = 0
        while not sync.done():
            ticks += 1
            await asyncio.sleep(0)
        await sync
        return ticks, await tensor_to_numpy_async(x)

    ticks, result = asyncio.run(main())
    # The loop ran other work many times while the device was busy.
    assert ticks > 100, ticks
    assert (result == _lcg(0, steps)).all()


def test_async_errors_arrive_with_their_kind():
    x = tensor(np.zeros(4, dtype="float32"), device=webgpu(0))
    wrong = empty((5,), "float32")

    async def main() -> None:
        await tvm.runtime.webgpu_async.tensor_to_numpy_async(x)  # fine
        future, callback = tvm.runtime.webgpu_async._completion(asyncio.get_running_loop())
        tvm.get_global_func("webgpu.copy_to_host_then")(x, wrong, callback)
        await future

    with pytest.raises(ValueError, match=r"\[4\].*\[5\]"):
        asyncio.run(main())


def test_rpc_async_functions_complete_when_called():
    data = np.arange(6, dtype="float32")
    x = tensor(data, device=webgpu(0))
    host = empty((6,), "float32")
    tvm.get_global_func("webgpu.sync_async")(webgpu(0))
    tvm.get_global_func("webgpu.copy_to_host_async")(x, host)
    np.testing.assert_array_equal(host.numpy(), data)


def test_module_embedded_in_a_compiled_library(compile_c):
    """A host library whose `__tvm_ffi__library_bin` holds a webgpu module imports it on load."""
    payload = module_bytes([(ADD_ONE, wgsl("add_one"))])
    source = kernel_blobs.embedding_library_source("webgpu", payload)
    library = tvm.runtime.load_module(compile_c(source, name="libembeds_webgpu.so"))
    (imported,) = library.imports
    assert imported.kind == "webgpu"
    run_add_one(library.get_function("add_one", query_imports=True), webgpu(0))


def test_bad_launches_name_the_kernel_and_leave_the_device_usable(kernels: tvm.ffi.Module):
    add_one = kernels["add_one"]
    if tvm.vulkan(0).exist:
        a = tensor(np.zeros(64, "float32"), device=webgpu(0))
        on_vulkan = tensor(np.zeros(64, "float32"), device=tvm.vulkan(0))
        with pytest.raises(ValueError, match="argument 1 is a tensor on vulkan:0"):
            add_one(a, on_vulkan, 64, 1, 64)
    check_bad_launches(add_one, webgpu(0), "WebGPU")


def test_a_tensor_larger_than_a_binding_is_refused(kernels: tvm.ffi.Module):
    limit = tvm.get_global_func("runtime.webgpu.max_storage_binding_size")(webgpu(0))
    n = limit // 4 + 64
    big = empty((n,), "float32", webgpu(0))
    out = empty((n,), "float32", webgpu(0))
    with pytest.raises(ValueError, match=f"kernel `add_one`: argument 0 spans .* at most {limit}"):
        kernels["add_one"](big, out, 64, 1, 64)
    run_add_one(kernels["add_one"], webgpu(0))


def test_modules_that_do_not_match_their_shaders_are_refused(tmp_path: Path):
    load = tvm.get_global_func("ffi.Module.load_from_bytes.webgpu")
    with pytest.raises(ValueError, match=r"kernel `add_one`.* does not compile as WGSL:\n.*error"):
        load(module_bytes([(ADD_ONE, "fn add_one( {")]))
    invalid = wgsl("add_one").replace("a[i] + 1.0", "a[i] + 1u")
    with pytest.raises(ValueError, match="kernel `add_one`"):
        load(module_bytes([(ADD_ONE, invalid)]))
    renamed = dict(ADD_ONE, name="add_two")
    with pytest.raises(ValueError, match=r"`add_two` is not a compute entry point .*add_one"):
        load(module_bytes([(renamed, wgsl("add_one"))]))
    one_tensor = dict(ADD_ONE, arg_types=["handle", "int32"])
    with pytest.raises(ValueError, match="the metadata does not match the shader"):
        load(module_bytes([(one_tensor, wgsl("add_one"))]))
    int64_scalar = dict(ADD_ONE, arg_types=["handle", "handle", "int64"])
    with pytest.raises(TypeError, match="WGSL kernels take int32, uint32 and float32 scalars"):
        load(module_bytes([(int64_scalar, wgsl("add_one"))]))
    with pytest.raises(ValueError, match="malformed webgpu module"):
        load(module_bytes([(ADD_ONE, wgsl("add_one"))])[:-5])
    (tmp_path / "lonely.wgsl").write_text(wgsl("add_one"))
    with pytest.raises(FileNotFoundError, match=r"lonely\.tvm_meta\.json"):
        tvm.runtime.load_module(tmp_path / "lonely.wgsl")
