"""Binary forms the GPU backend tests build by hand: serialized device modules
(``[fmt][fmap][smap]``) and the C source of a host library that embeds one in
``__tvm_ffi__library_bin``."""

from __future__ import annotations

import struct
from collections.abc import Callable

import tvm


def string_field(text: str | bytes) -> bytes:
    """A length-prefixed string (u64 length, then the bytes)."""
    data = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(data)) + data


def dtype_field(text: str) -> bytes:
    """A DLDataType (code, bits, lanes)."""
    dtype = tvm.ffi.dtype(text)
    return struct.pack("<BBH", dtype.type_code, dtype.bits, dtype.lanes)


def module_bytes(
    fmt: str, kernels: list[tuple[dict, bytes]], code: Callable[[bytes], bytes]
) -> bytes:
    """The serialized module ``[fmt][fmap][smap]`` of (metadata, code) pairs; ``code`` encodes
    one kernel's code as its ``smap`` value."""
    out = string_field(fmt) + struct.pack("<Q", len(kernels))
    for info, _ in kernels:
        out += string_field(info["name"]) + string_field(info["name"])
        out += struct.pack("<Q", len(info["arg_types"]))
        out += b"".join(dtype_field(t) for t in info["arg_types"])
        out += struct.pack("<Q", len(info["launch_param_tags"]))
        out += b"".join(string_field(t) for t in info["launch_param_tags"])
        out += struct.pack("<Q", 0)
    out += struct.pack("<Q", len(kernels))
    for info, body in kernels:
        out += string_field(info["name"]) + code(body)
    return out


def embedding_library_source(kind: str, payload: bytes) -> str:
    """C source of a host library whose ``__tvm_ffi__library_bin`` imports one device module of
    ``kind`` (serialized as ``payload``)."""
    # The import tree in CSR form: node 0 (the library) imports node 1 (the device module).
    tree = struct.pack("<4Q", 3, 0, 1, 1) + struct.pack("<2Q", 1, 1)
    blob = tree + string_field("_lib") + string_field(kind) + string_field(payload)
    data = struct.pack("<Q", len(blob)) + blob
    array = ", ".join(str(b) for b in data)
    return f"""
#include <tvm/ffi/c_api.h>
TVM_FFI_DLL_EXPORT const unsigned char __tvm_ffi__library_bin[{len(data)}] = {{{array}}};
"""
