// expect.h -- the assertions of the C++ test libraries: a failed one throws an Error of kind
// AssertionError naming the file and line, which the Rust runner reports.
#ifndef TVM_FFI_ABI_TESTS_EXPECT_H_
#define TVM_FFI_ABI_TESTS_EXPECT_H_

#include <tvm/ffi/error.h>

#define EXPECT(cond) TVM_FFI_CHECK(cond, AssertionError) << "(" << __FILE__ << ":" << __LINE__ << ") "
#define EXPECT_EQ(a, b)                                                             \
  TVM_FFI_CHECK((a) == (b), AssertionError) << "(" << __FILE__ << ":" << __LINE__ << ") `" \
                                            << (a) << "` != `" << (b) << "` "

// Runs `body` and returns the Error it throws; fails if it throws nothing.
template <typename Body>
tvm::ffi::Error ExpectError(int line, Body&& body) {
  try {
    body();
  } catch (const tvm::ffi::Error& err) {
    return err;
  }
  TVM_FFI_THROW(AssertionError) << "(line " << line << ") expected an error";
}

#endif  // TVM_FFI_ABI_TESTS_EXPECT_H_
