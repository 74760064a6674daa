/*
 * tvm/ffi/object.h -- ObjectRef: an owning (strong) reference to an object of the C ABI.
 *
 * Reference counts are changed inline with the protocol of c_api.h (TVMFFIObject): strong count in
 * the low 32 bits of `combined_ref_count`, weak count in the high 32 bits, the deleter called
 * with Strong / Weak / Both flags. Part of the header-only C++ layer over c_api.h (C++17).
 */
#ifndef TVM_FFI_OBJECT_H_
#define TVM_FFI_OBJECT_H_

#include <tvm/ffi/c_api.h>

#include <cstdint>
#include <utility>

namespace tvm::ffi {
namespace details {

#if defined(__GNUC__) || defined(__clang__)
// GCC 12 may warn that these write "into a region of size 0" where it inlines them into a copy
// of a value that holds a small integer in the same slot as an object pointer (the object
// branch is dead there, but the analysis does not see it). The warning is wrong; silence it.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
/*! \brief Adds one strong reference (the caller holds one already). */
inline void IncRef(TVMFFIObject* obj) noexcept {
  __atomic_fetch_add(&obj->combined_ref_count, kTVMFFIObjectStrongOne, __ATOMIC_RELAXED);
}

/*! \brief Drops one strong reference; runs the deleter when a count reaches zero. */
inline void DecRef(TVMFFIObject* obj) noexcept {
  constexpr uint64_t kLow32 = 0xFFFFFFFFu;
  uint64_t before =
      __atomic_fetch_sub(&obj->combined_ref_count, kTVMFFIObjectStrongOne, __ATOMIC_RELEASE);
  if (before == kTVMFFIObjectBothOne) {
    // Last strong and the last (collective) weak reference: destroy and free at once.
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (obj->deleter != nullptr) obj->deleter(obj, kTVMFFIObjectDeleterFlagBitMaskBoth);
  } else if ((before & kLow32) == kTVMFFIObjectStrongOne) {
    // Last strong reference, but weak references remain: destroy the value, then drop the
    // collective weak reference and free the memory if it was the last one.
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (obj->deleter != nullptr) obj->deleter(obj, kTVMFFIObjectDeleterFlagBitMaskStrong);
    uint64_t weak_before =
        __atomic_fetch_sub(&obj->combined_ref_count, kTVMFFIObjectWeakOne, __ATOMIC_RELEASE);
    if (weak_before == kTVMFFIObjectWeakOne) {
      __atomic_thread_fence(__ATOMIC_ACQUIRE);
      if (obj->deleter != nullptr) obj->deleter(obj, kTVMFFIObjectDeleterFlagBitMaskWeak);
    }
  }
}

/*! \brief The strong count (a snapshot). */
inline uint32_t StrongCount(const TVMFFIObject* obj) noexcept {
  return static_cast<uint32_t>(__atomic_load_n(&obj->combined_ref_count, __ATOMIC_RELAXED));
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#else
// Other compilers go through the exported functions, which implement the same protocol.
inline void IncRef(TVMFFIObject* obj) noexcept { TVMFFIObjectIncRef(obj); }
inline void DecRef(TVMFFIObject* obj) noexcept { TVMFFIObjectDecRef(obj); }
inline uint32_t StrongCount(const TVMFFIObject* obj) noexcept {
  return static_cast<uint32_t>(obj->combined_ref_count);
}
#endif

}  // namespace details

/*!
 * \brief An owning reference to an object (any type index >= 64), or null.
 *
 * Copying adds a strong reference, destruction drops it. Typed wrappers (Function, Array, Error)
 * derive from it.
 */
class ObjectRef {
 public:
  ObjectRef() noexcept = default;
  ObjectRef(const ObjectRef& other) noexcept : obj_(other.obj_) {
    if (obj_ != nullptr) details::IncRef(obj_);
  }
  ObjectRef(ObjectRef&& other) noexcept : obj_(std::exchange(other.obj_, nullptr)) {}
  ObjectRef& operator=(const ObjectRef& other) noexcept {
    ObjectRef(other).swap(*this);
    return *this;
  }
  ObjectRef& operator=(ObjectRef&& other) noexcept {
    ObjectRef(std::move(other)).swap(*this);
    return *this;
  }
  ~ObjectRef() {
    if (obj_ != nullptr) details::DecRef(obj_);
  }

  /*! \brief Takes over a reference the caller owns (e.g. the result of TVMFFIFunctionCreate). */
  static ObjectRef Steal(TVMFFIObjectHandle handle) noexcept {
    ObjectRef ref;
    ref.obj_ = static_cast<TVMFFIObject*>(handle);
    return ref;
  }
  /*! \brief Adds a reference of its own to a borrowed handle (may be NULL). */
  static ObjectRef Borrow(TVMFFIObjectHandle handle) noexcept {
    ObjectRef ref;
    ref.obj_ = static_cast<TVMFFIObject*>(handle);
    if (ref.obj_ != nullptr) details::IncRef(ref.obj_);
    return ref;
  }

  /*! \brief The object header (borrowed), or nullptr. */
  TVMFFIObject* get() const noexcept { return obj_; }
  /*! \brief Gives up the reference without releasing it; the caller now owns it. */
  TVMFFIObject* release() noexcept { return std::exchange(obj_, nullptr); }
  /*! \brief Whether this references an object. */
  bool defined() const noexcept { return obj_ != nullptr; }
  explicit operator bool() const noexcept { return defined(); }
  /*! \brief The object's type index, or kTVMFFINone when null. */
  int32_t type_index() const noexcept { return obj_ != nullptr ? obj_->type_index : kTVMFFINone; }
  /*! \brief The number of strong references (0 when null). */
  uint32_t use_count() const noexcept { return obj_ != nullptr ? details::StrongCount(obj_) : 0; }
  /*! \brief Whether both reference the same object. */
  bool same_as(const ObjectRef& other) const noexcept { return obj_ == other.obj_; }

  void swap(ObjectRef& other) noexcept { std::swap(obj_, other.obj_); }

 protected:
  TVMFFIObject* obj_ = nullptr;
};

}  // namespace tvm::ffi

#endif  // TVM_FFI_OBJECT_H_
