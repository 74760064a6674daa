/*
 * capi_functions.c -- the C API exercised from C, through tvm/ffi/c_api.h alone: functions made in C, global functions and the runtime's own globals.
 */
#include "capi_test_util.h"

/* ------------------------------------------------------------------------------------------ */
/* Functions                                                                                   */
/* ------------------------------------------------------------------------------------------ */

static _Thread_local void* g_last_handle;

/* Declared in capi_test_util.h (capi_errors.c raises through it too). */
int add_one(void* handle, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
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
