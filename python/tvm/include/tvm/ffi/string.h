/*
 * tvm/ffi/string.h -- String and Bytes: immutable byte sequences in either of their ABI forms,
 * small (at most 7 bytes inline in a TVMFFIAny, kTVMFFISmallStr / kTVMFFISmallBytes) or heap
 * (an ffi.String / ffi.Bytes object whose TVMFFIByteArray sits at offset 24).
 *
 * New values are made by the runtime (TVMFFIStringFromByteArray / TVMFFIBytesFromByteArray), so
 * the memory belongs to it; reading is inline. Both forms keep a NUL after the content.
 */
#ifndef TVM_FFI_STRING_H_
#define TVM_FFI_STRING_H_

#include <tvm/ffi/error.h>
#include <tvm/ffi/object.h>

#include <cstring>
#include <ostream>
#include <string>
#include <string_view>

namespace tvm::ffi {
namespace details {

/*! \brief Storage shared by String and Bytes: an owning TVMFFIAny of one of the two forms. */
template <int32_t kSmallIndex, int32_t kHeapIndex>
class ByteSeq {
 public:
  static constexpr int32_t kSmallTypeIndex = kSmallIndex;
  static constexpr int32_t kHeapTypeIndex = kHeapIndex;

  ByteSeq(const ByteSeq& other) noexcept : data_(other.data_) {
    if (data_.type_index == kHeapIndex) IncRef(data_.v_obj);
  }
  ByteSeq(ByteSeq&& other) noexcept : data_(other.data_) { other.data_ = Empty(); }
  ByteSeq& operator=(const ByteSeq& other) noexcept {
    ByteSeq copy(other);
    std::swap(data_, copy.data_);
    return *this;
  }
  ByteSeq& operator=(ByteSeq&& other) noexcept {
    std::swap(data_, other.data_);
    return *this;
  }
  ~ByteSeq() {
    if (data_.type_index == kHeapIndex) DecRef(data_.v_obj);
  }

  /*! \brief The content; valid while this value lives (small content is stored inline). */
  std::string_view view() const noexcept {
    if (data_.type_index == kSmallIndex) {
      return std::string_view(data_.v_bytes, data_.small_str_len);
    }
    return ToStringView(*TVMFFIBytesGetByteArrayPtr(data_.v_obj));
  }
  const char* data() const noexcept { return view().data(); }
  size_t size() const noexcept { return view().size(); }
  bool empty() const noexcept { return size() == 0; }
  /*! \brief The content followed by a NUL (both forms store one). */
  const char* c_str() const noexcept { return data(); }
  std::string str() const { return std::string(view()); }
  operator std::string_view() const noexcept { return view(); }

  /*! \brief Whether the content is stored inline (the small form). */
  bool is_small() const noexcept { return data_.type_index == kSmallIndex; }
  /*! \brief The owning value (borrowed). */
  const TVMFFIAny& raw() const noexcept { return data_; }
  /*! \brief Gives up the owning value; this becomes empty. */
  TVMFFIAny Release() noexcept {
    TVMFFIAny out = data_;
    data_ = Empty();
    return out;
  }

 protected:
  ByteSeq() noexcept : data_(Empty()) {}
  /*! \brief Takes ownership of a value already of the small or heap form. */
  explicit ByteSeq(const TVMFFIAny& owned) noexcept : data_(owned) {}

  /*! \brief A new owning value holding a copy of `content`, made by the runtime's `make`. */
  static TVMFFIAny Copy(std::string_view content,
                        int (*make)(const TVMFFIByteArray*, TVMFFIAny*)) {
    TVMFFIByteArray bytes = ToByteArray(content);
    TVMFFIAny out;
    std::memset(&out, 0, sizeof(out));
    CheckCall(make(&bytes, &out));
    return out;
  }

  static TVMFFIAny Empty() noexcept {
    TVMFFIAny value;
    std::memset(&value, 0, sizeof(value));
    value.type_index = kSmallIndex;
    return value;
  }

  TVMFFIAny data_;
};

template <int32_t S, int32_t H>
bool operator==(const ByteSeq<S, H>& a, const ByteSeq<S, H>& b) noexcept {
  return a.view() == b.view();
}
template <int32_t S, int32_t H>
bool operator!=(const ByteSeq<S, H>& a, const ByteSeq<S, H>& b) noexcept {
  return a.view() != b.view();
}
template <int32_t S, int32_t H>
bool operator==(const ByteSeq<S, H>& a, std::string_view b) noexcept {
  return a.view() == b;
}
template <int32_t S, int32_t H>
bool operator!=(const ByteSeq<S, H>& a, std::string_view b) noexcept {
  return a.view() != b;
}
template <int32_t S, int32_t H>
std::ostream& operator<<(std::ostream& os, const ByteSeq<S, H>& value) {
  return os << value.view();
}

}  // namespace details

/*! \brief A UTF-8 string: kTVMFFISmallStr or an ffi.String object. Default: empty. */
class String : public details::ByteSeq<kTVMFFISmallStr, kTVMFFIStr> {
 public:
  String() noexcept = default;
  /*! \brief Copies `text` into a new runtime string. */
  String(std::string_view text) : ByteSeq(Copy(text, TVMFFIStringFromByteArray)) {}               // NOLINT(runtime/explicit)
  String(const char* text) : String(std::string_view(text)) {}         // NOLINT(runtime/explicit)
  String(const std::string& text) : String(std::string_view(text)) {}  // NOLINT

  /*! \brief Takes ownership of a value that is kTVMFFISmallStr or kTVMFFIStr. */
  static String FromOwnedRaw(const TVMFFIAny& owned) noexcept { return String(owned, 0); }

 private:
  String(const TVMFFIAny& owned, int) noexcept : ByteSeq(owned) {}
};

/*! \brief A byte string: kTVMFFISmallBytes or an ffi.Bytes object. Default: empty. */
class Bytes : public details::ByteSeq<kTVMFFISmallBytes, kTVMFFIBytes> {
 public:
  Bytes() noexcept = default;
  /*! \brief Copies `data` into a new runtime byte string. */
  explicit Bytes(std::string_view data) : ByteSeq(Copy(data, TVMFFIBytesFromByteArray)) {}
  Bytes(const void* data, size_t size)
      : Bytes(std::string_view(static_cast<const char*>(data), size)) {}

  /*! \brief Takes ownership of a value that is kTVMFFISmallBytes or kTVMFFIBytes. */
  static Bytes FromOwnedRaw(const TVMFFIAny& owned) noexcept { return Bytes(owned, 0); }

 private:
  Bytes(const TVMFFIAny& owned, int) noexcept : ByteSeq(owned) {}
};

}  // namespace tvm::ffi

#endif  // TVM_FFI_STRING_H_
