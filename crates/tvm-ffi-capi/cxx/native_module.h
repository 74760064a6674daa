// The vtable of the modules the Rust runtime makes (native_module.cc).
#ifndef TVM_FFI_CXX_NATIVE_MODULE_H_
#define TVM_FFI_CXX_NATIVE_MODULE_H_

#include <tvm/ffi/module.h>

#include "module_bridge.h"

namespace tvm::ffi::details {

/*! \brief The vtable pointer to store before the header of a module made by the runtime. */
const void* NativeModuleVtable();

}  // namespace tvm::ffi::details

#endif  // TVM_FFI_CXX_NATIVE_MODULE_H_
