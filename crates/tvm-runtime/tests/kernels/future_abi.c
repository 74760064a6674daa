/* A library that records a future ABI major version. */
#include <stdint.h>

__attribute__((visibility("default"))) const uint32_t __tvm_ffi__abi_version = (7u << 16) | 2u;
