"""The CUDA backend on a real GPU (run by scripts/gpu-check.sh): attributes, copies, streams,
kernels compiled with NVRTC (add-one and a strided kernel) or a hand-written PTX add-one, and
DLPack exchange with torch or cupy when installed. Prints one line per check; exits nonzero on
the first failure."""

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import tvm

ADD_ONE_PTX = """.version 7.0
.target sm_52
.address_size 64
.visible .entry add_one(.param .u64 p_x, .param .u32 p_n)
{
    .reg .pred %p<2>; .reg .b32 %r<6>; .reg .f32 %f<3>; .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [p_x];
    ld.param.u32 %r1, [p_n];
    mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.s32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f1, [%rd4];
    add.f32 %f2, %f1, 0f3F800000;
    st.global.f32 [%rd4], %f2;
DONE:
    ret;
}
"""

CUDA_SOURCE = r"""
extern "C" __global__ void add_one(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
extern "C" __global__ void strided_scale(float* out, const float* in, int rows, int cols,
                                         int in_row_stride, int out_row_stride) {
    int r = blockIdx.x, c = threadIdx.x;
    if (r < rows && c < cols) out[r * out_row_stride + c] = 2.0f * in[r * in_row_stride + c];
}
"""

META = {
    "func_info": {
        "add_one": {
            "name": "add_one",
            "arg_types": ["handle", "int32"],
            "launch_param_tags": ["blockIdx.x", "threadIdx.x"],
        },
        "strided_scale": {
            "name": "strided_scale",
            "arg_types": ["handle", "handle", "int32", "int32", "int32", "int32"],
            "launch_param_tags": ["blockIdx.x", "threadIdx.x"],
        },
    }
}


def check(name, condition, detail=""):
    print(f"gpu-check: {'PASS' if condition else 'FAIL'}: {name} {detail}".rstrip(), flush=True)
    if not condition:
        sys.exit(1)


def load(directory: Path, ptx: bytes, meta: dict):
    (directory / "k.ptx").write_bytes(ptx)
    (directory / "k.tvm_meta.json").write_text(json.dumps(meta))
    return tvm.ffi.load_module(str(directory / "k.ptx"))


def main() -> None:
    dev = tvm.cuda(0)
    check("cuda:0 exists", dev.exist)
    print(
        f"gpu-check: {dev.device_name}, compute {dev.compute_version}, "
        f"{dev.multi_processor_count} SMs, warp {dev.warp_size}, "
        f"{dev.total_global_memory / 2**30:.1f} GiB, driver {dev.driver_version}"
    )
    major, minor = dev.compute_version.split(".")

    # Copies: host <-> device, device <-> device, 64 MiB, with the bandwidth.
    host = np.random.default_rng(0).random(16 << 20, dtype=np.float32)
    start = time.perf_counter()
    t = tvm.runtime.tensor(host, dev)
    dev.sync()
    h2d = host.nbytes / (time.perf_counter() - start) / 1e9
    start = time.perf_counter()
    back = t.numpy()
    d2h = host.nbytes / (time.perf_counter() - start) / 1e9
    check(
        "64 MiB round trip", np.array_equal(back, host), f"(H2D {h2d:.1f} GB/s, D2H {d2h:.1f} GB/s)"
    )
    check("device to device copy", np.array_equal(t.copyto(dev).numpy(), host))
    view = host.reshape(4096, 4096)[:, ::2]
    check("strided host source", np.array_equal(tvm.runtime.tensor(view, dev).numpy(), view))

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        try:
            ptx = tvm.support.nvcc.compile_cuda(
                CUDA_SOURCE, target_format="ptx", arch=f"sm_{major}{minor}", compiler="nvrtc"
            )
            meta = META
            compiled = True
        except RuntimeError as err:
            print(f"gpu-check: NVRTC unavailable ({str(err).splitlines()[0]}); hand-written PTX")
            ptx, compiled = ADD_ONE_PTX.encode(), False
            meta = {"func_info": {"add_one": META["func_info"]["add_one"]}}
        mod = load(directory, bytes(ptx), meta)
        x = np.arange(1000, dtype=np.float32)
        t = tvm.runtime.tensor(x, dev)
        mod["add_one"](t, 1000, 4, 256)
        check("add_one kernel", np.array_equal(t.numpy(), x + 1))

        # On a stream of our own, made current.
        stream = dev.create_raw_stream()
        previous = dev.set_raw_stream(stream)
        mod["add_one"](t, 1000, 4, 256)
        dev.sync(stream)
        dev.set_raw_stream(previous)
        check("add_one on a created stream", np.array_equal(t.numpy(), x + 2))
        dev.free_raw_stream(stream)

        if compiled:
            a = np.arange(32 * 48, dtype=np.float32).reshape(32, 48)
            src = tvm.runtime.tensor(a, dev)
            out = tvm.runtime.tensor(np.zeros((32, 64), dtype=np.float32), dev)
            mod["strided_scale"](out, src, 32, 24, 48, 64, 32, 24)
            expected = np.zeros((32, 64), dtype=np.float32)
            expected[:, :24] = 2 * a[:, :24]
            check("strided NVRTC kernel", np.array_equal(out.numpy(), expected))

    # DLPack with another framework, when one is installed.
    for name in ("torch", "cupy"):
        try:
            framework = __import__(name)
        except ImportError:
            print(f"gpu-check: SKIP: {name} is not installed (DLPack exchange)")
            continue
        ours = tvm.runtime.tensor(x, dev)
        theirs = framework.from_dlpack(ours)
        values = theirs.cpu().numpy() if name == "torch" else framework.asnumpy(theirs)
        check(f"DLPack to {name}", np.array_equal(values, x))
        again = tvm.ffi.from_dlpack(theirs)
        check(f"DLPack from {name}", again.device == dev and np.array_equal(again.numpy(), x))


if __name__ == "__main__":
    main()
