/*
 * tvm/ffi/any.h -- AnyView (a borrowed TVMFFIAny) and Any (an owning one), and the conversions
 * between them and C++ types.
 *
 * Conversions are described by TypeTraits<T> (specialized here for the plain types, String,
 * Bytes, std::string, const char*, ObjectRef, Error, DLDataType, DLDevice, DLTensor* and void*;
 * function.h, container.h and tensor.h add Function, Array and TensorView). A specialization has:
 *
 *   static constexpr bool kEnabled = true;
 *   static constexpr const char* kTypeName;               // "int", "ffi.String", ...
 *   static void ToView(const T&, TVMFFIAny* out);         // borrowed encoding
 *   static void MoveToAny(T, TVMFFIAny* out);             // owning encoding
 *   static std::optional<T> TryFrom(const TVMFFIAny& v);  // from a borrowed value, if accepted
 *
 * Accepted values (what callers may pass where T is expected):
 *   integers: int, bool          bool: bool, int          float/double: float, int, bool
 *   void*: opaque pointer, None  DLDataType: DataType, or a string parsed as a dtype
 *   DLDevice: Device             String/std::string: small/heap string, raw C string (copied)
 *   Bytes: small/heap bytes, TVMFFIByteArray* (copied)    DLTensor*: DLTensor*, ffi.Tensor
 *   ObjectRef: any object, None (null)
 * A failed cast() throws Error of kind TypeError naming both types.
 */
#ifndef TVM_FFI_ANY_H_
#define TVM_FFI_ANY_H_

#include <tvm/ffi/error.h>
#include <tvm/ffi/object.h>
#include <tvm/ffi/string.h>

#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace tvm::ffi {

class Any;
class AnyView;

/*! \brief Conversion traits of T; see the top of this file. Disabled unless specialized. */
template <typename T, typename = void>
struct TypeTraits {
  static constexpr bool kEnabled = false;
};

/*!
 * \brief The type key of a type index ("int", "ffi.Array", ...) from TVMFFIGetTypeInfo, or
 *  "<unregistered type N>" for an index the runtime does not know.
 */
inline std::string TypeIndexToTypeKey(int32_t type_index) {
  const TVMFFITypeInfo* info = TVMFFIGetTypeInfo(type_index);
  if (info == nullptr) {
    // The lookup left a KeyError in the slot; this helper reports the miss in its result.
    TVMFFIObjectHandle err = nullptr;
    TVMFFIErrorMoveFromRaised(&err);
    TVMFFIObjectDecRef(err);
    return "<unregistered type " + std::to_string(type_index) + ">";
  }
  return std::string(details::ToStringView(info->type_key));
}

/*!
 * \brief The name users know a type by, for messages: "str" for strings (ffi.String,
 *  ffi.SmallStr) and "bytes" for byte strings (ffi.Bytes, ffi.SmallBytes); other names as given.
 */
inline const char* UserTypeName(const char* type_name) {
  if (std::strcmp(type_name, "ffi.String") == 0 || std::strcmp(type_name, "ffi.SmallStr") == 0) {
    return "str";
  }
  if (std::strcmp(type_name, "ffi.Bytes") == 0 || std::strcmp(type_name, "ffi.SmallBytes") == 0) {
    return "bytes";
  }
  return type_name;
}

/*! \brief The name users know the type of index `type_index` by (see UserTypeName). */
inline std::string TypeIndexToUserTypeName(int32_t type_index) {
  switch (type_index) {
    case kTVMFFIRawStr:
    case kTVMFFISmallStr:
    case kTVMFFIStr:
      return "str";
    case kTVMFFIByteArrayPtr:
    case kTVMFFISmallBytes:
    case kTVMFFIBytes:
      return "bytes";
    default:
      return TypeIndexToTypeKey(type_index);
  }
}

namespace details {

/*! \brief The None value (all bits zero). */
inline TVMFFIAny NoneAny() noexcept {
  TVMFFIAny value;
  std::memset(&value, 0, sizeof(value));
  return value;
}

/*! \brief A value of a plain type with an 8-byte payload, canonical (unused bits zero). */
inline TVMFFIAny MakePod(int32_t type_index) noexcept {
  TVMFFIAny value = NoneAny();
  value.type_index = type_index;
  return value;
}

/*! \brief A borrowed view of an object (None for nullptr). */
inline TVMFFIAny ObjectView(TVMFFIObject* obj) noexcept {
  TVMFFIAny value = NoneAny();
  if (obj != nullptr) {
    value.type_index = obj->type_index;
    value.v_obj = obj;
  }
  return value;
}

inline bool IsObject(const TVMFFIAny& value) noexcept {
  return value.type_index >= kTVMFFIStaticObjectBegin;
}

/*! \brief Releases the reference an owning value holds, if any. */
inline void ReleaseOwned(TVMFFIAny* value) noexcept {
  if (IsObject(*value)) DecRef(value->v_obj);
}

/*!
 * \brief An rvalue reference argument seen as a borrowed view of the object in its slot; every
 *  other value unchanged.
 */
inline TVMFFIAny Normalize(const TVMFFIAny& value) noexcept {
  if (value.type_index == kTVMFFIObjectRValueRef && value.v_ptr != nullptr) {
    return ObjectView(*static_cast<TVMFFIObject**>(value.v_ptr));
  }
  return value;
}

}  // namespace details

// ------------------------------------------------------------------------------------------
// TypeTraits specializations
// ------------------------------------------------------------------------------------------

namespace details {

/*! \brief Traits of plain (not reference counted) values: owning and borrowed forms coincide. */
template <typename T, typename Derived>
struct PodTraits {
  static constexpr bool kEnabled = true;
  static void MoveToAny(T value, TVMFFIAny* out) noexcept { Derived::ToView(value, out); }
};

}  // namespace details

template <>
struct TypeTraits<bool> : details::PodTraits<bool, TypeTraits<bool>> {
  static constexpr const char* kTypeName = "bool";
  static void ToView(bool value, TVMFFIAny* out) noexcept {
    *out = details::MakePod(kTVMFFIBool);
    out->v_int64 = value ? 1 : 0;
  }
  static std::optional<bool> TryFrom(const TVMFFIAny& v) noexcept {
    if (v.type_index == kTVMFFIBool || v.type_index == kTVMFFIInt) return v.v_int64 != 0;
    return std::nullopt;
  }
};

template <typename Int>
struct TypeTraits<Int, std::enable_if_t<std::is_integral_v<Int> && !std::is_same_v<Int, bool>>>
    : details::PodTraits<Int, TypeTraits<Int>> {
  static constexpr const char* kTypeName = "int";
  static void ToView(Int value, TVMFFIAny* out) noexcept {
    *out = details::MakePod(kTVMFFIInt);
    out->v_int64 = static_cast<int64_t>(value);
  }
  static std::optional<Int> TryFrom(const TVMFFIAny& v) noexcept {
    if (v.type_index == kTVMFFIInt || v.type_index == kTVMFFIBool) {
      return static_cast<Int>(v.v_int64);
    }
    return std::nullopt;
  }
};

template <typename Float>
struct TypeTraits<Float, std::enable_if_t<std::is_floating_point_v<Float>>>
    : details::PodTraits<Float, TypeTraits<Float>> {
  static constexpr const char* kTypeName = "float";
  static void ToView(Float value, TVMFFIAny* out) noexcept {
    *out = details::MakePod(kTVMFFIFloat);
    out->v_float64 = static_cast<double>(value);
  }
  static std::optional<Float> TryFrom(const TVMFFIAny& v) noexcept {
    if (v.type_index == kTVMFFIFloat) return static_cast<Float>(v.v_float64);
    if (v.type_index == kTVMFFIInt || v.type_index == kTVMFFIBool) {
      return static_cast<Float>(v.v_int64);
    }
    return std::nullopt;
  }
};

template <>
struct TypeTraits<void*> : details::PodTraits<void*, TypeTraits<void*>> {
  static constexpr const char* kTypeName = "void*";
  static void ToView(void* value, TVMFFIAny* out) noexcept {
    *out = details::NoneAny();  // nullptr is None
    if (value != nullptr) {
      out->type_index = kTVMFFIOpaquePtr;
      out->v_ptr = value;
    }
  }
  static std::optional<void*> TryFrom(const TVMFFIAny& v) noexcept {
    if (v.type_index == kTVMFFIOpaquePtr) return v.v_ptr;
    if (v.type_index == kTVMFFINone) return static_cast<void*>(nullptr);
    return std::nullopt;
  }
};

template <>
struct TypeTraits<std::nullptr_t> : details::PodTraits<std::nullptr_t, TypeTraits<std::nullptr_t>> {
  static constexpr const char* kTypeName = "None";
  static void ToView(std::nullptr_t, TVMFFIAny* out) noexcept { *out = details::NoneAny(); }
  static std::optional<std::nullptr_t> TryFrom(const TVMFFIAny& v) noexcept {
    if (v.type_index == kTVMFFINone) return nullptr;
    return std::nullopt;
  }
};

template <>
struct TypeTraits<DLDataType> : details::PodTraits<DLDataType, TypeTraits<DLDataType>> {
  static constexpr const char* kTypeName = "DataType";
  static void ToView(DLDataType value, TVMFFIAny* out) noexcept {
    *out = details::MakePod(kTVMFFIDataType);
    out->v_dtype = value;
  }
  /*! \brief Strings are parsed; one that is not a dtype throws the parser's ValueError. */
  static std::optional<DLDataType> TryFrom(const TVMFFIAny& v) {
    if (v.type_index == kTVMFFIDataType) return v.v_dtype;
    std::optional<std::string_view> text;
    if (v.type_index == kTVMFFISmallStr) {
      text = std::string_view(v.v_bytes, v.small_str_len);
    } else if (v.type_index == kTVMFFIStr) {
      text = details::ToStringView(*TVMFFIBytesGetByteArrayPtr(v.v_obj));
    } else if (v.type_index == kTVMFFIRawStr) {
      text = std::string_view(v.v_c_str);
    }
    if (!text.has_value()) return std::nullopt;
    TVMFFIByteArray bytes = details::ToByteArray(*text);
    DLDataType dtype;
    details::CheckCall(TVMFFIDataTypeFromString(&bytes, &dtype));
    return dtype;
  }
};

template <>
struct TypeTraits<DLDevice> : details::PodTraits<DLDevice, TypeTraits<DLDevice>> {
  static constexpr const char* kTypeName = "Device";
  static void ToView(DLDevice value, TVMFFIAny* out) noexcept {
    *out = details::MakePod(kTVMFFIDevice);
    out->v_device = value;
  }
  static std::optional<DLDevice> TryFrom(const TVMFFIAny& v) noexcept {
    if (v.type_index == kTVMFFIDevice) return v.v_device;
    return std::nullopt;
  }
};

template <>
struct TypeTraits<DLTensor*> : details::PodTraits<DLTensor*, TypeTraits<DLTensor*>> {
  static constexpr const char* kTypeName = "DLTensor*";
  static void ToView(DLTensor* value, TVMFFIAny* out) noexcept {
    *out = details::NoneAny();
    if (value != nullptr) {
      out->type_index = kTVMFFIDLTensorPtr;
      out->v_ptr = value;
    }
  }
  /*! \brief A DLTensor* argument, or the DLTensor inside an ffi.Tensor (borrowed). */
  static std::optional<DLTensor*> TryFrom(const TVMFFIAny& v) noexcept {
    if (v.type_index == kTVMFFIDLTensorPtr) return static_cast<DLTensor*>(v.v_ptr);
    if (v.type_index == kTVMFFITensor) return TVMFFITensorGetDLTensorPtr(v.v_obj);
    return std::nullopt;
  }
};

template <>
struct TypeTraits<String> {
  static constexpr bool kEnabled = true;
  static constexpr const char* kTypeName = "ffi.String";
  static void ToView(const String& value, TVMFFIAny* out) noexcept { *out = value.raw(); }
  static void MoveToAny(String value, TVMFFIAny* out) noexcept { *out = value.Release(); }
  /*! \brief Small and heap strings share; a raw C string is copied. */
  static std::optional<String> TryFrom(const TVMFFIAny& v) {
    if (v.type_index == kTVMFFISmallStr) return String::FromOwnedRaw(v);
    if (v.type_index == kTVMFFIStr) {
      details::IncRef(v.v_obj);
      return String::FromOwnedRaw(v);
    }
    if (v.type_index == kTVMFFIRawStr) return String(v.v_c_str);
    return std::nullopt;
  }
};

template <>
struct TypeTraits<Bytes> {
  static constexpr bool kEnabled = true;
  static constexpr const char* kTypeName = "ffi.Bytes";
  static void ToView(const Bytes& value, TVMFFIAny* out) noexcept { *out = value.raw(); }
  static void MoveToAny(Bytes value, TVMFFIAny* out) noexcept { *out = value.Release(); }
  /*! \brief Small and heap bytes share; a TVMFFIByteArray* argument is copied. */
  static std::optional<Bytes> TryFrom(const TVMFFIAny& v) {
    if (v.type_index == kTVMFFISmallBytes) return Bytes::FromOwnedRaw(v);
    if (v.type_index == kTVMFFIBytes) {
      details::IncRef(v.v_obj);
      return Bytes::FromOwnedRaw(v);
    }
    if (v.type_index == kTVMFFIByteArrayPtr) {
      const TVMFFIByteArray* array = static_cast<const TVMFFIByteArray*>(v.v_ptr);
      return Bytes(details::ToStringView(*array));
    }
    return std::nullopt;
  }
};

template <>
struct TypeTraits<std::string> {
  static constexpr bool kEnabled = true;
  static constexpr const char* kTypeName = "ffi.String";
  /*! \brief A raw C string: the view ends at the first NUL. (Calls through Function keep all.) */
  static void ToView(const std::string& value, TVMFFIAny* out) noexcept {
    *out = details::NoneAny();
    out->type_index = kTVMFFIRawStr;
    out->v_c_str = value.c_str();
  }
  static void MoveToAny(const std::string& value, TVMFFIAny* out) {
    *out = String(value).Release();
  }
  static std::optional<std::string> TryFrom(const TVMFFIAny& v) {
    if (std::optional<String> s = TypeTraits<String>::TryFrom(v)) return s->str();
    return std::nullopt;
  }
};

template <>
struct TypeTraits<const char*> {
  static constexpr bool kEnabled = true;
  static constexpr const char* kTypeName = "ffi.String";
  /*! \brief A raw C string (kTVMFFIRawStr); nullptr is None. */
  static void ToView(const char* value, TVMFFIAny* out) noexcept {
    *out = details::NoneAny();
    if (value != nullptr) {
      out->type_index = kTVMFFIRawStr;
      out->v_c_str = value;
    }
  }
  /*! \brief A copy as a String (an owning value never holds a raw pointer). */
  static void MoveToAny(const char* value, TVMFFIAny* out) {
    *out = value != nullptr ? String(value).Release() : details::NoneAny();
  }
  // No TryFrom: a const char* cannot own its characters.
};

template <>
struct TypeTraits<ObjectRef> {
  static constexpr bool kEnabled = true;
  static constexpr const char* kTypeName = "ffi.Object";
  static void ToView(const ObjectRef& value, TVMFFIAny* out) noexcept {
    *out = details::ObjectView(value.get());
  }
  static void MoveToAny(ObjectRef value, TVMFFIAny* out) noexcept {
    *out = details::ObjectView(value.release());
  }
  /*! \brief Any object; None is the null reference. */
  static std::optional<ObjectRef> TryFrom(const TVMFFIAny& v) noexcept {
    if (details::IsObject(v)) return ObjectRef::Borrow(v.v_obj);
    if (v.type_index == kTVMFFINone) return ObjectRef();
    return std::nullopt;
  }
};

template <>
struct TypeTraits<Error> {
  static constexpr bool kEnabled = true;
  static constexpr const char* kTypeName = "ffi.Error";
  static void ToView(const Error& value, TVMFFIAny* out) noexcept {
    *out = details::ObjectView(value.object().get());
  }
  static void MoveToAny(const Error& value, TVMFFIAny* out) noexcept {
    ObjectRef ref = value.object();
    *out = details::ObjectView(ref.release());
  }
  static std::optional<Error> TryFrom(const TVMFFIAny& v) {
    if (v.type_index == kTVMFFIError) return Error(ObjectRef::Borrow(v.v_obj));
    return std::nullopt;
  }
};

namespace details {

/*! \brief Whether TypeTraits<T> is specialized (instantiated only when asked). */
template <typename T>
struct HasTraits : std::bool_constant<TypeTraits<T>::kEnabled> {};

template <typename T>
constexpr bool kConvertible = HasTraits<T>::value;

/*! \brief True for the types a converting constructor of Any / AnyView accepts. */
template <typename T>
constexpr bool kAnyConstructible =
    std::conjunction_v<std::negation<std::is_same<T, Any>>, std::negation<std::is_same<T, AnyView>>,
                       HasTraits<T>>;

}  // namespace details

/*!
 * \brief A borrowed value with the layout of TVMFFIAny: holds no reference, so it is valid only
 *  while what it was made from lives. Function arguments are AnyViews.
 */
class AnyView {
 public:
  AnyView() noexcept : data_(details::NoneAny()) {}
  template <typename T, typename = std::enable_if_t<details::kAnyConstructible<T>>>
  AnyView(const T& value) noexcept {  // NOLINT(runtime/explicit)
    TypeTraits<T>::ToView(value, &data_);
  }
  /*! \brief A raw C string (kTVMFFIRawStr); nullptr is None. */
  AnyView(const char* text) noexcept {  // NOLINT(runtime/explicit)
    TypeTraits<const char*>::ToView(text, &data_);
  }
  inline AnyView(const Any& value) noexcept;  // NOLINT(runtime/explicit)

  /*! \brief Views a raw value (borrowed). */
  static AnyView FromRaw(const TVMFFIAny& raw) noexcept {
    AnyView view;
    view.data_ = raw;
    return view;
  }

  int32_t type_index() const noexcept { return data_.type_index; }
  /*! \brief The type key of the value ("int", "ffi.String", "ffi.Tensor", ...). */
  std::string type_key() const { return TypeIndexToTypeKey(data_.type_index); }
  bool is_none() const noexcept { return data_.type_index == kTVMFFINone; }
  const TVMFFIAny& raw() const noexcept { return data_; }

  /*! \brief The value as T if it is accepted (see the table at the top of the file). */
  template <typename T>
  std::optional<T> as() const {
    static_assert(details::kConvertible<T>, "no TypeTraits<T>: include the header of T");
    return TypeTraits<T>::TryFrom(details::Normalize(data_));
  }

  /*! \brief The value as T; a TypeError naming both types if it is not accepted. */
  template <typename T>
  T cast() const {
    std::optional<T> value = as<T>();
    if (!value.has_value()) {
      TVM_FFI_THROW(TypeError) << "Cannot convert from type `"
                               << TypeIndexToUserTypeName(details::Normalize(data_).type_index)
                               << "` to `" << UserTypeName(TypeTraits<T>::kTypeName) << "`";
    }
    return std::move(*value);
  }

 private:
  TVMFFIAny data_;
};

/*!
 * \brief An owning value with the layout of TVMFFIAny: holds one strong reference when it holds
 *  an object. Function results are Anys.
 */
class Any {
 public:
  Any() noexcept : data_(details::NoneAny()) {}
  Any(const Any& other) noexcept : data_(other.data_) {
    if (details::IsObject(data_)) details::IncRef(data_.v_obj);
  }
  Any(Any&& other) noexcept : data_(std::exchange(other.data_, details::NoneAny())) {}
  Any& operator=(const Any& other) noexcept {
    Any(other).swap(*this);
    return *this;
  }
  Any& operator=(Any&& other) noexcept {
    Any(std::move(other)).swap(*this);
    return *this;
  }
  ~Any() { details::ReleaseOwned(&data_); }

  template <typename T, typename = std::enable_if_t<details::kAnyConstructible<T>>>
  Any(T value) {  // NOLINT(runtime/explicit)
    data_ = details::NoneAny();
    TypeTraits<T>::MoveToAny(std::move(value), &data_);
  }
  /*! \brief A C string, copied into a String (an owning value never holds a raw pointer). */
  Any(const char* text) {  // NOLINT(runtime/explicit)
    TypeTraits<const char*>::MoveToAny(text, &data_);
  }
  /*!
   * \brief An owning copy of a view (TVMFFIAnyViewToOwnedAny): objects gain a reference, raw
   *  strings and byte arrays are copied, an rvalue reference is moved from.
   */
  explicit Any(const AnyView& view) : data_(details::NoneAny()) {
    details::CheckCall(TVMFFIAnyViewToOwnedAny(&view.raw(), &data_));
  }

  /*! \brief Takes over an owning raw value (e.g. a function result). */
  static Any FromOwnedRaw(const TVMFFIAny& raw) noexcept {
    Any value;
    value.data_ = raw;
    return value;
  }
  /*! \brief Gives up the owning raw value; this becomes None. */
  TVMFFIAny Release() noexcept { return std::exchange(data_, details::NoneAny()); }

  AnyView view() const noexcept { return AnyView::FromRaw(data_); }
  int32_t type_index() const noexcept { return data_.type_index; }
  std::string type_key() const { return TypeIndexToTypeKey(data_.type_index); }
  bool is_none() const noexcept { return data_.type_index == kTVMFFINone; }
  const TVMFFIAny& raw() const noexcept { return data_; }

  template <typename T>
  std::optional<T> as() const {
    return view().as<T>();
  }
  template <typename T>
  T cast() const {
    return view().cast<T>();
  }

  void swap(Any& other) noexcept { std::swap(data_, other.data_); }

 private:
  TVMFFIAny data_;
};

inline AnyView::AnyView(const Any& value) noexcept : data_(value.raw()) {}

static_assert(sizeof(AnyView) == sizeof(TVMFFIAny) && sizeof(Any) == sizeof(TVMFFIAny),
              "AnyView and Any have the layout of TVMFFIAny");

// TypeTraits of the two value classes themselves (parameters and results of typed functions).

template <>
struct TypeTraits<AnyView> {
  static constexpr bool kEnabled = true;
  static constexpr const char* kTypeName = "Any";
  static void ToView(const AnyView& value, TVMFFIAny* out) noexcept { *out = value.raw(); }
  static std::optional<AnyView> TryFrom(const TVMFFIAny& v) noexcept { return AnyView::FromRaw(v); }
};

template <>
struct TypeTraits<Any> {
  static constexpr bool kEnabled = true;
  static constexpr const char* kTypeName = "Any";
  static void ToView(const Any& value, TVMFFIAny* out) noexcept { *out = value.raw(); }
  static void MoveToAny(Any value, TVMFFIAny* out) noexcept { *out = value.Release(); }
  /*! \brief An owning copy (raw strings become strings). */
  static std::optional<Any> TryFrom(const TVMFFIAny& v) { return Any(AnyView::FromRaw(v)); }
};

}  // namespace tvm::ffi

#endif  // TVM_FFI_ANY_H_
