/* A compiled module for the C++ hosts: `add_one(x)` and `fail()` (raises a ValueError). */
#include <tvm/ffi/c_api.h>

TVM_FFI_DLL_EXPORT int __tvm_ffi_add_one(void* self, const TVMFFIAny* args, int32_t num_args,
                                         TVMFFIAny* result) {
  (void)self;
  if (num_args != 1 || args[0].type_index != kTVMFFIInt) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "add_one takes one int");
    return -1;
  }
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = args[0].v_int64 + 1;
  return 0;
}

TVM_FFI_DLL_EXPORT int __tvm_ffi_fail(void* self, const TVMFFIAny* args, int32_t num_args,
                                      TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)num_args;
  (void)result;
  TVMFFIErrorSetRaisedFromCStr("ValueError", "fail was called");
  return -1;
}
