"""A short tour of the tvm package: native functions, Python callbacks, containers, zero-copy
tensors through DLPack, and errors that keep their class and native frames."""

import numpy as np

import tvm


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
    echo = tvm.get_global_func("testing.echo")
    value = echo({"name": "resnet", "shape": [1, 3, 224, 224], "dtype": tvm.ffi.dtype("f16")})
    print("echo(dict) ->", value, "| keys:", list(value.keys()))

    # Native code calling back into Python.
    apply = tvm.get_global_func("testing.apply")
    print("testing.apply(lambda x: x * x, 12) ->", apply(lambda x: x * x, 12))

    # Errors keep their Python class, across native frames, in both directions.
    try:
        tvm.get_global_func("testing.test_raise_error")("ValueError", "raised in Rust")
    except ValueError as err:
        print("caught ValueError:", err)

    def failing(x: int) -> int:
        raise KeyError(f"no entry {x}")

    try:
        apply(failing, 7)
    except KeyError as err:
        print("the callback's own KeyError came back:", err)

    print(len(tvm.ffi.list_global_func_names()), "global functions registered")


if __name__ == "__main__":
    main()
