"""Measurement aid of dropin-suite.sh (--stub-missing), never part of the runtime.

Run as `python dropin_stub.py dump LIB OUT.json`, it records the global function names and the
type keys (with their parents, in index order) that library LIB registers at load. Copied as
`sitecustomize.py` into a site directory with STUB_SPEC pointing at that JSON, it loads the
library under test first and registers what the dump has and the library lacks: each missing
global as a function that raises NotImplementedError naming itself, each missing type key under
its parent. The suite can then import the package and count the tests that do not need them.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys


class ByteArray(ctypes.Structure):
    _fields_ = (("data", ctypes.c_void_p), ("size", ctypes.c_size_t))


class TypeInfo(ctypes.Structure):
    _fields_ = (
        ("type_index", ctypes.c_int32),
        ("type_depth", ctypes.c_int32),
        ("type_key", ByteArray),
        ("type_ancestors", ctypes.POINTER(ctypes.c_void_p)),
    )


class Any(ctypes.Structure):
    _fields_ = (("type_index", ctypes.c_int32), ("pad", ctypes.c_uint32), ("v", ctypes.c_uint64))


SAFE_CALL = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(Any), ctypes.c_int32, ctypes.POINTER(Any)
)


def _setup(lib: ctypes.CDLL) -> None:
    lib.TVMFFIGetTypeInfo.restype = ctypes.POINTER(TypeInfo)
    lib.TVMFFIGetTypeInfo.argtypes = (ctypes.c_int32,)
    lib.TVMFFIFunctionGetGlobal.argtypes = (ctypes.POINTER(ByteArray), ctypes.c_void_p)


def _text(array: ByteArray) -> str:
    return ctypes.string_at(array.data, array.size).decode()


def _types(lib: ctypes.CDLL) -> list[list]:
    """[key, parent key] of every registered type, parents before children."""
    import tvm_ffi

    out = []
    for key in tvm_ffi.get_global_func("ffi.GetRegisteredTypeKeys")():
        raw = str(key).encode()
        array = ByteArray(ctypes.cast(ctypes.c_char_p(raw), ctypes.c_void_p), len(raw))
        index = ctypes.c_int32()
        if lib.TVMFFITypeKeyToIndex(ctypes.byref(array), ctypes.byref(index)) != 0:
            continue
        info = lib.TVMFFIGetTypeInfo(index.value).contents
        parent = None
        if info.type_depth > 0:
            parent_info = ctypes.cast(
                info.type_ancestors[info.type_depth - 1], ctypes.POINTER(TypeInfo)
            )
            parent = _text(parent_info.contents.type_key)
        out.append([index.value, str(key), parent])
    return [[key, parent] for _, key, parent in sorted(out)]


def dump(lib_path: str, out: str) -> None:
    """Writes the globals and type keys of the library at `lib_path`."""
    import tvm_ffi

    lib = ctypes.CDLL(lib_path, ctypes.RTLD_GLOBAL)
    _setup(lib)
    names = sorted(tvm_ffi.registry.list_global_func_names())
    with open(out, "w") as f:
        json.dump({"globals": names, "types": _types(lib)}, f)


def _missing_function(name: str):
    message = f"{name} is not implemented by this runtime (dropin-suite --stub-missing)".encode()

    def call(handle, args, num_args, result):
        _LIB.TVMFFIErrorSetRaisedFromCStr(b"NotImplementedError", message)
        return -1

    return SAFE_CALL(call)


_KEEP: list = []
_LIB = None


def install(lib_path: str, spec_path: str) -> None:
    """Registers what the spec has and the library at `lib_path` lacks."""
    global _LIB
    lib = _LIB = ctypes.CDLL(lib_path, ctypes.RTLD_GLOBAL)
    _setup(lib)
    with open(spec_path) as f:
        spec = json.load(f)
    for name in spec["globals"]:
        if not name.startswith("ffi."):
            continue  # the testing library registers its own when it loads
        key = name.encode()
        array = ByteArray(ctypes.cast(ctypes.c_char_p(key), ctypes.c_void_p), len(key))
        handle = ctypes.c_void_p()
        lib.TVMFFIFunctionGetGlobal(ctypes.byref(array), ctypes.byref(handle))
        if handle.value:
            lib.TVMFFIObjectDecRef(handle)
            continue
        call = _missing_function(name)
        _KEEP.append(call)
        func = ctypes.c_void_p()
        if lib.TVMFFIFunctionCreate(None, call, None, ctypes.byref(func)) == 0:
            lib.TVMFFIFunctionSetGlobal(ctypes.byref(array), func, 0)
            lib.TVMFFIObjectDecRef(func)
    for key, parent in spec["types"]:
        if not key.startswith("ffi."):
            continue
        raw = key.encode()
        array = ByteArray(ctypes.cast(ctypes.c_char_p(raw), ctypes.c_void_p), len(raw))
        found = ctypes.c_int32()
        if (
            parent is None
            or lib.TVMFFITypeKeyToIndex(ctypes.byref(array), ctypes.byref(found)) == 0
        ):
            continue
        lib.TVMFFIErrorMoveFromRaised(ctypes.byref(ctypes.c_void_p()))
        pkey = parent.encode()
        parray = ByteArray(ctypes.cast(ctypes.c_char_p(pkey), ctypes.c_void_p), len(pkey))
        parent_index = ctypes.c_int32()
        if lib.TVMFFITypeKeyToIndex(ctypes.byref(parray), ctypes.byref(parent_index)) != 0:
            continue
        depth = lib.TVMFFIGetTypeInfo(parent_index.value).contents.type_depth + 1
        lib.TVMFFITypeGetOrAllocIndex(ctypes.byref(array), -1, depth, 0, 1, parent_index.value)


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "dump":
    dump(sys.argv[2], sys.argv[3])
elif os.environ.get("STUB_SPEC") and os.environ.get("STUB_LIB"):
    install(os.environ["STUB_LIB"], os.environ["STUB_SPEC"])
