/*
 * capi_tests.c -- the C API exercised from C, through tvm/ffi/c_api.h alone.
 *
 * Each test_xxx(msg_buf, n) returns 0 on success, or 1 after writing what went wrong (and the
 * line) into msg_buf. Tests run on several threads at once (one Rust #[test] each): they use
 * their own global names and type keys, and thread-local state only.
 *
 * A failing test may leak the objects it made; that is fine for a test process.
 */
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

__attribute__((format(printf, 4, 5))) static int fail_at(char* msg_buf, size_t n, int line,
                                                         const char* fmt, ...) {
  int used = snprintf(msg_buf, n, "capi_tests.c:%d: ", line);
  if (used < 0 || (size_t)used >= n) return 1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg_buf + used, n - (size_t)used, fmt, ap);
  va_end(ap);
  return 1;
}

/* Fails the current test (which must have msg_buf and n in scope) unless cond holds. */
#define CHECK(cond, ...)                                          \
  do {                                                            \
    if (!(cond)) return fail_at(msg_buf, n, __LINE__, __VA_ARGS__); \
  } while (0)

static TVMFFIByteArray bytes_of(const char* text) {
  TVMFFIByteArray array;
  array.data = text;
  array.size = strlen(text);
  return array;
}

static TVMFFIAny none_value(void) {
  TVMFFIAny value;
  memset(&value, 0, sizeof(value));
  value.type_index = kTVMFFINone;
  return value;
}

static TVMFFIAny int_value(int64_t v) {
  TVMFFIAny value = none_value();
  value.type_index = kTVMFFIInt;
  value.v_int64 = v;
  return value;
}

static TVMFFIAny float_value(double v) {
  TVMFFIAny value = none_value();
  value.type_index = kTVMFFIFloat;
  value.v_float64 = v;
  return value;
}

static TVMFFIAny object_value(TVMFFIObjectHandle obj) {
  TVMFFIAny value = none_value();
  value.type_index = TVMFFIObjectGetTypeIndex(obj);
  value.v_obj = (TVMFFIObject*)obj;
  return value;
}

/* Releases an owning value and resets it to None. */
static void release_any(TVMFFIAny* value) {
  if (value->type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(value->v_obj);
  *value = none_value();
}

static uint64_t ref_count_of(TVMFFIObjectHandle obj) {
  return __atomic_load_n(&((TVMFFIObject*)obj)->combined_ref_count, __ATOMIC_ACQUIRE);
}

static uint32_t strong_count_of(TVMFFIObjectHandle obj) {
  return (uint32_t)(ref_count_of(obj) & 0xFFFFFFFFu);
}

/* The content of a string or bytes value (small or heap); 0 if it is neither. */
static int any_content(const TVMFFIAny* value, const char** data, size_t* size) {
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

static int any_has_text(const TVMFFIAny* value, const char* text) {
  const char* data;
  size_t size;
  if (!any_content(value, &data, &size)) return 0;
  return size == strlen(text) && memcmp(data, text, size) == 0;
}

static int byte_array_equals(const TVMFFIByteArray* array, const char* text) {
  return array->size == strlen(text) && memcmp(array->data, text, array->size) == 0;
}

static void copy_text(char* dst, size_t dst_size, const TVMFFIByteArray* src) {
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

static ErrorInfo take_error(void) {
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
static int mentions(const char* haystack, const char* needle) {
  return needle == NULL || strstr(haystack, needle) != NULL;
}

/* Empties the thread's error slot (a stale error from an earlier test on this thread). */
static void clear_error(void) { (void)take_error(); }

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

/* ------------------------------------------------------------------------------------------ */
/* Version                                                                                     */
/* ------------------------------------------------------------------------------------------ */

int test_version(char* msg_buf, size_t n) {
  TVMFFIVersion version;
  memset(&version, 0xAB, sizeof(version));
  TVMFFIGetVersion(&version);
  CHECK(version.major == TVM_FFI_VERSION_MAJOR && version.minor == TVM_FFI_VERSION_MINOR &&
            version.patch == TVM_FFI_VERSION_PATCH,
        "runtime version %u.%u.%u, header %d.%d.%d", version.major, version.minor, version.patch,
        TVM_FFI_VERSION_MAJOR, TVM_FFI_VERSION_MINOR, TVM_FFI_VERSION_PATCH);
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Reference counting                                                                          */
/* ------------------------------------------------------------------------------------------ */

int test_refcount_string(char* msg_buf, size_t n) {
  clear_error();
  const char* text = "twenty bytes of text"; /* 20 bytes: a heap ffi.String */
  TVMFFIByteArray input = bytes_of(text);
  CHECK(input.size == 20, "test text is %zu bytes", input.size);
  TVMFFIAny value = none_value();
  CHECK(TVMFFIStringFromByteArray(&input, &value) == 0, "TVMFFIStringFromByteArray failed");
  CHECK(value.type_index == kTVMFFIStr, "20-byte string has type index %d", value.type_index);
  TVMFFIObject* obj = value.v_obj;
  CHECK(obj != NULL, "heap string with a NULL object");
  CHECK(TVMFFIObjectGetTypeIndex(obj) == kTVMFFIStr, "header type index %d",
        TVMFFIObjectGetTypeIndex(obj));
  CHECK(obj->__padding == 0, "header padding is %u", obj->__padding);
  CHECK(obj->deleter != NULL, "a runtime object without deleter");
  CHECK(ref_count_of(obj) == kTVMFFIObjectBothOne, "new object count %#llx",
        (unsigned long long)ref_count_of(obj));

  CHECK(TVMFFIObjectIncRef(obj) == 0, "IncRef failed");
  CHECK(ref_count_of(obj) == kTVMFFIObjectBothOne + kTVMFFIObjectStrongOne,
        "count after IncRef %#llx", (unsigned long long)ref_count_of(obj));
  CHECK(TVMFFIObjectDecRef(obj) == 0, "DecRef failed");
  CHECK(ref_count_of(obj) == kTVMFFIObjectBothOne, "count after DecRef %#llx",
        (unsigned long long)ref_count_of(obj));
  CHECK(TVMFFIObjectDecRef(NULL) == 0, "DecRef(NULL) did not return 0");
  CHECK(TVMFFIObjectDecRef(obj) == 0, "final DecRef failed");
  return 0;
}

/* An object type defined here, in C: the runtime must honour its deleter protocol. */
typedef struct {
  TVMFFIObject header;
  int* strong_calls;
  int* weak_calls;
  int* both_calls;
} CountedObject;

static void counted_deleter(void* self, int flags) {
  CountedObject* obj = (CountedObject*)self;
  if (flags == kTVMFFIObjectDeleterFlagBitMaskBoth) {
    ++*obj->both_calls;
    free(obj);
  } else if (flags == kTVMFFIObjectDeleterFlagBitMaskStrong) {
    ++*obj->strong_calls;
  } else if (flags == kTVMFFIObjectDeleterFlagBitMaskWeak) {
    ++*obj->weak_calls;
    free(obj);
  }
}

static CountedObject* new_counted(int32_t type_index, uint64_t count, int* strong, int* weak,
                                  int* both) {
  CountedObject* obj = (CountedObject*)calloc(1, sizeof(CountedObject));
  if (obj == NULL) return NULL;
  obj->header.combined_ref_count = count;
  obj->header.type_index = type_index;
  obj->header.deleter = counted_deleter;
  obj->strong_calls = strong;
  obj->weak_calls = weak;
  obj->both_calls = both;
  return obj;
}

int test_refcount_foreign_object(char* msg_buf, size_t n) {
  clear_error();
  TVMFFIByteArray key = bytes_of("abitest.Counted");
  int32_t type_index = TVMFFITypeGetOrAllocIndex(&key, -1, 1, 0, 1, kTVMFFIObject);
  CHECK(type_index >= kTVMFFIDynObjectBegin, "abitest.Counted got index %d", type_index);

  /* Strong and weak counts reach zero together: one deleter call with Both. */
  int strong = 0, weak = 0, both = 0;
  CountedObject* obj = new_counted(type_index, kTVMFFIObjectBothOne, &strong, &weak, &both);
  CHECK(obj != NULL, "out of memory");
  CHECK(TVMFFIObjectIncRef(obj) == 0, "IncRef failed");
  CHECK(ref_count_of(obj) == kTVMFFIObjectBothOne + 1, "count after IncRef %#llx",
        (unsigned long long)ref_count_of(obj));
  CHECK(TVMFFIObjectDecRef(obj) == 0, "DecRef failed");
  CHECK(strong == 0 && weak == 0 && both == 0, "deleter ran while a reference was left");
  CHECK(ref_count_of(obj) == kTVMFFIObjectBothOne, "count after DecRef %#llx",
        (unsigned long long)ref_count_of(obj));
  CHECK(TVMFFIObjectDecRef(obj) == 0, "last DecRef failed");
  CHECK(both == 1 && strong == 0 && weak == 0,
        "last DecRef: deleter calls strong=%d weak=%d both=%d, expected one Both", strong, weak,
        both);

  /* A weak reference outlives the last strong one: Strong now, Weak when the weak one goes. */
  strong = weak = both = 0;
  obj = new_counted(type_index, kTVMFFIObjectStrongOne + 2 * kTVMFFIObjectWeakOne, &strong, &weak,
                    &both);
  CHECK(obj != NULL, "out of memory");
  CHECK(TVMFFIObjectDecRef(obj) == 0, "DecRef failed");
  CHECK(strong == 1 && weak == 0 && both == 0,
        "strong count to 0 with a weak ref left: deleter calls strong=%d weak=%d both=%d", strong,
        weak, both);
  CHECK(ref_count_of(obj) == kTVMFFIObjectWeakOne, "count after the strong count died: %#llx",
        (unsigned long long)ref_count_of(obj));
  /* Drop the weak reference the way inline C++ code does. */
  uint64_t old = __atomic_fetch_sub(&obj->header.combined_ref_count, kTVMFFIObjectWeakOne,
                                    __ATOMIC_ACQ_REL);
  if (old == kTVMFFIObjectWeakOne) obj->header.deleter(obj, kTVMFFIObjectDeleterFlagBitMaskWeak);
  CHECK(weak == 1, "weak deleter calls %d", weak);
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Strings and bytes                                                                           */
/* ------------------------------------------------------------------------------------------ */

int test_small_string(char* msg_buf, size_t n) {
  clear_error();
  static const char* const texts[] = {"", "a", "hello", "1234567"};
  size_t i;
  for (i = 0; i < sizeof(texts) / sizeof(texts[0]); ++i) {
    TVMFFIByteArray input = bytes_of(texts[i]);
    TVMFFIAny value;
    memset(&value, 0xAB, sizeof(value)); /* the runtime must write every byte */
    CHECK(TVMFFIStringFromByteArray(&input, &value) == 0, "StringFromByteArray(\"%s\") failed",
          texts[i]);
    CHECK(value.type_index == kTVMFFISmallStr, "\"%s\": type index %d, expected SmallStr",
          texts[i], value.type_index);
    CHECK(value.small_str_len == input.size, "\"%s\": small_str_len %u", texts[i],
          value.small_str_len);
    char expected[8];
    memset(expected, 0, sizeof(expected));
    memcpy(expected, texts[i], input.size);
    CHECK(memcmp(value.v_bytes, expected, 8) == 0, "\"%s\": payload not the text + zero tail",
          texts[i]);
    TVMFFIByteArray content = TVMFFISmallBytesGetContentByteArray(&value);
    CHECK(content.data == value.v_bytes && content.size == input.size,
          "TVMFFISmallBytesGetContentByteArray view is wrong");
    release_any(&value);
  }
  return 0;
}

int test_heap_string(char* msg_buf, size_t n) {
  clear_error();
  static const char* const texts[] = {"12345678", "a string that is longer than seven bytes"};
  size_t i;
  for (i = 0; i < sizeof(texts) / sizeof(texts[0]); ++i) {
    TVMFFIByteArray input = bytes_of(texts[i]);
    TVMFFIAny value;
    memset(&value, 0xAB, sizeof(value));
    CHECK(TVMFFIStringFromByteArray(&input, &value) == 0, "StringFromByteArray(\"%s\") failed",
          texts[i]);
    CHECK(value.type_index == kTVMFFIStr, "\"%s\": type index %d, expected Str", texts[i],
          value.type_index);
    CHECK(value.zero_padding == 0, "\"%s\": zero_padding %u", texts[i], value.zero_padding);
    CHECK(TVMFFIObjectGetTypeIndex(value.v_obj) == kTVMFFIStr, "header type index %d",
          TVMFFIObjectGetTypeIndex(value.v_obj));
    const TVMFFIByteArray* stored = TVMFFIBytesGetByteArrayPtr(value.v_obj);
    CHECK(stored->size == input.size, "\"%s\": stored size %zu", texts[i], stored->size);
    CHECK(stored->data != input.data, "the string was not copied");
    CHECK(memcmp(stored->data, texts[i], input.size) == 0, "\"%s\": content differs", texts[i]);
    CHECK(stored->data[stored->size] == '\0', "\"%s\": no NUL after the content", texts[i]);
    release_any(&value);
  }
  return 0;
}

int test_bytes(char* msg_buf, size_t n) {
  clear_error();
  /* Small: 3 bytes with an embedded NUL. */
  static const char small[3] = {'a', '\0', 'b'};
  TVMFFIByteArray input;
  input.data = small;
  input.size = sizeof(small);
  TVMFFIAny value;
  memset(&value, 0xAB, sizeof(value));
  CHECK(TVMFFIBytesFromByteArray(&input, &value) == 0, "BytesFromByteArray(3 bytes) failed");
  CHECK(value.type_index == kTVMFFISmallBytes, "3 bytes: type index %d", value.type_index);
  CHECK(value.small_str_len == 3, "3 bytes: small_str_len %u", value.small_str_len);
  char expected[8] = {'a', '\0', 'b', 0, 0, 0, 0, 0};
  CHECK(memcmp(value.v_bytes, expected, 8) == 0, "3 bytes: payload not content + zero tail");
  release_any(&value);

  /* Heap: 8 bytes with embedded NULs. */
  static const char big[8] = {'\0', '1', '\0', '3', '4', '5', '6', '7'};
  input.data = big;
  input.size = sizeof(big);
  memset(&value, 0xAB, sizeof(value));
  CHECK(TVMFFIBytesFromByteArray(&input, &value) == 0, "BytesFromByteArray(8 bytes) failed");
  CHECK(value.type_index == kTVMFFIBytes, "8 bytes: type index %d", value.type_index);
  CHECK(value.zero_padding == 0, "8 bytes: zero_padding %u", value.zero_padding);
  const TVMFFIByteArray* stored = TVMFFIBytesGetByteArrayPtr(value.v_obj);
  CHECK(stored->size == 8 && memcmp(stored->data, big, 8) == 0, "8 bytes: content differs");
  CHECK(stored->data[8] == '\0', "8 bytes: no NUL after the content");
  release_any(&value);
  return 0;
}

int test_any_view_to_owned(char* msg_buf, size_t n) {
  clear_error();
  TVMFFIAny view = none_value();
  TVMFFIAny owned = none_value();

  /* A raw C string becomes a string value (small or heap by length). */
  view.type_index = kTVMFFIRawStr;
  view.v_c_str = "tiny";
  CHECK(TVMFFIAnyViewToOwnedAny(&view, &owned) == 0, "RawStr \"tiny\" failed");
  CHECK(owned.type_index == kTVMFFISmallStr && any_has_text(&owned, "tiny"),
        "RawStr \"tiny\" became type %d", owned.type_index);
  release_any(&owned);
  view.v_c_str = "a raw C string longer than seven bytes";
  CHECK(TVMFFIAnyViewToOwnedAny(&view, &owned) == 0, "long RawStr failed");
  CHECK(owned.type_index == kTVMFFIStr && any_has_text(&owned, view.v_c_str),
        "long RawStr became type %d", owned.type_index);

  /* An object gains a reference. */
  TVMFFIObjectHandle str_obj = owned.v_obj;
  TVMFFIAny obj_view = object_value(str_obj);
  TVMFFIAny obj_owned = none_value();
  CHECK(TVMFFIAnyViewToOwnedAny(&obj_view, &obj_owned) == 0, "object view failed");
  CHECK(obj_owned.v_obj == (TVMFFIObject*)str_obj && strong_count_of(str_obj) == 2,
        "object view: same object with strong count 2 expected, got count %u",
        strong_count_of(str_obj));
  release_any(&obj_owned);

  /* An rvalue reference moves the object out of its slot. */
  TVMFFIObjectHandle slot = str_obj; /* moves our reference */
  owned = none_value();
  view = none_value();
  view.type_index = kTVMFFIObjectRValueRef;
  view.v_ptr = &slot;
  CHECK(TVMFFIAnyViewToOwnedAny(&view, &owned) == 0, "ObjectRValueRef failed");
  CHECK(slot == NULL, "ObjectRValueRef: the slot was not cleared");
  CHECK(owned.type_index == kTVMFFIStr && owned.v_obj == (TVMFFIObject*)str_obj,
        "ObjectRValueRef: got type %d", owned.type_index);
  CHECK(strong_count_of(str_obj) == 1, "ObjectRValueRef: strong count %u (expected a move)",
        strong_count_of(str_obj));
  release_any(&owned);
  CHECK(TVMFFIAnyViewToOwnedAny(&view, &owned) != 0, "moving from an empty slot succeeded");
  ErrorInfo e = take_error();
  CHECK(e.present, "moving from an empty slot failed without an error");

  /* Plain values are copied bit for bit. */
  view = int_value(-5);
  CHECK(TVMFFIAnyViewToOwnedAny(&view, &owned) == 0, "Int failed");
  CHECK(memcmp(&view, &owned, sizeof(view)) == 0, "Int was not copied bit for bit");
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Functions                                                                                   */
/* ------------------------------------------------------------------------------------------ */

static _Thread_local void* g_last_handle;

static int add_one(void* handle, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  g_last_handle = handle;
  if (num_args != 1 || args[0].type_index != kTVMFFIInt) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "add_one expects one int");
    return -1;
  }
  *result = int_value(args[0].v_int64 + 1);
  return 0;
}

static int add_two(void* handle, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  g_last_handle = handle;
  if (num_args != 1 || args[0].type_index != kTVMFFIInt) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "add_two expects one int");
    return -1;
  }
  *result = int_value(args[0].v_int64 + 2);
  return 0;
}

typedef struct {
  int64_t addend;
  int calls;
  int deleted;
} AdderState;

static int add_state(void* handle, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  AdderState* state = (AdderState*)handle;
  g_last_handle = handle;
  state->calls++;
  if (num_args != 1 || args[0].type_index != kTVMFFIInt) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "add_state expects one int");
    return -1;
  }
  *result = int_value(args[0].v_int64 + state->addend);
  return 0;
}

static void delete_state(void* self) { ((AdderState*)self)->deleted++; }

/* Calls `func` with one int; stores the int result in *out. Returns the call's rc, or 2 if the
 * result was not an int. */
static int call_int(TVMFFIObjectHandle func, int64_t arg, int64_t* out) {
  TVMFFIAny args[1];
  args[0] = int_value(arg);
  TVMFFIAny result = none_value();
  int rc = TVMFFIFunctionCall(func, args, 1, &result);
  if (rc != 0) return rc;
  if (result.type_index != kTVMFFIInt) {
    release_any(&result);
    return 2;
  }
  *out = result.v_int64;
  return 0;
}

int test_function_null_self(char* msg_buf, size_t n) {
  clear_error();
  TVMFFIObjectHandle func = NULL;
  CHECK(TVMFFIFunctionCreate(NULL, add_one, NULL, &func) == 0, "TVMFFIFunctionCreate failed");
  CHECK(func != NULL, "no function object");
  CHECK(TVMFFIObjectGetTypeIndex(func) == kTVMFFIFunction, "type index %d",
        TVMFFIObjectGetTypeIndex(func));
  CHECK(ref_count_of(func) == kTVMFFIObjectBothOne, "new function count %#llx",
        (unsigned long long)ref_count_of(func));
  const TVMFFIFunctionCell* cell = TVMFFIFunctionGetCellPtr(func);
  CHECK(cell->cpp_call == NULL, "cpp_call must be NULL");
  CHECK(cell->safe_call == add_one, "with NULL self the cell must hold the callback itself");

  int64_t out = 0;
  g_last_handle = NULL;
  CHECK(call_int(func, 41, &out) == 0, "call failed");
  CHECK(out == 42, "add_one(41) = %lld", (long long)out);
  CHECK(g_last_handle == func, "handle %p, expected the function object %p", g_last_handle,
        func);

  /* Calling the cell directly behaves the same. */
  TVMFFIAny args[1];
  args[0] = int_value(1);
  TVMFFIAny result = none_value();
  CHECK(cell->safe_call(func, args, 1, &result) == 0 && result.v_int64 == 2,
        "direct safe_call failed");
  CHECK(TVMFFIObjectDecRef(func) == 0, "DecRef failed");
  return 0;
}

int test_function_self_deleter(char* msg_buf, size_t n) {
  clear_error();
  AdderState state;
  state.addend = 100;
  state.calls = 0;
  state.deleted = 0;
  TVMFFIObjectHandle func = NULL;
  CHECK(TVMFFIFunctionCreate(&state, add_state, delete_state, &func) == 0,
        "TVMFFIFunctionCreate failed");
  CHECK(TVMFFIObjectGetTypeIndex(func) == kTVMFFIFunction, "type index %d",
        TVMFFIObjectGetTypeIndex(func));
  CHECK(TVMFFIFunctionGetCellPtr(func)->cpp_call == NULL, "cpp_call must be NULL");

  int64_t out = 0;
  g_last_handle = NULL;
  CHECK(call_int(func, 1, &out) == 0, "call failed");
  CHECK(out == 101 && state.calls == 1, "add_state(1) = %lld after %d calls", (long long)out,
        state.calls);
  CHECK(g_last_handle == &state, "handle %p, expected self %p", g_last_handle, (void*)&state);

  CHECK(TVMFFIObjectIncRef(func) == 0, "IncRef failed");
  CHECK(TVMFFIObjectDecRef(func) == 0, "DecRef failed");
  CHECK(state.deleted == 0, "deleter ran while a reference was left");
  CHECK(TVMFFIObjectDecRef(func) == 0, "last DecRef failed");
  CHECK(state.deleted == 1, "deleter ran %d times, expected once", state.deleted);
  return 0;
}

int test_global_function(char* msg_buf, size_t n) {
  clear_error();
  TVMFFIByteArray name = bytes_of("abitest.global.add");
  TVMFFIObjectHandle f1 = NULL, f2 = NULL, got = NULL;
  CHECK(TVMFFIFunctionCreate(NULL, add_one, NULL, &f1) == 0, "create f1 failed");
  CHECK(TVMFFIFunctionCreate(NULL, add_two, NULL, &f2) == 0, "create f2 failed");

  CHECK(TVMFFIFunctionSetGlobal(&name, f1, 0) == 0, "first registration failed");
  CHECK(strong_count_of(f1) == 2, "the table should hold one reference; strong count %u",
        strong_count_of(f1));
  CHECK(TVMFFIFunctionSetGlobal(&name, f2, 0) == -1,
        "second registration without override did not return -1");
  CHECK_RAISED("RuntimeError", "abitest.global.add");
  CHECK(TVMFFIFunctionSetGlobal(&name, f2, 1) == 0, "registration with override failed");

  CHECK(TVMFFIFunctionGetGlobal(&name, &got) == 0, "TVMFFIFunctionGetGlobal failed");
  CHECK(got == f2, "got %p, expected the overriding function %p", got, f2);
  CHECK(strong_count_of(f2) == 3, "mine + table + returned: strong count %u, expected 3",
        strong_count_of(f2));
  int64_t out = 0;
  CHECK(call_int(got, 40, &out) == 0 && out == 42, "global add(40) = %lld", (long long)out);
  CHECK(TVMFFIObjectDecRef(got) == 0, "DecRef failed");
  CHECK(strong_count_of(f2) == 2, "strong count after releasing the lookup %u",
        strong_count_of(f2));

  TVMFFIByteArray absent = bytes_of("abitest.global.no_such_function");
  got = (TVMFFIObjectHandle)&name; /* must be overwritten */
  CHECK(TVMFFIFunctionGetGlobal(&absent, &got) == 0, "lookup of an absent name did not return 0");
  CHECK(got == NULL, "lookup of an absent name did not produce NULL");
  /* A name that is not UTF-8 names no function: absent as well. */
  TVMFFIByteArray not_utf8 = {"\xff\xfe", 2};
  got = (TVMFFIObjectHandle)&name;
  CHECK(TVMFFIFunctionGetGlobal(&not_utf8, &got) == 0 && got == NULL,
        "a name that is not UTF-8 was not treated as absent");

  TVMFFIObjectDecRef(f1);
  TVMFFIObjectDecRef(f2);
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Errors                                                                                      */
/* ------------------------------------------------------------------------------------------ */

int test_error_raise_and_move(char* msg_buf, size_t n) {
  clear_error();
  TVMFFIErrorSetRaisedFromCStr("ValueError", "bad thing");
  TVMFFIObjectHandle err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  CHECK(err != NULL, "nothing was raised");
  CHECK(TVMFFIObjectGetTypeIndex(err) == kTVMFFIError, "type index %d",
        TVMFFIObjectGetTypeIndex(err));
  CHECK(ref_count_of(err) == kTVMFFIObjectBothOne, "moved error count %#llx",
        (unsigned long long)ref_count_of(err));
  const TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(err);
  CHECK(byte_array_equals(&cell->kind, "ValueError"), "kind %.*s", (int)cell->kind.size,
        cell->kind.data);
  CHECK(byte_array_equals(&cell->message, "bad thing"), "message %.*s", (int)cell->message.size,
        cell->message.data);
  CHECK(cell->message.data[cell->message.size] == '\0', "message not NUL-terminated");
  CHECK(cell->update_backtrace != NULL, "update_backtrace is NULL");
  TVMFFIObjectDecRef(err);

  TVMFFIObjectHandle again = (TVMFFIObjectHandle)&err;
  TVMFFIErrorMoveFromRaised(&again);
  CHECK(again == NULL, "the slot was not cleared by the move");

  const char* parts[3] = {"first, ", NULL, "second"};
  TVMFFIErrorSetRaisedFromCStrParts("TypeError", parts, 3);
  ErrorInfo e = take_error();
  CHECK(e.present && strcmp(e.kind, "TypeError") == 0, "parts: kind %s", e.kind);
  CHECK(strcmp(e.message, "first, second") == 0, "parts: message \"%s\"", e.message);
  return 0;
}

int test_error_create_and_set_raised(char* msg_buf, size_t n) {
  clear_error();
  TVMFFIByteArray kind = bytes_of("KeyError");
  TVMFFIByteArray message = bytes_of("no such key");
  TVMFFIByteArray backtrace = bytes_of("  File \"abi.c\", line 1, in test\n");
  TVMFFIObjectHandle err = NULL;
  CHECK(TVMFFIErrorCreate(&kind, &message, &backtrace, &err) == 0, "TVMFFIErrorCreate failed");
  CHECK(TVMFFIObjectGetTypeIndex(err) == kTVMFFIError, "type index %d",
        TVMFFIObjectGetTypeIndex(err));
  const TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(err);
  CHECK(byte_array_equals(&cell->kind, "KeyError") &&
            byte_array_equals(&cell->message, "no such key") &&
            byte_array_equals(&cell->backtrace, "  File \"abi.c\", line 1, in test\n"),
        "created error has the wrong content");
  CHECK(cell->kind.data != kind.data && cell->message.data != message.data,
        "the error must copy its strings");
  CHECK(cell->cause_chain == NULL && cell->extra_context == NULL,
        "cause/extra context should be NULL");

  /* SetRaised borrows: the slot takes its own reference. */
  TVMFFIErrorSetRaised(err);
  CHECK(strong_count_of(err) == 2, "after SetRaised strong count %u, expected 2",
        strong_count_of(err));
  /* A second SetRaised replaces the first and releases it. */
  TVMFFIObjectHandle other = NULL;
  CHECK(TVMFFIErrorCreate(&kind, &message, &backtrace, &other) == 0, "second create failed");
  TVMFFIErrorSetRaised(other);
  CHECK(strong_count_of(err) == 1, "replaced error still held: strong count %u",
        strong_count_of(err));
  TVMFFIObjectHandle moved = NULL;
  TVMFFIErrorMoveFromRaised(&moved);
  CHECK(moved == other, "moved %p, expected the last raised %p", moved, other);
  CHECK(strong_count_of(other) == 2, "mine + moved: strong count %u", strong_count_of(other));
  TVMFFIObjectDecRef(moved);
  TVMFFIObjectDecRef(other);
  TVMFFIObjectDecRef(err);
  return 0;
}

int test_error_update_backtrace(char* msg_buf, size_t n) {
  clear_error();
  TVMFFIByteArray kind = bytes_of("RuntimeError");
  TVMFFIByteArray message = bytes_of("m");
  TVMFFIByteArray backtrace = bytes_of("one\n");
  TVMFFIObjectHandle err = NULL;
  CHECK(TVMFFIErrorCreate(&kind, &message, &backtrace, &err) == 0, "TVMFFIErrorCreate failed");
  TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(err);
  CHECK(cell->update_backtrace != NULL, "update_backtrace is NULL");

  TVMFFIByteArray more = bytes_of("two\n");
  cell->update_backtrace(err, &more, kTVMFFIBacktraceUpdateModeAppend);
  CHECK(byte_array_equals(&cell->backtrace, "one\ntwo\n"), "after Append: \"%.*s\"",
        (int)cell->backtrace.size, cell->backtrace.data);

  TVMFFIByteArray fresh = bytes_of("three\n");
  cell->update_backtrace(err, &fresh, kTVMFFIBacktraceUpdateModeReplace);
  CHECK(byte_array_equals(&cell->backtrace, "three\n"), "after Replace: \"%.*s\"",
        (int)cell->backtrace.size, cell->backtrace.data);
  CHECK(cell->backtrace.data != fresh.data, "the backtrace must be copied");
  TVMFFIObjectDecRef(err);
  return 0;
}

int test_error_backtrace_on_request(char* msg_buf, size_t n) {
  clear_error();
  TVMFFIErrorSetRaisedFromCStr("ValueError", "asked for later");
  TVMFFIObjectHandle err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  CHECK(err != NULL, "nothing was raised");
  TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(err);
  /* The raise recorded frames only: the text is made when somebody asks for it. */
  CHECK(cell->backtrace.size == 0, "backtrace made at raise time: \"%.*s\"",
        (int)cell->backtrace.size, cell->backtrace.data);
  CHECK(cell->backtrace.data != NULL && cell->backtrace.data[0] == '\0',
        "an empty backtrace is still a NUL-terminated string");
  TVMFFIByteArray nothing = bytes_of("");
  cell->update_backtrace(err, &nothing, kTVMFFIBacktraceUpdateModeAppend);
  CHECK(cell->backtrace.size > 0, "asking made no backtrace");
  CHECK(cell->backtrace.data[cell->backtrace.size] == '\0', "backtrace not NUL-terminated");
  CHECK(strstr(cell->backtrace.data, "test_error_backtrace_on_request") != NULL,
        "the backtrace does not name the raising function: \"%.*s\"",
        (int)cell->backtrace.size, cell->backtrace.data);
  /* Asking again changes nothing. */
  const char* text = cell->backtrace.data;
  size_t size = cell->backtrace.size;
  cell->update_backtrace(err, &nothing, kTVMFFIBacktraceUpdateModeAppend);
  CHECK(cell->backtrace.data == text && cell->backtrace.size == size,
        "a second request rewrote the backtrace");
  TVMFFIObjectDecRef(err);

  /* A replacement drops the recorded frames unread. */
  TVMFFIErrorSetRaisedFromCStr("ValueError", "replaced");
  TVMFFIErrorMoveFromRaised(&err);
  cell = TVMFFIErrorGetCellPtr(err);
  TVMFFIByteArray mine = bytes_of("  File \"mine.c\", line 3, in mine\n");
  cell->update_backtrace(err, &mine, kTVMFFIBacktraceUpdateModeReplace);
  CHECK(byte_array_equals(&cell->backtrace, "  File \"mine.c\", line 3, in mine\n"),
        "after Replace: \"%.*s\"", (int)cell->backtrace.size, cell->backtrace.data);
  TVMFFIObjectDecRef(err);
  return 0;
}

int test_error_cause_chain(char* msg_buf, size_t n) {
  clear_error();
  TVMFFIByteArray empty = bytes_of("");
  TVMFFIByteArray cause_kind = bytes_of("IndexError");
  TVMFFIByteArray cause_msg = bytes_of("index 9 out of range");
  TVMFFIObjectHandle cause = NULL;
  CHECK(TVMFFIErrorCreate(&cause_kind, &cause_msg, &empty, &cause) == 0, "create cause failed");

  TVMFFIByteArray extra_text = bytes_of("extra context, as a heap string");
  TVMFFIAny extra = none_value();
  CHECK(TVMFFIStringFromByteArray(&extra_text, &extra) == 0 && extra.type_index == kTVMFFIStr,
        "making the extra context failed");

  TVMFFIByteArray kind = bytes_of("RuntimeError");
  TVMFFIByteArray message = bytes_of("wrapper");
  TVMFFIObjectHandle err = NULL;
  CHECK(TVMFFIErrorCreateWithCauseAndExtraContext(&kind, &message, &empty, cause, extra.v_obj,
                                                  &err) == 0,
        "TVMFFIErrorCreateWithCauseAndExtraContext failed");
  const TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(err);
  CHECK(cell->cause_chain == cause, "cause_chain %p, expected %p", cell->cause_chain, cause);
  CHECK(cell->extra_context == (TVMFFIObjectHandle)extra.v_obj, "extra_context is wrong");
  CHECK(strong_count_of(cause) == 2 && strong_count_of(extra.v_obj) == 2,
        "cause/extra must be retained by the new error (counts %u, %u)", strong_count_of(cause),
        strong_count_of(extra.v_obj));
  const TVMFFIErrorCell* cause_cell = TVMFFIErrorGetCellPtr(cell->cause_chain);
  CHECK(byte_array_equals(&cause_cell->kind, "IndexError"), "cause kind is wrong");

  TVMFFIObjectDecRef(err);
  CHECK(strong_count_of(cause) == 1 && strong_count_of(extra.v_obj) == 1,
        "destroying the error must release cause/extra (counts %u, %u)", strong_count_of(cause),
        strong_count_of(extra.v_obj));

  /* NULL cause and extra context are allowed. */
  CHECK(TVMFFIErrorCreateWithCauseAndExtraContext(&kind, &message, &empty, NULL, NULL, &err) == 0,
        "create without cause failed");
  CHECK(TVMFFIErrorGetCellPtr(err)->cause_chain == NULL, "cause should be NULL");
  TVMFFIObjectDecRef(err);
  TVMFFIObjectDecRef(cause);
  release_any(&extra);
  return 0;
}

static int raise_index_error(void* handle, const TVMFFIAny* args, int32_t num_args,
                             TVMFFIAny* result) {
  (void)handle;
  (void)args;
  (void)num_args;
  (void)result;
  TVMFFIErrorSetRaisedFromCStr("IndexError", "index out of range, raised in C");
  return -1;
}

int test_error_propagates_from_callee(char* msg_buf, size_t n) {
  clear_error();
  TVMFFIObjectHandle func = NULL;
  CHECK(TVMFFIFunctionCreate(NULL, raise_index_error, NULL, &func) == 0, "create failed");
  TVMFFIAny args[1];
  args[0] = int_value(1);
  TVMFFIAny result = none_value();
  CHECK(TVMFFIFunctionCall(func, args, 1, &result) == -1, "a failing callee did not give -1");
  CHECK(result.type_index < kTVMFFIStaticObjectBegin, "failed call left an object in result");
  CHECK_RAISED("IndexError", "raised in C");

  /* Through the global table too, with a callee that checks its arguments. */
  TVMFFIByteArray name = bytes_of("abitest.errors.add_one");
  TVMFFIObjectHandle adder = NULL;
  CHECK(TVMFFIFunctionCreate(NULL, add_one, NULL, &adder) == 0, "create failed");
  CHECK(TVMFFIFunctionSetGlobal(&name, adder, 1) == 0, "SetGlobal failed");
  GET_GLOBAL(global, "abitest.errors.add_one");
  args[0] = float_value(1.5);
  result = none_value();
  CHECK(TVMFFIFunctionCall(global, args, 1, &result) == -1, "bad argument did not give -1");
  CHECK_RAISED("TypeError", "expects one int");
  TVMFFIObjectDecRef(global);
  TVMFFIObjectDecRef(adder);
  TVMFFIObjectDecRef(func);
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Data types                                                                                  */
/* ------------------------------------------------------------------------------------------ */

int test_dtype(char* msg_buf, size_t n) {
  clear_error();
  static const struct {
    const char* text;
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
  } cases[] = {
      {"float32x4", kDLFloat, 32, 4}, {"float32", kDLFloat, 32, 1}, {"int8", kDLInt, 8, 1},
      {"uint1", kDLUInt, 1, 1},       {"bool", kDLBool, 8, 1},      {"bfloat16", kDLBfloat, 16, 1},
      {"handle", kDLOpaqueHandle, 64, 1},
  };
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    TVMFFIByteArray text = bytes_of(cases[i].text);
    DLDataType dtype;
    memset(&dtype, 0xAB, sizeof(dtype));
    CHECK(TVMFFIDataTypeFromString(&text, &dtype) == 0, "parsing %s failed", cases[i].text);
    CHECK(dtype.code == cases[i].code && dtype.bits == cases[i].bits &&
              dtype.lanes == cases[i].lanes,
          "%s parsed as (%u, %u, %u)", cases[i].text, dtype.code, dtype.bits, dtype.lanes);

    TVMFFIAny str = none_value();
    CHECK(TVMFFIDataTypeToString(&dtype, &str) == 0, "formatting %s failed", cases[i].text);
    CHECK(any_has_text(&str, cases[i].text), "%s formatted as a different string (type %d)",
          cases[i].text, str.type_index);
    release_any(&str);
  }

  TVMFFIByteArray bad = bytes_of("notadtype99");
  DLDataType dtype;
  CHECK(TVMFFIDataTypeFromString(&bad, &dtype) == -1, "a bad dtype string did not give -1");
  CHECK_RAISED("ValueError", "notadtype99");
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Containers                                                                                  */
/* ------------------------------------------------------------------------------------------ */

int test_array(char* msg_buf, size_t n) {
  clear_error();
  GET_GLOBAL(make_array, "ffi.Array");

  TVMFFIAny args[3];
  args[0] = int_value(7);
  args[1] = none_value();
  args[1].type_index = kTVMFFISmallStr;
  args[1].small_str_len = 3;
  memcpy(args[1].v_bytes, "abc", 3);
  args[2] = float_value(2.5);
  TVMFFIAny result = none_value();
  CHECK(TVMFFIFunctionCall(make_array, args, 3, &result) == 0, "ffi.Array(7, \"abc\", 2.5) failed");
  CHECK(result.type_index == kTVMFFIArray, "ffi.Array returned type index %d", result.type_index);
  TVMFFIObject* array = result.v_obj;
  CHECK(TVMFFIObjectGetTypeIndex(array) == kTVMFFIArray, "header type index %d",
        TVMFFIObjectGetTypeIndex(array));
  const TVMFFISeqCell* seq = (const TVMFFISeqCell*)((char*)array + sizeof(TVMFFIObject));
  CHECK(seq->size == 3, "array size %lld", (long long)seq->size);
  CHECK(seq->capacity >= 3, "array capacity %lld", (long long)seq->capacity);
  CHECK(seq->data == (void*)((char*)array + 56), "Array elements must be inline at obj + 56");
  CHECK(seq->data_deleter == NULL, "inline Array elements need no data_deleter");
  const TVMFFIAny* items = (const TVMFFIAny*)seq->data;
  CHECK(items[0].type_index == kTVMFFIInt && items[0].v_int64 == 7, "item 0: type %d",
        items[0].type_index);
  CHECK(items[1].type_index == kTVMFFISmallStr && any_has_text(&items[1], "abc"),
        "item 1: type %d", items[1].type_index);
  CHECK(items[2].type_index == kTVMFFIFloat && items[2].v_float64 == 2.5, "item 2: type %d",
        items[2].type_index);
  release_any(&result);

  /* Borrowed argument forms become owned elements. */
  TVMFFIAny raw[1];
  raw[0] = none_value();
  raw[0].type_index = kTVMFFIRawStr;
  raw[0].v_c_str = "a raw string becomes an ffi.String";
  result = none_value();
  CHECK(TVMFFIFunctionCall(make_array, raw, 1, &result) == 0, "ffi.Array(raw string) failed");
  CHECK(result.type_index == kTVMFFIArray, "type index %d", result.type_index);
  seq = (const TVMFFISeqCell*)((char*)result.v_obj + sizeof(TVMFFIObject));
  items = (const TVMFFIAny*)seq->data;
  CHECK(seq->size == 1 && items[0].type_index == kTVMFFIStr &&
            any_has_text(&items[0], raw[0].v_c_str),
        "a raw string element became type %d", items[0].type_index);
  release_any(&result);

  TVMFFIObjectDecRef(make_array);
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Type table                                                                                  */
/* ------------------------------------------------------------------------------------------ */

int test_type_table(char* msg_buf, size_t n) {
  clear_error();
  TVMFFIByteArray str_key = bytes_of("ffi.String");
  int32_t index = -100;
  CHECK(TVMFFITypeKeyToIndex(&str_key, &index) == 0, "TVMFFITypeKeyToIndex(ffi.String) failed");
  CHECK(index == kTVMFFIStr, "ffi.String has index %d", index);

  TVMFFIByteArray unknown = bytes_of("abitest.NoSuchType");
  CHECK(TVMFFITypeKeyToIndex(&unknown, &index) == -1, "an unknown key did not give -1");
  CHECK_RAISED("KeyError", "abitest.NoSuchType");
  TVMFFIByteArray not_utf8 = {"\xff", 1};
  CHECK(TVMFFITypeKeyToIndex(&not_utf8, &index) == -1, "a key that is not UTF-8 did not give -1");
  CHECK_RAISED("KeyError", "Cannot find type");

  const TVMFFITypeInfo* info = TVMFFIGetTypeInfo(kTVMFFIStr);
  CHECK(info != NULL, "TVMFFIGetTypeInfo(65) is NULL");
  CHECK(info->type_index == kTVMFFIStr, "info index %d", info->type_index);
  CHECK(byte_array_equals(&info->type_key, "ffi.String"), "info key %.*s",
        (int)info->type_key.size, info->type_key.data);
  CHECK(info->type_depth == 1, "ffi.String depth %d", info->type_depth);
  CHECK(info->type_ancestors != NULL && info->type_ancestors[0] != NULL &&
            info->type_ancestors[0]->type_index == kTVMFFIObject,
        "ffi.String's ancestor 0 is not ffi.Object");
  CHECK(TVMFFIGetTypeInfo(kTVMFFIStr) == info, "type info pointers must be stable");

  const TVMFFITypeInfo* root = TVMFFIGetTypeInfo(kTVMFFIObject);
  CHECK(root != NULL && root->type_depth == 0 && byte_array_equals(&root->type_key, "ffi.Object"),
        "ffi.Object entry is wrong");

  CHECK(TVMFFIGetTypeInfo(1000000) == NULL, "an unknown index did not give NULL");
  CHECK_RAISED("KeyError", NULL);

  /* A new type, allocated at run time. */
  TVMFFIByteArray node_key = bytes_of("abitest.Node");
  int32_t node = TVMFFITypeGetOrAllocIndex(&node_key, -1, 1, 0, 1, kTVMFFIObject);
  CHECK(node >= kTVMFFIDynObjectBegin, "abitest.Node got index %d", node);
  CHECK(TVMFFITypeGetOrAllocIndex(&node_key, -1, 1, 0, 1, kTVMFFIObject) == node,
        "a second registration gave another index");
  CHECK(TVMFFITypeKeyToIndex(&node_key, &index) == 0 && index == node,
        "abitest.Node is not found by key");
  info = TVMFFIGetTypeInfo(node);
  CHECK(info != NULL && info->type_index == node && info->type_depth == 1 &&
            byte_array_equals(&info->type_key, "abitest.Node") &&
            info->type_ancestors[0]->type_index == kTVMFFIObject,
        "abitest.Node's entry is wrong");

  /* Query only (parent -2): no registration. */
  TVMFFIByteArray query_key = bytes_of("abitest.QueryOnly");
  CHECK(TVMFFITypeGetOrAllocIndex(&query_key, -1, 1, 0, 1, -2) == -2,
        "query-only lookup of an unknown key did not give -2");
  CHECK(TVMFFITypeKeyToIndex(&query_key, &index) == -1, "query-only lookup registered the key");
  clear_error();

  /* Failures return -1 with an error; they never end the process. */
  TVMFFIByteArray orphan_key = bytes_of("abitest.Orphan");
  CHECK(TVMFFITypeGetOrAllocIndex(&orphan_key, -1, 1, 0, 1, 999999) == -1,
        "an unknown parent did not give -1");
  ErrorInfo e = take_error();
  CHECK(e.present, "an unknown parent gave -1 without an error");
  TVMFFIByteArray deep_key = bytes_of("abitest.WrongDepth");
  CHECK(TVMFFITypeGetOrAllocIndex(&deep_key, -1, 5, 0, 1, kTVMFFIObject) == -1,
        "a wrong depth did not give -1");
  e = take_error();
  CHECK(e.present, "a wrong depth gave -1 without an error");
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Globals provided by the runtime                                                             */
/* ------------------------------------------------------------------------------------------ */

int test_echo(char* msg_buf, size_t n) {
  clear_error();
  GET_GLOBAL(echo, "testing.echo");

  TVMFFIAny args[1];
  args[0] = int_value(1234567890123LL);
  TVMFFIAny result = none_value();
  CHECK(TVMFFIFunctionCall(echo, args, 1, &result) == 0, "testing.echo(int) failed");
  CHECK(result.type_index == kTVMFFIInt && result.v_int64 == 1234567890123LL,
        "testing.echo(int) returned type %d value %lld", result.type_index,
        (long long)result.v_int64);

  /* An object comes back as the same object, with a reference for the result. */
  TVMFFIByteArray text = bytes_of("an object travels through echo");
  TVMFFIAny str = none_value();
  CHECK(TVMFFIStringFromByteArray(&text, &str) == 0, "making a string failed");
  args[0] = str;
  result = none_value();
  CHECK(TVMFFIFunctionCall(echo, args, 1, &result) == 0, "testing.echo(str) failed");
  CHECK(result.type_index == kTVMFFIStr && result.v_obj == str.v_obj,
        "testing.echo(str) returned type %d", result.type_index);
  CHECK(strong_count_of(str.v_obj) == 2, "echo result must own a reference; strong count %u",
        strong_count_of(str.v_obj));
  release_any(&result);
  CHECK(strong_count_of(str.v_obj) == 1, "strong count %u after releasing the result",
        strong_count_of(str.v_obj));
  release_any(&str);
  TVMFFIObjectDecRef(echo);
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Handle init-once and environment                                                            */
/* ------------------------------------------------------------------------------------------ */

static _Thread_local int g_init_calls;
static _Thread_local int g_deinit_calls;
static int g_sentinel;

static int init_sentinel(void** result) {
  g_init_calls++;
  *result = &g_sentinel;
  return 0;
}

static int init_null(void** result) {
  *result = NULL;
  return 0;
}

static int init_failing(void** result) {
  (void)result;
  TVMFFIErrorSetRaisedFromCStr("ValueError", "the init function refused");
  return -3;
}

static int deinit_sentinel(void* handle) {
  g_deinit_calls++;
  return handle == &g_sentinel ? 0 : 7;
}

int test_handle_init_once(char* msg_buf, size_t n) {
  clear_error();
  void* handle = NULL;
  g_init_calls = 0;
  g_deinit_calls = 0;
  CHECK(TVMFFIHandleInitOnce(&handle, init_sentinel) == 0, "first init failed");
  CHECK(handle == &g_sentinel && g_init_calls == 1, "first init: handle %p, %d calls", handle,
        g_init_calls);
  CHECK(TVMFFIHandleInitOnce(&handle, init_sentinel) == 0, "second init failed");
  CHECK(g_init_calls == 1, "init ran again (%d calls)", g_init_calls);

  void* other = NULL;
  CHECK(TVMFFIHandleInitOnce(&other, init_null) == -1, "an init producing NULL did not give -1");
  CHECK_RAISED("RuntimeError", NULL);
  /* The init function's own code comes back, with its error. */
  CHECK(TVMFFIHandleInitOnce(&other, init_failing) == -3, "the init function's code was not kept");
  CHECK_RAISED("ValueError", "the init function refused");
  CHECK(other == NULL, "a failed init stored a handle");

  CHECK(TVMFFIHandleDeinitOnce(&handle, deinit_sentinel) == 0, "deinit failed");
  CHECK(handle == NULL && g_deinit_calls == 1, "deinit: handle %p, %d calls", handle,
        g_deinit_calls);
  CHECK(TVMFFIHandleDeinitOnce(&handle, deinit_sentinel) == 0, "second deinit failed");
  CHECK(g_deinit_calls == 1, "deinit ran on a NULL handle");
  return 0;
}

int test_env_stream(char* msg_buf, size_t n) {
  clear_error();
  TVMFFIStreamHandle original = (TVMFFIStreamHandle)&original;
  TVMFFIStreamHandle stream = (TVMFFIStreamHandle)(uintptr_t)0x1234;
  CHECK(TVMFFIEnvGetStream(kDLCUDA, 7) == NULL, "a stream never set is not NULL");
  CHECK(TVMFFIEnvSetStream(kDLCUDA, 7, stream, &original) == 0, "TVMFFIEnvSetStream failed");
  CHECK(original == NULL, "the previous stream should be NULL");
  CHECK(TVMFFIEnvGetStream(kDLCUDA, 7) == stream, "the stream was not stored");
  CHECK(TVMFFIEnvGetStream(kDLCUDA, 6) == NULL, "another device id sees the stream");
  CHECK(TVMFFIEnvSetStream(kDLCUDA, 7, NULL, &original) == 0, "resetting the stream failed");
  CHECK(original == stream, "the previous stream was not reported");
  CHECK(TVMFFIEnvGetStream(kDLCUDA, 7) == NULL, "the stream was not reset");
  CHECK(TVMFFIEnvSetStream(kDLCUDA, 7, NULL, NULL) == 0, "a NULL opt_out must be accepted");
  return 0;
}

static int g_opaque_released = 0;

static void release_opaque(void* handle) {
  g_opaque_released += handle == &g_opaque_released;
}

int test_opaque_object(char* msg_buf, size_t n) {
  clear_error();
  TVMFFIObjectHandle obj = NULL;
  CHECK(TVMFFIObjectCreateOpaque(&g_opaque_released, kTVMFFIOpaquePyObject, release_opaque, &obj) ==
            0,
        "TVMFFIObjectCreateOpaque failed");
  CHECK(TVMFFIObjectGetTypeIndex(obj) == kTVMFFIOpaquePyObject, "opaque object of type %d",
        TVMFFIObjectGetTypeIndex(obj));
  CHECK(TVMFFIObjectDecRef(obj) == 0 && g_opaque_released == 1,
        "the handle was released %d times", g_opaque_released);
  /* Any other type index is refused with the error the header names. */
  obj = NULL;
  CHECK(TVMFFIObjectCreateOpaque(&g_opaque_released, kTVMFFIStr, release_opaque, &obj) == -1,
        "an opaque object of type index kTVMFFIStr was created");
  CHECK_RAISED("RuntimeError", "opaque objects must have type index");
  CHECK(obj == NULL && g_opaque_released == 1, "a refused object was written or released");
  return 0;
}
