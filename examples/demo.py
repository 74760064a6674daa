"""A short tour of the tvm package: native functions, Python callbacks, containers, zero-copy
tensors through DLPack, C and C++ kernels compiled against the stable header and loaded as
modules, and errors that keep their class and native frames."""

from pathlib import Path

import numpy as np

import tvm
from tvm.support import cc, libinfo, utils

EXAMPLES = Path(__file__).resolve().parents[1] / "cpp-abi" / "examples"


def kernels() -> None:
    """Build the C and C++ example kernels with the host compiler and call them on numpy data."""
    include = [f"-I{path}" for path in libinfo.find_include_path()]
    temp = utils.tempdir()
    for source, compiler, std in [
        ("add_one_c.c", "gcc", "c11"),
        ("add_one_cpp.cc", "g++", "c++17"),
    ]:
        library = temp.relpath(source.replace(".", "_") + ".so")
        cc.create_shared(
            library, [str(EXAMPLES / source)], [f"-std={std}", "-O2", *include], cc=compiler
        )
        module = tvm.runtime.load_module(library)
        x = np.arange(5, dtype="float32")
        y = np.empty_like(x)
        module.add_one(x, y)
        print(f"{source}: add_one({x.tolist()}) -> {y.tolist()};", end=" ")
        joined = module.concat("zero-", "copy")
        print(f"concat -> {joined!r}; sum_array -> {module.sum_array([1, 2, 3])}")
    print(
        "loaded at import by the C++ kernel:",
        tvm.get_global_func("cpp_example.registered_at_load")(21),
    )


def main() -> None:
    # A Python function registered globally is callable from every language.
    @tvm.register_func("demo.scale")
    def scale(x: tvm.ffi.Tensor, factor: float) -> tvm.ffi.Tensor:
        out = np.from_dlpack(x) * factor
        return tvm.ffi.from_dlpack(out)

    data = np.arange(6, dtype="float32").reshape(2, 3)
    result = tvm.get_global_func("demo.scale")(data, 2.0)  # numpy in, tensor out, no copies
    print("demo.scale(arange(6), 2.0) ->", result, np.from_dlpack(result).tolist())

    # Zero-copy both ways: a tensor made from a numpy array shares its memory.
    tensor = tvm.ffi.from_dlpack(data)
    np.from_dlpack(tensor)[0, 0] = 100.0
    print("after writing through the tensor, data[0, 0] =", data[0, 0])

    # Containers convert automatically and keep their order.
    make_map = tvm.get_global_func("ffi.Map")
    value = make_map("name", "resnet", "shape", [1, 3, 224, 224], "dtype", tvm.ffi.dtype("f16"))
    print("ffi.Map(...) ->", value, "| keys:", list(value.keys()))

    # Native code calling back into Python: a Python callable becomes a tvm.ffi.Function.
    square = tvm.ffi.convert(lambda x: x * x)
    print("a Python lambda called through the FFI: square(12) ->", square(12))

    # Errors keep their Python class, across native frames, in both directions.
    try:
        tvm.get_global_func("ffi.ArrayGetItem")(tvm.ffi.Array([1, 2]), 5)
    except IndexError as err:
        print("caught IndexError:", err)

    def failing(x: int) -> int:
        raise KeyError(f"no entry {x}")

    try:
        tvm.ffi.convert(failing)(7)  # Python -> native Function -> Python, and the error back
    except KeyError as err:
        print("the callback's own KeyError came back:", err)

    # Devices and tensors through the device registry (the CPU here; GPUs the same way).
    host = tvm.runtime.cpu()
    print(
        f"{host}: exist={host.exist}, cores={host.multi_processor_count}, "
        f"memory={host.total_global_memory >> 20} MiB"
    )
    x = tvm.runtime.tensor([[1, 2], [3, 4]], device=host)
    print("tvm.runtime.tensor(...).copyto(cpu).numpy() ->", x.copyto(host).numpy().tolist())

    kernels()
    print(len(tvm.ffi.list_global_func_names()), "global functions registered")


if __name__ == "__main__":
    main()
