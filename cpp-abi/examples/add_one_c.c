/*
 * add_one_c.c -- a kernel library in plain C, built against cpp-abi/include alone:
 *
 *   gcc -std=c11 -O2 -shared -fPIC -I cpp-abi/include cpp-abi/examples/add_one_c.c \
 *       -o libadd_one_c.so
 *
 * It links against nothing: the TVMFFI* functions resolve, when the library is loaded, to the
 * runtime already in the process. Exported functions (safe-call convention, see c_api.h):
 *
 *   add_one(x: Tensor, y: Tensor) -> None    y[i] = x[i] + 1 for float32 CPU tensors of one shape
 *   concat(a: str, b: str) -> str            a + b
 *   sum_array(arr: Array of int) -> int      the sum of the elements
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/ffi/c_api.h>

/* ---- helpers --------------------------------------------------------------------------------- */

/* Raises an error of `kind` with a printf-style message and returns -1. */
static int raise_error(const char* kind, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int raise_error(const char* kind, const char* fmt, ...) {
  char message[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof(message), fmt, ap);
  va_end(ap);
  TVMFFIErrorSetRaisedFromCStr(kind, message);
  return -1;
}

/* The type key of a type index, for messages (print with "%.*s", (int)key.size, key.data). */
static TVMFFIByteArray type_key(int32_t type_index) {
  const TVMFFITypeInfo* info = TVMFFIGetTypeInfo(type_index);
  if (info == NULL) {
    TVMFFIObjectHandle err = NULL;
    TVMFFIErrorMoveFromRaised(&err); /* the lookup's KeyError: not this call's error */
    TVMFFIObjectDecRef(err);
    TVMFFIByteArray unknown = {"<unknown type>", 14};
    return unknown;
  }
  return info->type_key;
}

/* The DLTensor of a tensor argument: an ffi.Tensor object or a DLTensor*; NULL otherwise. */
static DLTensor* tensor_arg(const TVMFFIAny* arg) {
  if (arg->type_index == kTVMFFITensor) return TVMFFITensorGetDLTensorPtr(arg->v_obj);
  if (arg->type_index == kTVMFFIDLTensorPtr) return (DLTensor*)arg->v_ptr;
  return NULL;
}

/* Whether the tensor is compact row-major (extents of 1 and empty tensors are always fine). */
static int is_contiguous(const DLTensor* t) {
  int64_t expected = 1;
  if (t->strides == NULL) return 1;
  for (int32_t i = 0; i < t->ndim; ++i) {
    if (t->shape[i] == 0) return 1;
  }
  for (int32_t i = t->ndim - 1; i >= 0; --i) {
    if (t->shape[i] != 1 && t->strides[i] != expected) return 0;
    expected *= t->shape[i];
  }
  return 1;
}

/* Checks one argument of add_one; returns its DLTensor, or NULL with an error raised. */
static DLTensor* check_float32_cpu(const TVMFFIAny* arg, const char* name) {
  DLTensor* t = tensor_arg(arg);
  if (t == NULL) {
    TVMFFIByteArray key = type_key(arg->type_index);
    raise_error("TypeError", "add_one: argument %s must be a tensor, got %.*s", name, (int)key.size,
                key.data);
    return NULL;
  }
  if (t->dtype.code != kDLFloat || t->dtype.bits != 32 || t->dtype.lanes != 1) {
    raise_error("TypeError",
                "add_one: argument %s must be a float32 tensor, got dtype (code %d, bits %d, "
                "lanes %d)",
                name, t->dtype.code, t->dtype.bits, t->dtype.lanes);
    return NULL;
  }
  if (t->device.device_type != kDLCPU) {
    raise_error("TypeError", "add_one: argument %s must be on the CPU (device type %d), got %d",
                name, (int)kDLCPU, (int)t->device.device_type);
    return NULL;
  }
  if (!is_contiguous(t)) {
    raise_error("ValueError", "add_one: argument %s must be contiguous", name);
    return NULL;
  }
  return t;
}

static int check_num_args(const char* func, int32_t expected, int32_t got) {
  if (expected == got) return 0;
  return raise_error("TypeError", "%s expects %d arguments, got %d", func, (int)expected, (int)got);
}

/* A borrowed view of a string argument: small string, ffi.String or raw C string. */
static int string_arg(const TVMFFIAny* arg, const char* what, TVMFFIByteArray* out) {
  if (arg->type_index == kTVMFFISmallStr) {
    *out = TVMFFISmallBytesGetContentByteArray(arg);
  } else if (arg->type_index == kTVMFFIStr) {
    *out = *TVMFFIBytesGetByteArrayPtr(arg->v_obj);
  } else if (arg->type_index == kTVMFFIRawStr) {
    out->data = arg->v_c_str;
    out->size = strlen(arg->v_c_str);
  } else {
    TVMFFIByteArray key = type_key(arg->type_index);
    return raise_error("TypeError", "%s must be a string, got %.*s", what, (int)key.size, key.data);
  }
  return 0;
}

/* ---- exported functions ---------------------------------------------------------------------- */

TVM_FFI_DLL_EXPORT int __tvm_ffi_add_one(void* handle, const TVMFFIAny* args, int32_t num_args,
                                         TVMFFIAny* result) {
  (void)handle;
  (void)result; /* returns None: the caller already set it */
  if (check_num_args("add_one", 2, num_args) != 0) return -1;
  DLTensor* x = check_float32_cpu(&args[0], "x");
  if (x == NULL) return -1;
  DLTensor* y = check_float32_cpu(&args[1], "y");
  if (y == NULL) return -1;
  if (x->ndim != y->ndim) {
    return raise_error("ValueError", "add_one: x has %d dimensions but y has %d", (int)x->ndim,
                       (int)y->ndim);
  }
  int64_t n = 1;
  for (int32_t i = 0; i < x->ndim; ++i) {
    if (x->shape[i] != y->shape[i]) {
      return raise_error("ValueError",
                         "add_one: shapes differ in dimension %d: x has %lld, y has %lld", (int)i,
                         (long long)x->shape[i], (long long)y->shape[i]);
    }
    n *= x->shape[i];
  }
  const float* src = (const float*)((const char*)x->data + x->byte_offset);
  float* dst = (float*)((char*)y->data + y->byte_offset);
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i] + 1.0f;
  return 0;
}

TVM_FFI_DLL_EXPORT int __tvm_ffi_concat(void* handle, const TVMFFIAny* args, int32_t num_args,
                                        TVMFFIAny* result) {
  (void)handle;
  if (check_num_args("concat", 2, num_args) != 0) return -1;
  TVMFFIByteArray a, b;
  if (string_arg(&args[0], "concat: argument a", &a) != 0) return -1;
  if (string_arg(&args[1], "concat: argument b", &b) != 0) return -1;
  char small[64];
  char* joined = a.size + b.size <= sizeof(small) ? small : (char*)malloc(a.size + b.size);
  if (joined == NULL) return raise_error("MemoryError", "concat: out of memory");
  if (a.size != 0) memcpy(joined, a.data, a.size);
  if (b.size != 0) memcpy(joined + a.size, b.data, b.size);
  TVMFFIByteArray out = {joined, a.size + b.size};
  /* The runtime copies the bytes into a new string value (small or heap); it is the result. */
  int rc = TVMFFIStringFromByteArray(&out, result);
  if (joined != small) free(joined);
  return rc;
}

TVM_FFI_DLL_EXPORT int __tvm_ffi_sum_array(void* handle, const TVMFFIAny* args, int32_t num_args,
                                           TVMFFIAny* result) {
  (void)handle;
  if (check_num_args("sum_array", 1, num_args) != 0) return -1;
  if (args[0].type_index != kTVMFFIArray && args[0].type_index != kTVMFFIList) {
    TVMFFIByteArray key = type_key(args[0].type_index);
    return raise_error("TypeError", "sum_array: argument arr must be an array, got %.*s",
                       (int)key.size, key.data);
  }
  /* The sequence cell follows the object header; its elements are TVMFFIAny values. */
  const TVMFFISeqCell* cell =
      (const TVMFFISeqCell*)((const char*)args[0].v_obj + sizeof(TVMFFIObject));
  const TVMFFIAny* items = (const TVMFFIAny*)cell->data;
  int64_t sum = 0;
  for (int64_t i = 0; i < cell->size; ++i) {
    if (items[i].type_index != kTVMFFIInt && items[i].type_index != kTVMFFIBool) {
      TVMFFIByteArray key = type_key(items[i].type_index);
      return raise_error("TypeError", "sum_array: element %lld must be an int, got %.*s",
                         (long long)i, (int)key.size, key.data);
    }
    sum += items[i].v_int64;
  }
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = sum;
  return 0;
}
