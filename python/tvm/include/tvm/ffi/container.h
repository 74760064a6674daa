/*
 * tvm/ffi/container.h -- Array: an owning reference to an ffi.Array or ffi.List whose elements are
 * read inline through the TVMFFISeqCell at offset 24 (owning TVMFFIAny values; an Array keeps them
 * right after the cell, a List in a separate buffer). New arrays come from the global "ffi.Array".
 *
 *   Array a = Array::Make(1, "two", 3.0);
 *   for (AnyView item : a) total += item.cast<double>();
 */
#ifndef TVM_FFI_CONTAINER_H_
#define TVM_FFI_CONTAINER_H_

#include <tvm/ffi/any.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/object.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

namespace tvm::ffi {

/*! \brief An ffi.Array or ffi.List (read-only access), or null (size 0). */
class Array : public ObjectRef {
 public:
  /*! \brief Iterates the elements as borrowed views. */
  class iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = AnyView;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = AnyView;

    explicit iterator(const TVMFFIAny* pos) noexcept : pos_(pos) {}
    AnyView operator*() const noexcept { return AnyView::FromRaw(*pos_); }
    AnyView operator[](difference_type n) const noexcept { return AnyView::FromRaw(pos_[n]); }
    iterator& operator++() noexcept {
      ++pos_;
      return *this;
    }
    iterator operator++(int) noexcept { return iterator(pos_++); }
    iterator& operator--() noexcept {
      --pos_;
      return *this;
    }
    iterator operator+(difference_type n) const noexcept { return iterator(pos_ + n); }
    difference_type operator-(const iterator& other) const noexcept { return pos_ - other.pos_; }
    bool operator==(const iterator& other) const noexcept { return pos_ == other.pos_; }
    bool operator!=(const iterator& other) const noexcept { return pos_ != other.pos_; }

   private:
    const TVMFFIAny* pos_;
  };

  Array() noexcept = default;
  /*! \brief Wraps an ffi.Array or ffi.List; a TypeError for any other defined object. */
  explicit Array(ObjectRef ref) : ObjectRef(std::move(ref)) {
    if (defined() && !IsSeq(type_index())) {
      TVM_FFI_THROW(TypeError) << "Expected `ffi.Array` but got `"
                               << TypeIndexToUserTypeName(type_index()) << "`";
    }
  }

  /*! \brief A new ffi.Array of the converted values (through the global "ffi.Array"). */
  template <typename... Items>
  static Array Make(const Items&... items) {
    return Array(Function::GetGlobalRequired("ffi.Array")(items...).template cast<ObjectRef>());
  }
  /*! \brief A new ffi.Array holding the given values. */
  static Array FromValues(const std::vector<Any>& values) {
    std::vector<TVMFFIAny> views;
    views.reserve(values.size());
    for (const Any& value : values) views.push_back(value.raw());
    Any result = Function::GetGlobalRequired("ffi.Array")
                     .CallPacked(views.data(), static_cast<int32_t>(views.size()));
    return Array(result.cast<ObjectRef>());
  }

  /*! \brief Whether `type_index` is one of the two sequence types. */
  static bool IsSeq(int32_t type_index) noexcept {
    return type_index == kTVMFFIArray || type_index == kTVMFFIList;
  }

  /*! \brief Whether this is an ffi.List (shared, mutable) rather than an ffi.Array. */
  bool is_list() const noexcept { return type_index() == kTVMFFIList; }
  int64_t size() const noexcept { return defined() ? cell()->size : 0; }
  bool empty() const noexcept { return size() == 0; }
  /*! \brief Element `i` (unchecked), borrowed from the container. */
  AnyView operator[](int64_t i) const noexcept { return AnyView::FromRaw(items()[i]); }
  /*! \brief Element `i`; an IndexError if it is out of range. */
  AnyView at(int64_t i) const {
    if (i < 0 || i >= size()) {
      TVM_FFI_THROW(IndexError) << "index " << i << " out of range for an array of size " << size();
    }
    return (*this)[i];
  }
  iterator begin() const noexcept { return iterator(items()); }
  iterator end() const noexcept { return iterator(items() + size()); }

  /*! \brief All elements converted to T (a TypeError on the first that is not accepted). */
  template <typename T>
  std::vector<T> ToVector() const {
    std::vector<T> out;
    out.reserve(static_cast<size_t>(size()));
    for (AnyView item : *this) out.push_back(item.cast<T>());
    return out;
  }

 private:
  const TVMFFISeqCell* cell() const noexcept {
    return reinterpret_cast<const TVMFFISeqCell*>(reinterpret_cast<const char*>(get()) +
                                                  sizeof(TVMFFIObject));
  }
  const TVMFFIAny* items() const noexcept {
    return defined() ? static_cast<const TVMFFIAny*>(cell()->data) : nullptr;
  }
};

template <>
struct TypeTraits<Array> {
  static constexpr bool kEnabled = true;
  static constexpr const char* kTypeName = "ffi.Array";
  static void ToView(const Array& value, TVMFFIAny* out) noexcept {
    *out = details::ObjectView(value.get());
  }
  static void MoveToAny(Array value, TVMFFIAny* out) noexcept {
    *out = details::ObjectView(value.release());
  }
  /*! \brief An ffi.Array or an ffi.List (shared, not copied). */
  static std::optional<Array> TryFrom(const TVMFFIAny& v) {
    if (Array::IsSeq(v.type_index)) return Array(ObjectRef::Borrow(v.v_obj));
    return std::nullopt;
  }
};

}  // namespace tvm::ffi

#endif  // TVM_FFI_CONTAINER_H_
