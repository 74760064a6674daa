/*
 * tvm/ffi/ffi.h -- the whole header-only C++ layer over c_api.h (C++17, namespace tvm::ffi):
 *
 *   object.h     ObjectRef: strong references with the inline reference-count protocol
 *   error.h      Error, TVM_FFI_THROW, TVM_FFI_CHECK, SetRaisedFromCurrentException
 *   string.h     String, Bytes
 *   any.h        AnyView, Any, TypeTraits (conversions), TypeIndexToTypeKey, UserTypeName
 *   function.h   Function: calls, globals, FromTyped / FromPacked
 *   container.h  Array (ffi.Array / ffi.List)
 *   tensor.h     TensorView
 *   export.h     TVM_FFI_DLL_EXPORT_TYPED_FUNC[_DOC], TVM_FFI_REGISTER_GLOBAL,
 *                TVM_FFI_STATIC_INIT_BLOCK
 */
#ifndef TVM_FFI_FFI_H_
#define TVM_FFI_FFI_H_

#include <tvm/ffi/any.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/container.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/export.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/module.h>
#include <tvm/ffi/optional.h>
#include <tvm/ffi/object.h>
#include <tvm/ffi/serialization.h>
#include <tvm/ffi/string.h>
#include <tvm/ffi/structural.h>
#include <tvm/ffi/tensor.h>

#endif  // TVM_FFI_FFI_H_
