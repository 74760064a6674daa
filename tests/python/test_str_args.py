"""A Python ``str`` reaches compiled code as apache-tvm-ffi's binding passes it: a small string up
to 7 bytes, a ``String`` object beyond, never a raw C string (``kTVMFFIRawStr``)."""

from __future__ import annotations

import pytest

import tvm

KERNEL = r"""
#include <tvm/ffi/c_api.h>

/* Returns the type index of its one argument. */
TVM_FFI_DLL_EXPORT int __tvm_ffi_arg_type(void* self, const TVMFFIAny* args, int32_t num_args,
                                          TVMFFIAny* result) {
  (void)self;
  (void)num_args;
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = args[0].type_index;
  return 0;
}

/* Returns the length of a string argument, read from the String object's byte array. */
TVM_FFI_DLL_EXPORT int __tvm_ffi_str_len(void* self, const TVMFFIAny* args, int32_t num_args,
                                         TVMFFIAny* result) {
  (void)self;
  (void)num_args;
  if (args[0].type_index != kTVMFFIStr) return -1;
  const TVMFFIByteArray* bytes = TVMFFIBytesGetByteArrayPtr(args[0].v_obj);
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = (int64_t)bytes->size;
  return 0;
}
"""


@pytest.fixture
def kernel(compile_c):
    return tvm.ffi.load_module(str(compile_c(KERNEL, name="libstr_args.so")))


@pytest.mark.parametrize(
    ("text", "index"),
    [
        ("", 11),
        ("hello", 11),
        ("7 bytes", 11),
        ("eight by", 65),
        ("a longer string, well past the inline limit", 65),
        ("ünïcödé text", 65),
        ("nul\0inside the text", 65),
    ],
)
def test_str_arrives_as_small_string_or_string_object(kernel, text, index):
    assert kernel.arg_type(text) == index


def test_long_str_object_carries_the_utf8_bytes(kernel):
    text = "a string of thirty-two bytes...."
    assert kernel.str_len(text) == len(text.encode())
    assert kernel.str_len("ünïcödé text") == len("ünïcödé text".encode())
