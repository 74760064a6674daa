"""numpy arrays of every layout a tensor import meets, and what a tensor says of one; shared by
``test_numpy_import.py`` and the fresh interpreters it starts (which import this file)."""

import ctypes

import numpy as np

from tvm.ffi import from_dlpack


def make_arrays() -> dict:
    """Arrays by name: every DLPack dtype, strided, reversed, Fortran, 0-d, empty, broadcast and
    read-only layouts, and more than 16 dimensions (which go through ``__dlpack__``)."""
    base = np.arange(48, dtype=np.float32).reshape(6, 8)
    read_only = np.arange(6.0)
    read_only.setflags(write=False)
    dtypes = ("bool", "int8", "uint8", "int16", "uint16", "intc", "uintc", "int_", "uint")
    dtypes += ("longlong", "ulonglong", "float16", "float32", "float64", "complex64", "complex128")
    arrays = {f"dtype-{name}": (np.arange(6) % 2).astype(name) for name in dtypes}
    arrays.update(
        {
            "fortran": np.asfortranarray(base),
            "transpose": base.T,
            "every-other-column": base[:, ::2],
            "reversed": base[::-1, ::-3],
            "window": base[1:4, 2:5],
            "zero-dim": np.array(7, dtype=np.int64),
            "empty-rows": np.zeros((0, 3), dtype=np.float32),
            "empty-columns": np.zeros((3, 0), dtype=np.int16),
            "broadcast": np.broadcast_to(np.arange(3.0), (4, 3)),
            "read-only": read_only,
            "seventeen-dims": np.zeros((1,) * 16 + (2,)),
        }
    )
    return arrays


def describe(array) -> dict:
    """What the tensor of ``array`` says: shape, strides, dtype, where its data starts relative
    to the array's, and whether it is read-only."""
    tensor = from_dlpack(array)
    return {
        "shape": list(tensor.shape),
        "strides": list(tensor.strides),
        "dtype": str(tensor.dtype),
        "data": tensor.data_ptr - array.ctypes.data,
        "read_only": exports_read_only(tensor),
    }


def exports_read_only(tensor) -> bool:
    """Whether the versioned DLPack export of ``tensor`` carries the read-only flag."""
    capsule = tensor.__dlpack__(max_version=(1, 0))
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    managed = get_pointer(capsule, b"dltensor_versioned")
    # DLManagedTensorVersioned: version (8 bytes), manager_ctx, deleter, then the flags.
    return bool(ctypes.c_uint64.from_address(managed + 24).value & 1)


def expected(array) -> dict:
    """What :func:`describe` must say of ``array``, from numpy's own attributes."""
    return {
        "shape": list(array.shape),
        "strides": [s // array.itemsize for s in array.strides],
        "dtype": "bool" if array.dtype == np.bool_ else str(array.dtype),
        "data": 0,
        "read_only": not array.flags.writeable,
    }


def without_empty_strides(descriptions: dict, arrays: dict) -> dict:
    """``descriptions`` without the strides of empty arrays, which carry no layout: numpy's
    buffer export gives them compact strides where its struct may hold others."""
    return {
        name: {k: v for k, v in d.items() if k != "strides" or arrays[name].size}
        for name, d in descriptions.items()
    }
