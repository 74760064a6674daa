/*
 * capi_values.c -- the C API exercised from C, through tvm/ffi/c_api.h alone: the version, reference counts, strings, bytes and values.
 */
#include "capi_test_util.h"

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
