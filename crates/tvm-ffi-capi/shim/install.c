/*
 * The table the stubs of shim.S jump through, and the one function that fills it. No libc: the
 * shim links against nothing.
 */
#include <stddef.h>

#include "c_api_count.h"

__attribute__((visibility("hidden"))) const void* tvm_ffi_shim_table[TVM_FFI_SHIM_SLOTS];

/* Copies `count` addresses into the table; returns 0, or -1 when `count` is not the shim's. */
__attribute__((visibility("default"))) int tvm_ffi_shim_install(const void* const* addresses,
                                                                 size_t count) {
  if (count != TVM_FFI_SHIM_SLOTS) return -1;
  for (size_t i = 0; i < count; ++i) tvm_ffi_shim_table[i] = addresses[i];
  return 0;
}
