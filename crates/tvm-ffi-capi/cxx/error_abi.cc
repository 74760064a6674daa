// The vtable and typeinfo of tvm::ffi::Error, defined here so that the library exports them as
// apache-tvm-ffi does (every member of Error is inline, so they are emitted where they are used;
// this file uses them).
#include <tvm/ffi/error.h>

#include <typeinfo>

namespace tvm::ffi::details {

/*! \brief The typeinfo of Error (referencing it emits the vtable, typeinfo and name). */
const std::type_info& ErrorTypeInfo() {
  static_assert(sizeof(Error) == 16, "Error is a vtable pointer and an object reference");
  return typeid(Error);
}

}  // namespace tvm::ffi::details
