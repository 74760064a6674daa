/*
 * capi_errors.c -- the C API exercised from C, through tvm/ffi/c_api.h alone: raising, moving, creating and chaining errors, and backtraces.
 */
#include "capi_test_util.h"

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

/* A safe call that raises from C. */
static int raise_in_callee(void* self, const TVMFFIAny* args, int32_t num_args,
                           TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)num_args;
  (void)result;
  TVMFFIErrorSetRaisedFromCStr("ValueError", "raised in the callee");
  return -1;
}

/* The foreign caller: its frame lies beyond TVMFFIFunctionCall, where backtraces end. (Not
 * static and never inlined, so that the backtrace could name it if it reached it.) */
__attribute__((noinline)) int host_calls_across_the_boundary(TVMFFIObjectHandle func) {
  TVMFFIAny result;
  memset(&result, 0, sizeof(result));
  result.type_index = kTVMFFINone;
  int status = TVMFFIFunctionCall(func, NULL, 0, &result);
  __asm__ volatile("" ::: "memory"); /* the call returns here: this frame is on the stack */
  return status;
}

int test_function_call_bounds_backtraces(char* msg_buf, size_t n) {
  clear_error();
  TVMFFIObjectHandle func = NULL;
  CHECK(TVMFFIFunctionCreate(NULL, raise_in_callee, NULL, &func) == 0, "create failed");
  CHECK(host_calls_across_the_boundary(func) == -1, "the call did not fail");
  TVMFFIObjectHandle err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  CHECK(err != NULL, "nothing was raised");
  TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(err);
  TVMFFIByteArray nothing = bytes_of("");
  cell->update_backtrace(err, &nothing, kTVMFFIBacktraceUpdateModeAppend);
  /* The frames up to the boundary (the raising callee) are there, the caller's are not: an
   * optimized build must not turn TVMFFIFunctionCall into a jump to the callee. */
  CHECK(strstr(cell->backtrace.data, "raise_in_callee") != NULL,
        "the backtrace does not name the raising callee: \"%.*s\"", (int)cell->backtrace.size,
        cell->backtrace.data);
  CHECK(strstr(cell->backtrace.data, "host_calls_across_the_boundary") == NULL,
        "the backtrace goes past TVMFFIFunctionCall: \"%.*s\"", (int)cell->backtrace.size,
        cell->backtrace.data);
  TVMFFIObjectDecRef(err);
  TVMFFIObjectDecRef(func);
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
