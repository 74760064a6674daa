# The CMake package of the tvm package's runtime library: find_package(tvm_ffi CONFIG) with
# tvm_ffi_DIR set to this directory (python -m tvm.support.libinfo --cmakedir) gives the imported
# target tvm_ffi::tvm_ffi, which carries the include directory and links libtvm_ffi.so.
get_filename_component(_tvm_ffi_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)

set(tvm_ffi_INCLUDE_DIR "${_tvm_ffi_prefix}/include")
set(tvm_ffi_LIBRARY "${_tvm_ffi_prefix}/lib/libtvm_ffi.so")
if(NOT EXISTS "${tvm_ffi_LIBRARY}")
  set(tvm_ffi_FOUND FALSE)
  set(tvm_ffi_NOT_FOUND_MESSAGE "the runtime library is missing: ${tvm_ffi_LIBRARY}")
  return()
endif()

if(NOT TARGET tvm_ffi::tvm_ffi)
  add_library(tvm_ffi::tvm_ffi SHARED IMPORTED)
  set_target_properties(tvm_ffi::tvm_ffi PROPERTIES
    IMPORTED_LOCATION "${tvm_ffi_LIBRARY}"
    IMPORTED_SONAME "libtvm_ffi.so"
    INTERFACE_INCLUDE_DIRECTORIES "${tvm_ffi_INCLUDE_DIR}")
endif()
set(tvm_ffi_FOUND TRUE)
unset(_tvm_ffi_prefix)
