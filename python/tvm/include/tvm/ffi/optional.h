/*
 * tvm/ffi/optional.h -- Optional<T>: a value or nothing, in the two layouts of the C++ ABI.
 *
 *   - T an object reference (Function, Array, Module, ...): one object pointer, NULL for none.
 *   - any other T (String, Bytes, int, ...): a TVMFFIAny, kTVMFFINone for none.
 *
 * These are the layouts C++ libraries built against Apache TVM FFI use for the same class names,
 * so Optional values returned by their virtual functions (ModuleObj::GetFunction, ...) and passed
 * to the exported functions (json::Stringify's indent) read the same on both sides.
 */
#ifndef TVM_FFI_OPTIONAL_H_
#define TVM_FFI_OPTIONAL_H_

#include <tvm/ffi/any.h>

#include <optional>
#include <type_traits>
#include <utility>

namespace tvm::ffi {

/*! \brief A value of T or none, stored as an owning TVMFFIAny (None is none). */
template <typename T, typename = void>
class Optional {
 public:
  Optional() noexcept = default;
  Optional(std::nullopt_t) noexcept {}                 // NOLINT(runtime/explicit)
  Optional(T value) : data_(std::move(value)) {}       // NOLINT(runtime/explicit)

  bool has_value() const noexcept { return !data_.is_none(); }
  explicit operator bool() const noexcept { return has_value(); }
  /*! \brief The value; a RuntimeError when there is none. */
  T value() const {
    if (!has_value()) TVM_FFI_THROW(RuntimeError) << "Optional has no value";
    return data_.template cast<T>();
  }
  /*! \brief The value, or `fallback` when there is none. */
  T value_or(T fallback) const { return has_value() ? value() : std::move(fallback); }
  /*! \brief The stored value (None when there is none). */
  const Any& any() const noexcept { return data_; }

 private:
  Any data_;
};

/*! \brief An object reference or none, stored as the reference itself (NULL is none). */
template <typename T>
class Optional<T, std::enable_if_t<std::is_base_of_v<ObjectRef, T>>> {
 public:
  Optional() noexcept = default;
  Optional(std::nullopt_t) noexcept {}                 // NOLINT(runtime/explicit)
  Optional(T value) noexcept : data_(std::move(value)) {}  // NOLINT(runtime/explicit)

  bool has_value() const noexcept { return data_.defined(); }
  explicit operator bool() const noexcept { return has_value(); }
  /*! \brief The reference; a RuntimeError when there is none. */
  const T& value() const {
    if (!has_value()) TVM_FFI_THROW(RuntimeError) << "Optional has no value";
    return data_;
  }
  /*! \brief The reference, or `fallback` when there is none. */
  T value_or(T fallback) const { return has_value() ? data_ : std::move(fallback); }

 private:
  T data_;
};

static_assert(sizeof(Optional<String>) == sizeof(TVMFFIAny), "Optional<String> is a TVMFFIAny");
static_assert(sizeof(Optional<ObjectRef>) == sizeof(void*), "Optional<ObjectRef> is a pointer");

}  // namespace tvm::ffi

#endif  // TVM_FFI_OPTIONAL_H_
