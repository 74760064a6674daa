/*
 * module_bridge.h -- how the Rust runtime and C++ modules reach each other (internal to
 * libtvm_ffi.so; mirrored by crates/tvm-runtime/src/module_cxx.rs).
 *
 * Every module of the process is a tvm::ffi::ModuleObj in memory (tvm/ffi/module.h): a vtable
 * pointer 8 bytes before the handle. Two tables, both TVMFFIModuleMethods (the C form of the
 * virtual functions, each returning 0, or -1 with the error in the thread's slot):
 *
 *   - the runtime gives each module it makes a table of Rust functions; the vtable of those
 *     modules (NativeModuleObj) calls them and throws their errors as tvm::ffi::Error;
 *   - the runtime calls a module made by C++ code through the table of the bridge, whose
 *     functions make the virtual call and catch what it throws into the error slot.
 *
 * The runtime gets the bridge from the global function `ffi.CxxModuleBridge` (an opaque pointer
 * to the static TVMFFICxxModuleBridge), so it needs no link-time reference to the C++ half.
 */
#ifndef TVM_FFI_CXX_MODULE_BRIDGE_H_
#define TVM_FFI_CXX_MODULE_BRIDGE_H_

#include <tvm/ffi/c_api.h>

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief A module's virtual functions in C form. Results are owning values. */
typedef struct {
  /*! \brief The kind (a String). */
  int (*kind)(TVMFFIObjectHandle self, TVMFFIAny* out);
  int (*get_property_mask)(TVMFFIObjectHandle self, int32_t* out);
  /*! \brief The module's own function (a Function, or None). */
  int (*get_function)(TVMFFIObjectHandle self, const TVMFFIByteArray* name, TVMFFIAny* out);
  int (*implements_function)(TVMFFIObjectHandle self, const TVMFFIByteArray* name, int32_t* out);
  /*! \brief Documentation and metadata of a function (a String, or None). */
  int (*get_function_doc)(TVMFFIObjectHandle self, const TVMFFIByteArray* name, TVMFFIAny* out);
  int (*get_function_metadata)(TVMFFIObjectHandle self, const TVMFFIByteArray* name,
                               TVMFFIAny* out);
  int (*write_to_file)(TVMFFIObjectHandle self, const TVMFFIByteArray* file_name,
                       const TVMFFIByteArray* format);
  /*! \brief The write formats (an Array of Strings). */
  int (*get_write_formats)(TVMFFIObjectHandle self, TVMFFIAny* out);
  /*! \brief The serialized module (Bytes). */
  int (*save_to_bytes)(TVMFFIObjectHandle self, TVMFFIAny* out);
  /*! \brief The source in a format (a String). */
  int (*inspect_source)(TVMFFIObjectHandle self, const TVMFFIByteArray* format, TVMFFIAny* out);
  int (*import_module)(TVMFFIObjectHandle self, TVMFFIObjectHandle other);
  int (*clear_imports)(TVMFFIObjectHandle self);
} TVMFFIModuleMethods;

/*! \brief What `ffi.CxxModuleBridge` points at. */
typedef struct {
  /*! \brief sizeof(TVMFFICxxModuleBridge), checked by the runtime. */
  uint64_t size;
  /*!
   * \brief The vtable pointer of the runtime's modules. Such a module has, after the 48 bytes of
   *  ModuleObj (from the vtable pointer), its TVMFFIModuleMethods* and its kind (a NUL-terminated
   *  string), at handle + 40 and handle + 48.
   */
  const void* native_vtable;
  /*! \brief Virtual calls on any module (catching what the callee throws). */
  TVMFFIModuleMethods virtual_call;
} TVMFFICxxModuleBridge;

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // TVM_FFI_CXX_MODULE_BRIDGE_H_
