/* A test kernel library: exports, metadata, documentation and context symbols. */
#include <string.h>
#include <tvm/ffi/c_api.h>

TVM_FFI_DLL_EXPORT void* __tvm_ffi__library_ctx = NULL;
TVM_FFI_DLL_EXPORT void* test_context_symbol = NULL;

static int set_string(const char* text, TVMFFIAny* out) {
  TVMFFIByteArray bytes = {text, strlen(text)};
  return TVMFFIStringFromByteArray(&bytes, out);
}

TVM_FFI_DLL_EXPORT int __tvm_ffi_add_int(void* handle, const TVMFFIAny* args, int32_t num_args,
                                         TVMFFIAny* result) {
  (void)handle;
  if (num_args != 2 || args[0].type_index != kTVMFFIInt || args[1].type_index != kTVMFFIInt) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "add_int expects two ints");
    return -1;
  }
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = args[0].v_int64 + args[1].v_int64;
  return 0;
}

TVM_FFI_DLL_EXPORT int __tvm_ffi__metadata_add_int(void* handle, const TVMFFIAny* args,
                                                   int32_t num_args, TVMFFIAny* result) {
  (void)handle, (void)args, (void)num_args;
  return set_string("{\"type_schema\":\"{\\\"type\\\":\\\"ffi.Function\\\"}\"}", result);
}

TVM_FFI_DLL_EXPORT int __tvm_ffi__doc_add_int(void* handle, const TVMFFIAny* args,
                                              int32_t num_args, TVMFFIAny* result) {
  (void)handle, (void)args, (void)num_args;
  return set_string("Adds two ints.", result);
}

/* Returns the module cookie the loader wrote, and the context symbol, as opaque pointers. */
TVM_FFI_DLL_EXPORT int __tvm_ffi_context(void* handle, const TVMFFIAny* args, int32_t num_args,
                                         TVMFFIAny* result) {
  (void)handle, (void)num_args;
  void* value = args[0].v_int64 == 0 ? __tvm_ffi__library_ctx : test_context_symbol;
  result->type_index = value ? kTVMFFIOpaquePtr : kTVMFFINone;
  result->zero_padding = 0;
  result->v_ptr = value;
  return 0;
}

/* The text of a string argument in any of its forms, NUL-terminated (small ones in `buf`). */
static const char* text_arg(const TVMFFIAny* arg, char buf[8]) {
  switch (arg->type_index) {
    case kTVMFFIRawStr:
      return arg->v_c_str;
    case kTVMFFISmallStr:
      memcpy(buf, arg->v_bytes, 8);
      return buf;
    case kTVMFFIStr:
      return TVMFFIBytesGetByteArrayPtr(arg->v_obj)->data;
    default:
      return NULL;
  }
}

/* Calls a function found through the imports of this library's module (or the registry). */
TVM_FFI_DLL_EXPORT int __tvm_ffi_call_import(void* handle, const TVMFFIAny* args,
                                             int32_t num_args, TVMFFIAny* result) {
  (void)handle;
  char buf[8];
  const char* name = num_args > 0 ? text_arg(&args[0], buf) : NULL;
  if (name == NULL) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "call_import expects a function name first");
    return -1;
  }
  TVMFFIObjectHandle func = NULL;
  if (TVMFFIEnvModLookupFromImports(__tvm_ffi__library_ctx, name, &func) != 0) {
    return -1;
  }
  return TVMFFIFunctionCall(func, (TVMFFIAny*)(args + 1), num_args - 1, result);
}
