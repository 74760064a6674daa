// JSON, JSON graphs, printing, deep copy and recursive comparison (tvm/ffi/serialization.h),
// through the runtime's global functions.
#include <tvm/ffi/serialization.h>

#include "runtime_calls.h"

namespace tvm::ffi {
namespace json {

Value Parse(const String& json_str, String* error_msg) {
  if (error_msg == nullptr) return TVM_FFI_CXX_GLOBAL("ffi.json.Parse")(json_str);
  try {
    return TVM_FFI_CXX_GLOBAL("ffi.json.Parse")(json_str);
  } catch (const Error& err) {
    *error_msg = String(err.message());
    return Any();
  }
}

String Stringify(const Value& value, const Optional<int>& indent) {
  return TVM_FFI_CXX_GLOBAL("ffi.json.Stringify")(value, indent.any()).cast<String>();
}

}  // namespace json

json::Value ToJSONGraph(const Any& value, const Any& metadata) {
  return TVM_FFI_CXX_GLOBAL("ffi.ToJSONGraph")(value, metadata);
}

Any FromJSONGraph(const json::Value& value) {
  return TVM_FFI_CXX_GLOBAL("ffi.FromJSONGraph")(value);
}

String ReprPrint(const Any& value) {
  return TVM_FFI_CXX_GLOBAL("ffi.ReprPrint")(value).cast<String>();
}

Any DeepCopy(const Any& value) { return TVM_FFI_CXX_GLOBAL("ffi.DeepCopy")(value); }

int64_t RecursiveHash(const Any& value) {
  return TVM_FFI_CXX_GLOBAL("ffi.RecursiveHash")(value).cast<int64_t>();
}

bool RecursiveEq(const Any& lhs, const Any& rhs) {
  return TVM_FFI_CXX_GLOBAL("ffi.RecursiveEq")(lhs, rhs).cast<bool>();
}

bool RecursiveLt(const Any& lhs, const Any& rhs) {
  return TVM_FFI_CXX_GLOBAL("ffi.RecursiveLt")(lhs, rhs).cast<bool>();
}

bool RecursiveLe(const Any& lhs, const Any& rhs) {
  return TVM_FFI_CXX_GLOBAL("ffi.RecursiveLe")(lhs, rhs).cast<bool>();
}

bool RecursiveGt(const Any& lhs, const Any& rhs) {
  return TVM_FFI_CXX_GLOBAL("ffi.RecursiveGt")(lhs, rhs).cast<bool>();
}

bool RecursiveGe(const Any& lhs, const Any& rhs) {
  return TVM_FFI_CXX_GLOBAL("ffi.RecursiveGe")(lhs, rhs).cast<bool>();
}

}  // namespace tvm::ffi
