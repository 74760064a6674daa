/*
 * tvm/ffi/structural.h -- structural equality and hashing of values, and the access paths of an
 * error raised while visiting a value (the runtime's `ffi.StructuralEqual`, `ffi.StructuralHash`,
 * `ffi.GetFirstStructuralMismatch` and `ffi.VisitErrorContext.FindAccessPaths`).
 *
 * The functions are defined in libtvm_ffi.so under the names C++ libraries built against Apache
 * TVM FFI link. Failures are thrown as tvm::ffi::Error.
 */
#ifndef TVM_FFI_STRUCTURAL_H_
#define TVM_FFI_STRUCTURAL_H_

#include <tvm/ffi/any.h>
#include <tvm/ffi/container.h>
#include <tvm/ffi/optional.h>

#include <cstdint>

namespace tvm::ffi {

/*! \brief Structural equality: values equal field by field, variables matched by definition. */
class StructuralEqual {
 public:
  /*! \brief Whether `lhs` and `rhs` are structurally equal. */
  TVM_FFI_DLL static bool Equal(const Any& lhs, const Any& rhs, bool map_free_vars = false,
                                bool skip_tensor_content = false);
  /*!
   * \brief The access paths (a pair, left then right) of the first difference, or none when the
   *  values are equal.
   */
  TVM_FFI_DLL static Optional<ObjectRef> GetFirstMismatch(const Any& lhs, const Any& rhs,
                                                          bool map_free_vars = false,
                                                          bool skip_tensor_content = false);
};

/*! \brief The hash that agrees with StructuralEqual. */
class StructuralHash {
 public:
  TVM_FFI_DLL static uint64_t Hash(const Any& value, bool map_free_vars = false,
                                   bool skip_tensor_content = false);
};

/*! \brief The record of where a structural visit failed (an ffi.VisitErrorContext object). */
class VisitErrorContext : public ObjectRef {
 public:
  VisitErrorContext() noexcept = default;
  explicit VisitErrorContext(ObjectRef ref) noexcept : ObjectRef(std::move(ref)) {}

  /*! \brief The access paths from `root` that the context's visit pattern matches. */
  TVM_FFI_DLL static Array FindAccessPaths(const ObjectRef& root,
                                           const VisitErrorContext& visit_context,
                                           bool allow_prefix_match = false);
};

}  // namespace tvm::ffi

#endif  // TVM_FFI_STRUCTURAL_H_
