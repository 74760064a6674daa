/*
 * tvm/ffi/extra/shared_state.h -- process-wide state that every copy of the Rust safe API in a
 * process shares, kept by the runtime library beside the rest of the process state.
 *
 * Each library built from the Rust crates (the runtime library, the Python extension, an
 * out-of-tree backend) holds its own copy of the safe API's code; what those copies must agree
 * on lives here, reached through these functions: the reentrant locks that guard the contents
 * of the shared-mutable containers (ffi.List, ffi.Dict), and the read-only marks of tensors
 * whose producer forbade writes. They are not part of Apache TVM FFI's ABI; C code never needs
 * them unless it mutates those containers from several threads.
 */
#ifndef TVM_FFI_EXTRA_SHARED_STATE_H_
#define TVM_FFI_EXTRA_SHARED_STATE_H_

#include <tvm/ffi/c_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/*!
 * \brief Takes the reentrant lock that guards the contents of the container at `obj` (one of a
 *  fixed set of locks, chosen by address), waiting while another thread holds it.
 * \return How many times the calling thread now holds that lock (1: outermost), or -1 on failure.
 */
TVM_FFI_DLL int32_t TVMFFIExtContainerLock(const void* obj);

/*! \brief Releases one hold of the lock TVMFFIExtContainerLock took for `obj`. */
TVM_FFI_DLL void TVMFFIExtContainerUnlock(const void* obj);

/*!
 * \brief Marks the live tensor at `obj` read-only (`read_only` non-zero) or removes the mark
 *  (when the tensor is destroyed).
 * \return 0, or -1 on failure.
 */
TVM_FFI_DLL int TVMFFIExtTensorMarkReadOnly(const void* obj, int32_t read_only);

/*! \brief 1 when the tensor at `obj` is marked read-only, else 0. */
TVM_FFI_DLL int32_t TVMFFIExtTensorIsReadOnly(const void* obj);

#ifdef __cplusplus
}  // extern "C"
#endif
#endif  // TVM_FFI_EXTRA_SHARED_STATE_H_
