/*
 * tvm/ffi/extra/legacy_abi.h -- the bridge from TVM's packed-function ABI before the FFI
 * refactor (a TVMValue union plus an int type code per argument) to TVMFFIAny and back, so that
 * code compiled for the old convention can be called from, and call, this runtime (C++17).
 *
 *   legacy -> FFI   LegacyTVMArgValueToFFIAny, LegacyTVMArgValueToAnyView (borrowed views),
 *                   MoveLegacyTVMArgValueToAny (a returned value: takes over its reference),
 *                   LegacyTVMArgsToPackedArgs (a whole argument list)
 *   FFI -> legacy   TVMFFIAnyToLegacyTVMArgValue, AnyViewToLegacyTVMArgValue (borrowed),
 *                   LegacyArgs (a whole argument list, with the storage the values point into)
 *   wrapping        FunctionFromLegacyBackendPackedCFunc: an ffi::Function around a function
 *                   compiled with the old backend signature (TVMBackendPackedCFunc)
 *
 * The codes and the TVMValue union are the old c_runtime_api.h's; if that header was included
 * first, its definitions are used instead. Objects cross as borrowed handles (a legacy argument
 * holds no reference), except in MoveLegacyTVMArgValueToAny. An unknown type code or a value
 * with no legacy form is an Error of kind TypeError naming it.
 */
#ifndef TVM_FFI_EXTRA_LEGACY_ABI_H_
#define TVM_FFI_EXTRA_LEGACY_ABI_H_

#include <tvm/ffi/any.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <cstdint>
#include <cstring>
#include <vector>

#ifndef TVM_RUNTIME_C_RUNTIME_API_H_
/*! \brief One argument or result of the old packed-function ABI (8 bytes). */
typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
  DLDataType v_type;
  DLDevice v_device;
} TVMValue;

/*! \brief The byte range a kTVMBytes value points at (the layout of TVMFFIByteArray). */
typedef struct {
  const char* data;
  size_t size;
} TVMByteArray;

/*! \brief The type codes of the old ABI: what the TVMValue beside them holds. */
typedef enum {
  kTVMArgInt = kDLInt,
  kTVMArgFloat = kDLFloat,
  kTVMOpaqueHandle = 3U,
  kTVMNullptr = 4U,
  kTVMDataType = 5U,
  kDLDevice = 6U,
  kTVMDLTensorHandle = 7U,
  kTVMObjectHandle = 8U,
  kTVMModuleHandle = 9U,
  kTVMPackedFuncHandle = 10U,
  kTVMStr = 11U,
  kTVMBytes = 12U,
  kTVMNDArrayHandle = 13U,
  kTVMObjectRValueRefArg = 14U,
  kTVMArgBool = 15U,
  /*! \brief Codes from here to 127 were extensions; none is understood by this bridge. */
  kTVMExtBegin = 16U,
} TVMArgTypeCode;
#endif  // TVM_RUNTIME_C_RUNTIME_API_H_

/*!
 * \brief The signature of functions compiled for the old backend ABI: arguments as values and
 *  codes, the result written to `out_ret_value` / `out_ret_tcode`, 0 on success.
 */
typedef int (*TVMBackendPackedCFunc)(TVMValue* args, int* type_codes, int num_args,
                                     TVMValue* out_ret_value, int* out_ret_tcode,
                                     void* resource_handle);

namespace tvm::ffi {

static_assert(sizeof(TVMValue) == 8, "TVMValue is one 8-byte payload");
static_assert(sizeof(TVMByteArray) == sizeof(TVMFFIByteArray), "TVMByteArray is TVMFFIByteArray");

namespace details {

/*! \brief The size of the object header in front of the DLTensor of an ffi.Tensor. */
constexpr size_t kLegacyTensorHeaderBytes = sizeof(TVMFFIObject);

/*! \brief A view of an object handle: None for NULL, else `type_index` (or the object's own). */
inline TVMFFIAny LegacyObjectView(void* handle, int32_t type_index) noexcept {
  TVMFFIAny out = NoneAny();
  if (handle != nullptr) {
    TVMFFIObject* obj = static_cast<TVMFFIObject*>(handle);
    out.type_index = type_index >= 0 ? type_index : obj->type_index;
    out.v_obj = obj;
  }
  return out;
}

}  // namespace details

/*!
 * \brief A borrowed TVMFFIAny of one legacy argument (the payload's unused bytes zeroed).
 * \throws Error (TypeError) for a code the old ABI did not define, naming it.
 */
inline TVMFFIAny LegacyTVMArgValueToFFIAny(TVMValue value, int type_code) {
  TVMFFIAny out = details::NoneAny();
  switch (type_code) {
    case kTVMArgInt:
      out.type_index = kTVMFFIInt;
      out.v_int64 = value.v_int64;
      break;
    case kTVMArgBool:
      out.type_index = kTVMFFIBool;
      out.v_int64 = value.v_int64 != 0 ? 1 : 0;
      break;
    case kTVMArgFloat:
      out.type_index = kTVMFFIFloat;
      out.v_float64 = value.v_float64;
      break;
    case kTVMOpaqueHandle:
      out.type_index = kTVMFFIOpaquePtr;
      out.v_ptr = value.v_handle;
      break;
    case kTVMNullptr:
      break;
    case kTVMDataType:
      out.type_index = kTVMFFIDataType;
      out.v_dtype = value.v_type;
      break;
    case kDLDevice:
      out.type_index = kTVMFFIDevice;
      out.v_device = value.v_device;
      break;
    case kTVMDLTensorHandle:
      out.type_index = kTVMFFIDLTensorPtr;
      out.v_ptr = value.v_handle;
      break;
    case kTVMObjectHandle:
      out = details::LegacyObjectView(value.v_handle, -1);
      break;
    case kTVMModuleHandle:
      out = details::LegacyObjectView(value.v_handle, kTVMFFIModule);
      break;
    case kTVMPackedFuncHandle:
      out = details::LegacyObjectView(value.v_handle, kTVMFFIFunction);
      break;
    case kTVMStr:
      if (value.v_str != nullptr) {
        out.type_index = kTVMFFIRawStr;
        out.v_c_str = value.v_str;
      }
      break;
    case kTVMBytes:
      out.type_index = kTVMFFIByteArrayPtr;
      out.v_ptr = value.v_handle;
      break;
    case kTVMNDArrayHandle:
      // The handle is the DLTensor inside the tensor object, right after its header.
      if (value.v_handle != nullptr) {
        out.type_index = kTVMFFITensor;
        out.v_obj = reinterpret_cast<TVMFFIObject*>(static_cast<char*>(value.v_handle) -
                                                    details::kLegacyTensorHeaderBytes);
      }
      break;
    case kTVMObjectRValueRefArg:
      out.type_index = kTVMFFIObjectRValueRef;
      out.v_ptr = value.v_handle;
      break;
    default:
      TVM_FFI_THROW(TypeError) << "Unsupported legacy type code " << type_code
                               << ": the old packed-function ABI defines codes 0 and 2 to 15";
  }
  return out;
}

/*! \brief LegacyTVMArgValueToFFIAny as an AnyView (borrowed; valid while the argument is). */
inline AnyView LegacyTVMArgValueToAnyView(TVMValue value, int type_code) {
  return AnyView::FromRaw(LegacyTVMArgValueToFFIAny(value, type_code));
}

/*!
 * \brief An owning Any of a legacy result: an object's reference passes to the Any; strings and
 *  byte arrays (which the callee owns) are copied.
 */
inline Any MoveLegacyTVMArgValueToAny(TVMValue value, int type_code) {
  TVMFFIAny raw = LegacyTVMArgValueToFFIAny(value, type_code);
  if (details::IsObject(raw)) return Any::FromOwnedRaw(raw);
  return Any(AnyView::FromRaw(raw));
}

/*!
 * \brief Views `num_args` legacy arguments as TVMFFIAny values in `dst` (borrowed).
 * \throws Error (TypeError) naming the argument whose code is unknown.
 */
inline void LegacyTVMArgsToPackedArgs(const TVMValue* values, const int* type_codes, int num_args,
                                      TVMFFIAny* dst) {
  for (int i = 0; i < num_args; ++i) {
    try {
      dst[i] = LegacyTVMArgValueToFFIAny(values[i], type_codes[i]);
    } catch (const Error& err) {
      TVM_FFI_THROW(TypeError) << "legacy argument #" << i << ": " << err.message();
    }
  }
}

/*!
 * \brief The legacy form of `*src` (borrowed): every FFI value the old ABI can express. String
 *  values become kTVMStr pointing at their NUL-terminated characters, byte values kTVMBytes
 *  pointing at a TVMByteArray. Both pointers stay valid while `*src` and what it references
 *  live (a small string points into `*src` itself).
 * \param bytes_storage Where a TVMByteArray for small bytes (kept inline in the Any) is written;
 *  such a value is an error when it is NULL.
 * \throws Error (TypeError) for a value the old ABI has no code for, naming its type.
 */
inline void TVMFFIAnyToLegacyTVMArgValue(const TVMFFIAny* src, TVMValue* value, int* type_code,
                                         TVMByteArray* bytes_storage = nullptr) {
  value->v_int64 = 0;
  switch (src->type_index) {
    case kTVMFFINone:
      *type_code = kTVMNullptr;
      return;
    case kTVMFFIInt:
      *type_code = kTVMArgInt;
      value->v_int64 = src->v_int64;
      return;
    case kTVMFFIBool:
      *type_code = kTVMArgBool;
      value->v_int64 = src->v_int64;
      return;
    case kTVMFFIFloat:
      *type_code = kTVMArgFloat;
      value->v_float64 = src->v_float64;
      return;
    case kTVMFFIOpaquePtr:
      *type_code = kTVMOpaqueHandle;
      value->v_handle = src->v_ptr;
      return;
    case kTVMFFIDataType:
      *type_code = kTVMDataType;
      value->v_type = src->v_dtype;
      return;
    case kTVMFFIDevice:
      *type_code = kDLDevice;
      value->v_device = src->v_device;
      return;
    case kTVMFFIDLTensorPtr:
      *type_code = kTVMDLTensorHandle;
      value->v_handle = src->v_ptr;
      return;
    case kTVMFFIRawStr:
      *type_code = kTVMStr;
      value->v_str = src->v_c_str;
      return;
    case kTVMFFISmallStr:
      // NUL-padded in place: at most 7 characters of the 8 bytes are used.
      *type_code = kTVMStr;
      value->v_str = src->v_bytes;
      return;
    case kTVMFFIStr:
      *type_code = kTVMStr;
      value->v_str = TVMFFIBytesGetByteArrayPtr(src->v_obj)->data;
      return;
    case kTVMFFIByteArrayPtr:
      *type_code = kTVMBytes;
      value->v_handle = src->v_ptr;
      return;
    case kTVMFFIBytes:
      *type_code = kTVMBytes;
      value->v_handle = TVMFFIBytesGetByteArrayPtr(src->v_obj);
      return;
    case kTVMFFISmallBytes:
      if (bytes_storage == nullptr) {
        TVM_FFI_THROW(TypeError) << "small bytes have no legacy form without storage for a "
                                    "TVMByteArray (pass bytes_storage, or use LegacyArgs)";
      }
      bytes_storage->data = src->v_bytes;
      bytes_storage->size = src->small_str_len;
      *type_code = kTVMBytes;
      value->v_handle = bytes_storage;
      return;
    case kTVMFFITensor:
      *type_code = kTVMNDArrayHandle;
      value->v_handle = TVMFFITensorGetDLTensorPtr(src->v_obj);
      return;
    case kTVMFFIModule:
      *type_code = kTVMModuleHandle;
      value->v_handle = src->v_obj;
      return;
    case kTVMFFIFunction:
      *type_code = kTVMPackedFuncHandle;
      value->v_handle = src->v_obj;
      return;
    case kTVMFFIObjectRValueRef:
      *type_code = kTVMObjectRValueRefArg;
      value->v_handle = src->v_ptr;
      return;
    default:
      if (details::IsObject(*src)) {
        *type_code = kTVMObjectHandle;
        value->v_handle = src->v_obj;
        return;
      }
      TVM_FFI_THROW(TypeError) << "a value of type `" << TypeIndexToUserTypeName(src->type_index)
                               << "` (type index " << src->type_index
                               << ") has no legacy type code";
  }
}

/*!
 * \brief TVMFFIAnyToLegacyTVMArgValue of a view; the result may point into `src` (a small
 *  string), so a temporary view is refused at compile time.
 */
inline void AnyViewToLegacyTVMArgValue(const AnyView& src, TVMValue* value, int* type_code,
                                       TVMByteArray* bytes_storage = nullptr) {
  TVMFFIAnyToLegacyTVMArgValue(&src.raw(), value, type_code, bytes_storage);
}
/*! \brief TVMFFIAnyToLegacyTVMArgValue of an owning value (borrowed: `src` keeps ownership). */
inline void AnyViewToLegacyTVMArgValue(const Any& src, TVMValue* value, int* type_code,
                                       TVMByteArray* bytes_storage = nullptr) {
  TVMFFIAnyToLegacyTVMArgValue(&src.raw(), value, type_code, bytes_storage);
}
void AnyViewToLegacyTVMArgValue(AnyView&& src, TVMValue* value, int* type_code,
                                TVMByteArray* bytes_storage = nullptr) = delete;

/*!
 * \brief A packed argument list in the legacy form, with the storage its values point into
 *  (small strings and small bytes). Valid while the viewed arguments live; not copyable.
 */
class LegacyArgs {
 public:
  /*! \brief Translates `num_args` views; TypeError naming the argument that has no form. */
  LegacyArgs(const TVMFFIAny* args, int32_t num_args)
      : raw_(args, args + num_args), values_(num_args), codes_(num_args), bytes_(num_args) {
    for (int32_t i = 0; i < num_args; ++i) {
      try {
        TVMFFIAnyToLegacyTVMArgValue(&raw_[i], &values_[i], &codes_[i], &bytes_[i]);
      } catch (const Error& err) {
        TVM_FFI_THROW(TypeError) << "argument #" << i << ": " << err.message();
      }
    }
  }
  LegacyArgs(const LegacyArgs&) = delete;
  LegacyArgs& operator=(const LegacyArgs&) = delete;

  TVMValue* values() noexcept { return values_.data(); }
  int* type_codes() noexcept { return codes_.data(); }
  int size() const noexcept { return static_cast<int>(values_.size()); }

 private:
  // A copy of the views: small strings point into it, so it never moves after construction.
  std::vector<TVMFFIAny> raw_;
  std::vector<TVMValue> values_;
  std::vector<int> codes_;
  std::vector<TVMByteArray> bytes_;
};

/*!
 * \brief An ffi::Function that calls `func` (compiled for the old backend ABI) with its
 *  arguments translated, and returns its result translated back (MoveLegacyTVMArgValueToAny).
 *  A non-zero return raises the error the callee left in this runtime's slot, or a
 *  RuntimeError naming the code when it left none.
 */
inline Function FunctionFromLegacyBackendPackedCFunc(TVMBackendPackedCFunc func,
                                                     void* resource_handle) {
  return Function::FromPacked([func, resource_handle](PackedArgs args) -> Any {
    LegacyArgs legacy(args.data(), args.size());
    TVMValue ret_value;
    ret_value.v_int64 = 0;
    int ret_code = kTVMNullptr;
    int rc = func(legacy.values(), legacy.type_codes(), legacy.size(), &ret_value, &ret_code,
                  resource_handle);
    if (rc != 0) {
      TVMFFIObjectHandle raised = nullptr;
      TVMFFIErrorMoveFromRaised(&raised);
      if (raised != nullptr) {
        TVMFFIErrorSetRaised(raised);
        TVMFFIObjectDecRef(raised);
        throw Error::FromRaised();
      }
      TVM_FFI_THROW(RuntimeError) << "legacy packed function returned " << rc
                                  << " without setting an error";
    }
    return MoveLegacyTVMArgValueToAny(ret_value, ret_code);
  });
}

}  // namespace tvm::ffi

#endif  // TVM_FFI_EXTRA_LEGACY_ABI_H_
