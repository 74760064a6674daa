// Structural equality and hashing and the access paths of visit errors (tvm/ffi/structural.h),
// through the runtime's global functions.
#include <tvm/ffi/structural.h>

#include "runtime_calls.h"

namespace tvm::ffi {

bool StructuralEqual::Equal(const Any& lhs, const Any& rhs, bool map_free_vars,
                            bool skip_tensor_content) {
  return TVM_FFI_CXX_GLOBAL("ffi.StructuralEqual")(lhs, rhs, map_free_vars, skip_tensor_content)
      .cast<bool>();
}

Optional<ObjectRef> StructuralEqual::GetFirstMismatch(const Any& lhs, const Any& rhs,
                                                      bool map_free_vars,
                                                      bool skip_tensor_content) {
  Any paths = TVM_FFI_CXX_GLOBAL("ffi.GetFirstStructuralMismatch")(lhs, rhs, map_free_vars,
                                                                    skip_tensor_content);
  if (paths.is_none()) return std::nullopt;
  return paths.cast<ObjectRef>();
}

uint64_t StructuralHash::Hash(const Any& value, bool map_free_vars, bool skip_tensor_content) {
  return static_cast<uint64_t>(
      TVM_FFI_CXX_GLOBAL("ffi.StructuralHash")(value, map_free_vars, skip_tensor_content)
          .cast<int64_t>());
}

Array VisitErrorContext::FindAccessPaths(const ObjectRef& root,
                                         const VisitErrorContext& visit_context,
                                         bool allow_prefix_match) {
  return TVM_FFI_CXX_GLOBAL("ffi.VisitErrorContext.FindAccessPaths")(
             root, static_cast<const ObjectRef&>(visit_context), allow_prefix_match)
      .cast<Array>();
}

}  // namespace tvm::ffi
