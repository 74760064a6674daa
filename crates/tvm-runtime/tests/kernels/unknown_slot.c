/* A kernel library with a runtime-function slot no runtime provides: loading it must fail
 * rather than leave the slot NULL for the kernel to call. */
#include <tvm/ffi/c_api.h>

TVM_FFI_DLL_EXPORT void* __TVMBackendParallelLaunch = NULL;
TVM_FFI_DLL_EXPORT void* __TVMBackendNoSuchFunction = NULL;

TVM_FFI_DLL_EXPORT int __tvm_ffi_nothing(void* handle, const TVMFFIAny* args, int32_t num_args,
                                         TVMFFIAny* result) {
  (void)handle, (void)args, (void)num_args;
  result->type_index = kTVMFFINone;
  return 0;
}
