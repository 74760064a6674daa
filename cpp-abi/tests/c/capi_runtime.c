/*
 * capi_runtime.c -- the C API exercised from C, through tvm/ffi/c_api.h alone: data types, containers, the type table, init-once handles, the environment and opaque objects.
 */
#include "capi_test_util.h"

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
