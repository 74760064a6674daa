/* Registers the global function "good_backend.native_answer" when the library is loaded. */
#include <tvm/ffi/c_api.h>

static int answer(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  (void)self, (void)args, (void)num_args;
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = 42;
  return 0;
}

__attribute__((constructor)) static void register_answer(void) {
  TVMFFIObjectHandle func = NULL;
  if (TVMFFIFunctionCreate(NULL, answer, NULL, &func) != 0) return;
  const char name[] = "good_backend.native_answer";
  TVMFFIByteArray key = {name, sizeof(name) - 1};
  TVMFFIFunctionSetGlobal(&key, func, 1);
  TVMFFIObjectDecRef(func);
}
