/*
 * abi_tests.h -- entry points of the C side of the ABI tests, called from tests/c_abi.rs.
 *
 * Each test_xxx returns 0 on success; on failure it returns non-zero and writes a NUL-terminated
 * message (with the C source line) into msg_buf[0 .. n).
 */
#ifndef TVM_FFI_ABI_TESTS_H_
#define TVM_FFI_ABI_TESTS_H_

#include <stddef.h>
#include <stdint.h>

/* One fact about the layout as the C compiler sees it, e.g. {"sizeof(TVMFFIAny)", 16}. */
typedef struct {
  const char* name;
  int64_t value;
} TvmFfiAbiLayoutEntry;

/* The whole table of layout facts; *out_count receives its length. */
const TvmFfiAbiLayoutEntry* tvm_ffi_abi_c_layout_table(size_t* out_count);
/* The value of one named fact, or INT64_MIN if the table has no such name. */
int64_t tvm_ffi_abi_c_layout(const char* name);

int test_version(char* msg_buf, size_t n);
int test_refcount_string(char* msg_buf, size_t n);
int test_refcount_foreign_object(char* msg_buf, size_t n);
int test_small_string(char* msg_buf, size_t n);
int test_heap_string(char* msg_buf, size_t n);
int test_bytes(char* msg_buf, size_t n);
int test_any_view_to_owned(char* msg_buf, size_t n);
int test_function_null_self(char* msg_buf, size_t n);
int test_function_self_deleter(char* msg_buf, size_t n);
int test_global_function(char* msg_buf, size_t n);
int test_error_raise_and_move(char* msg_buf, size_t n);
int test_error_create_and_set_raised(char* msg_buf, size_t n);
int test_error_update_backtrace(char* msg_buf, size_t n);
int test_error_backtrace_on_request(char* msg_buf, size_t n);
int test_function_call_bounds_backtraces(char* msg_buf, size_t n);
int test_error_cause_chain(char* msg_buf, size_t n);
int test_error_propagates_from_callee(char* msg_buf, size_t n);
int test_dtype(char* msg_buf, size_t n);
int test_array(char* msg_buf, size_t n);
int test_type_table(char* msg_buf, size_t n);
int test_echo(char* msg_buf, size_t n);
int test_handle_init_once(char* msg_buf, size_t n);
int test_env_stream(char* msg_buf, size_t n);
int test_opaque_object(char* msg_buf, size_t n);

#endif  // TVM_FFI_ABI_TESTS_H_
