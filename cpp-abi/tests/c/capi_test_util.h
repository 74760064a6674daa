/*
 * capi_test_util.h -- helpers shared by the C API tests (capi_*.c): value constructors, the
 * error slot, and the CHECK macros.
 *
 * Each test_xxx(msg_buf, n) returns 0 on success, or 1 after writing what went wrong (and the
 * file and line) into msg_buf. Tests run on several threads at once (one Rust #[test] each):
 * they use their own global names and type keys, and thread-local state only. A failing test
 * may leak the objects it made; that is fine for a test process.
 */
#ifndef TVM_FFI_CAPI_TEST_UTIL_H_
#define TVM_FFI_CAPI_TEST_UTIL_H_

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/ffi/c_api.h>

#include "abi_tests.h"

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                     */
/* ------------------------------------------------------------------------------------------ */

__attribute__((format(printf, 5, 6))) static inline int fail_at(char* msg_buf, size_t n,
                                                                const char* file, int line,
                                                                const char* fmt, ...) {
  const char* base = strrchr(file, '/');
  int used = snprintf(msg_buf, n, "%s:%d: ", base == NULL ? file : base + 1, line);
  if (used < 0 || (size_t)used >= n) return 1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg_buf + used, n - (size_t)used, fmt, ap);
  va_end(ap);
  return 1;
}

/* Fails the current test (which must have msg_buf and n in scope) unless cond holds. */
#define CHECK(cond, ...)                                                        \
  do {                                                                          \
    if (!(cond)) return fail_at(msg_buf, n, __FILE__, __LINE__, __VA_ARGS__);   \
  } while (0)

static inline TVMFFIByteArray bytes_of(const char* text) {
  TVMFFIByteArray array;
  array.data = text;
  array.size = strlen(text);
  return array;
}

static inline TVMFFIAny none_value(void) {
  TVMFFIAny value;
  memset(&value, 0, sizeof(value));
  value.type_index = kTVMFFINone;
  return value;
}

static inline TVMFFIAny int_value(int64_t v) {
  TVMFFIAny value = none_value();
  value.type_index = kTVMFFIInt;
  value.v_int64 = v;
  return value;
}

static inline TVMFFIAny float_value(double v) {
  TVMFFIAny value = none_value();
  value.type_index = kTVMFFIFloat;
  value.v_float64 = v;
  return value;
}

static inline TVMFFIAny object_value(TVMFFIObjectHandle obj) {
  TVMFFIAny value = none_value();
  value.type_index = TVMFFIObjectGetTypeIndex(obj);
  value.v_obj = (TVMFFIObject*)obj;
  return value;
}

/* Releases an owning value and resets it to None. */
static inline void release_any(TVMFFIAny* value) {
  if (value->type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(value->v_obj);
  *value = none_value();
}

static inline uint64_t ref_count_of(TVMFFIObjectHandle obj) {
  return __atomic_load_n(&((TVMFFIObject*)obj)->combined_ref_count, __ATOMIC_ACQUIRE);
}

static inline uint32_t strong_count_of(TVMFFIObjectHandle obj) {
  return (uint32_t)(ref_count_of(obj) & 0xFFFFFFFFu);
}

/* The content of a string or bytes value (small or heap); 0 if it is neither. */
static inline int any_content(const TVMFFIAny* value, const char** data, size_t* size) {
  switch (value->type_index) {
    case kTVMFFISmallStr:
    case kTVMFFISmallBytes:
      *data = value->v_bytes;
      *size = value->small_str_len;
      return 1;
    case kTVMFFIStr:
    case kTVMFFIBytes: {
      const TVMFFIByteArray* array = TVMFFIBytesGetByteArrayPtr(value->v_obj);
      *data = array->data;
      *size = array->size;
      return 1;
    }
    default:
      return 0;
  }
}

static inline int any_has_text(const TVMFFIAny* value, const char* text) {
  const char* data;
  size_t size;
  if (!any_content(value, &data, &size)) return 0;
  return size == strlen(text) && memcmp(data, text, size) == 0;
}

static inline int byte_array_equals(const TVMFFIByteArray* array, const char* text) {
  return array->size == strlen(text) && memcmp(array->data, text, array->size) == 0;
}

static inline void copy_text(char* dst, size_t dst_size, const TVMFFIByteArray* src) {
  size_t len = src->size < dst_size - 1 ? src->size : dst_size - 1;
  if (len > 0) memcpy(dst, src->data, len);
  dst[len] = '\0';
}

/* The error taken out of the thread's slot, copied. */
typedef struct {
  int present;
  char kind[64];
  char message[512];
  int message_nul_terminated;
} ErrorInfo;

static inline ErrorInfo take_error(void) {
  ErrorInfo info;
  memset(&info, 0, sizeof(info));
  TVMFFIObjectHandle err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  if (err == NULL) return info;
  const TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(err);
  info.present = 1;
  copy_text(info.kind, sizeof(info.kind), &cell->kind);
  copy_text(info.message, sizeof(info.message), &cell->message);
  info.message_nul_terminated = cell->message.data[cell->message.size] == '\0';
  TVMFFIObjectDecRef(err);
  return info;
}

/* Whether `haystack` contains `needle`; a NULL needle matches anything. */
static inline int mentions(const char* haystack, const char* needle) {
  return needle == NULL || strstr(haystack, needle) != NULL;
}

/* Empties the thread's error slot (a stale error from an earlier test on this thread). */
static inline void clear_error(void) { (void)take_error(); }

/* Takes the raised error and checks its kind and that its message contains `needle`. */
#define CHECK_RAISED(kind_, needle_)                                                          \
  do {                                                                                        \
    ErrorInfo e_ = take_error();                                                              \
    CHECK(e_.present, "expected a raised %s, but the error slot is empty", (kind_));          \
    CHECK(strcmp(e_.kind, (kind_)) == 0, "expected error kind %s, got %s: %s", (kind_),      \
          e_.kind, e_.message);                                                               \
    CHECK(mentions(e_.message, (needle_)), "error message %s does not mention %s",            \
          e_.message, (needle_) == NULL ? "" : (const char*)(needle_));                     \
  } while (0)

/* Looks up a global function (owned) and fails the test if it is missing. */
#define GET_GLOBAL(var_, name_)                                                     \
  TVMFFIObjectHandle var_ = NULL;                                                   \
  do {                                                                              \
    TVMFFIByteArray name_bytes_ = bytes_of(name_);                                  \
    CHECK(TVMFFIFunctionGetGlobal(&name_bytes_, &var_) == 0,                        \
          "TVMFFIFunctionGetGlobal(%s) failed", (name_));                          \
    CHECK(var_ != NULL, "global function %s is not registered", (name_));           \
  } while (0)

/* A function body (capi_functions.c) returning its one int argument plus one; a TypeError for
 * anything else. */
int add_one(void* handle, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result);

#endif  // TVM_FFI_CAPI_TEST_UTIL_H_
