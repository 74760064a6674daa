/*
 * tvm/ffi/extra/c_env_api.h -- the environment functions of the C ABI (TVMFFIEnv*: streams,
 * tensor allocator, signal checks, module symbols).
 *
 * They are declared in tvm/ffi/c_api.h together with the rest of the ABI; this header exists so
 * that code written for apache-tvm-ffi's layout of the headers keeps compiling.
 */
#ifndef TVM_FFI_EXTRA_C_ENV_API_H_
#define TVM_FFI_EXTRA_C_ENV_API_H_

#include <tvm/ffi/c_api.h>

#endif  // TVM_FFI_EXTRA_C_ENV_API_H_
