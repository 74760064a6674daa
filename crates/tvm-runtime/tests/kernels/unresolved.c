/* A kernel whose function calls a symbol no library defines. */
#include <tvm/ffi/c_api.h>

extern int tvm_test_no_such_function(int);

TVM_FFI_DLL_EXPORT int __tvm_ffi_call_missing(void* self, const TVMFFIAny* args, int32_t num_args,
                                              TVMFFIAny* result) {
  (void)self, (void)args, (void)num_args;
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = tvm_test_no_such_function(1);
  return 0;
}
