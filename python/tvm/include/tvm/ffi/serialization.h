/*
 * tvm/ffi/serialization.h -- values to and from text: JSON (json::Parse, json::Stringify), JSON
 * graphs of object structures (ToJSONGraph, FromJSONGraph), the printed form (ReprPrint), and deep
 * copy and recursive comparison of values.
 *
 * The functions are defined in libtvm_ffi.so under the names C++ libraries built against Apache
 * TVM FFI link; they call the runtime's `ffi.json.*`, `ffi.ToJSONGraph`, `ffi.ReprPrint`,
 * `ffi.DeepCopy` and `ffi.Recursive*` functions. Failures are thrown as tvm::ffi::Error.
 */
#ifndef TVM_FFI_SERIALIZATION_H_
#define TVM_FFI_SERIALIZATION_H_

#include <tvm/ffi/any.h>
#include <tvm/ffi/optional.h>
#include <tvm/ffi/string.h>

#include <cstdint>

namespace tvm::ffi {
namespace json {

/*! \brief A JSON value: None, bool, int, float, String, Array or Map. */
using Value = Any;

/*!
 * \brief Parses JSON text. With `error_msg`, a syntax error is stored there and None returned
 *  instead of thrown.
 */
TVM_FFI_DLL Value Parse(const String& json_str, String* error_msg = nullptr);
/*! \brief JSON text of `value`, indented by `indent` spaces per level when given. */
TVM_FFI_DLL String Stringify(const Value& value, const Optional<int>& indent = std::nullopt);

}  // namespace json

/*! \brief The JSON graph of `value` (shared objects written once), with optional metadata. */
TVM_FFI_DLL json::Value ToJSONGraph(const Any& value, const Any& metadata = Any());
/*! \brief The value a JSON graph describes. */
TVM_FFI_DLL Any FromJSONGraph(const json::Value& value);
/*! \brief The printed form of `value`. */
TVM_FFI_DLL String ReprPrint(const Any& value);
/*! \brief A deep copy of `value` (shared references and cycles kept). */
TVM_FFI_DLL Any DeepCopy(const Any& value);
/*! \brief A hash that agrees with RecursiveEq. */
TVM_FFI_DLL int64_t RecursiveHash(const Any& value);
/*! \brief Recursive comparison of values, field by field. */
TVM_FFI_DLL bool RecursiveEq(const Any& lhs, const Any& rhs);
TVM_FFI_DLL bool RecursiveLt(const Any& lhs, const Any& rhs);
TVM_FFI_DLL bool RecursiveLe(const Any& lhs, const Any& rhs);
TVM_FFI_DLL bool RecursiveGt(const Any& lhs, const Any& rhs);
TVM_FFI_DLL bool RecursiveGe(const Any& lhs, const Any& rhs);

}  // namespace tvm::ffi

#endif  // TVM_FFI_SERIALIZATION_H_
