// Calls of the runtime's global functions from the C++ half: each function is looked up once
// and kept for the life of the process (never released, so exit order does not matter).
#ifndef TVM_FFI_CXX_RUNTIME_CALLS_H_
#define TVM_FFI_CXX_RUNTIME_CALLS_H_

#include <tvm/ffi/function.h>

namespace tvm::ffi::details {

/*! \brief The global function `name` (an AttributeError if none is registered). */
inline const Function& Global(const char* name) {
  return *new Function(Function::GetGlobalRequired(name));
}

}  // namespace tvm::ffi::details

/*! \brief The global function `name`, looked up on first use by this call site. */
#define TVM_FFI_CXX_GLOBAL(name)                                                  \
  ([]() -> const ::tvm::ffi::Function& {                                         \
    static const ::tvm::ffi::Function& f = ::tvm::ffi::details::Global(name);    \
    return f;                                                                    \
  }())

#endif  // TVM_FFI_CXX_RUNTIME_CALLS_H_
