/*!
 * \file tvm/runtime/c_backend_api.h
 * \brief The functions compiled kernels call in the runtime: parallel loops, barriers among
 *  their tasks, and workspaces.
 *
 * A library compiled by TVM does not link these: it holds `void*` slots named
 * `__TVMBackendParallelLaunch` and so on, which the runtime's loader fills when it loads the
 * library (a library with a slot the runtime cannot fill is refused). `libtvm_ffi.so` also
 * exports them by these names, for C code that calls them directly.
 *
 * Every function reports failure through the calling thread's error slot of the FFI (read it
 * with TVMFFIErrorMoveFromRaised).
 */
#ifndef TVM_RUNTIME_C_BACKEND_API_H_
#define TVM_RUNTIME_C_BACKEND_API_H_

#include <stdint.h>
#include <tvm/ffi/c_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/*!
 * \brief Scratch memory of `nbytes` on a device for a kernel, aligned to 64 bytes. Blocks are
 *  pooled per thread: free one on the thread that allocated it.
 * \param device_type The DLPack device type (kDLCPU for host memory).
 * \param device_id The device index.
 * \param nbytes The size; 0 reserves a minimal block.
 * \param dtype_code_hint The DLPack type code of the elements the memory will hold.
 * \param dtype_bits_hint Their width in bits.
 * \return The memory, or NULL with a MemoryError (or the device's error) raised.
 */
TVM_FFI_DLL void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                                           int dtype_code_hint, int dtype_bits_hint);

/*!
 * \brief Frees memory from TVMBackendAllocWorkspace, in any order.
 * \return 0, or -1 with a ValueError raised when the calling thread did not allocate `ptr` on
 *  that device (or freed it already); such a pointer is left alone.
 */
TVM_FFI_DLL int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr);

/*! \brief The group of tasks of one parallel launch, as each task sees it. */
typedef struct {
  /*! \brief The launch's barrier, for TVMBackendParallelBarrier (NULL when num_task is 1). */
  void* sync_handle;
  /*! \brief How many tasks the launch runs; task ids are 0 .. num_task - 1. */
  int32_t num_task;
} TVMParallelGroupEnv;

/*! \brief One task of a parallel loop: 0 on success, else non-zero with an error raised. */
typedef int (*FTVMParallelLambda)(int task_id, TVMParallelGroupEnv* penv, void* cdata);

/*!
 * \brief Runs `flambda(task_id, penv, cdata)` for every task of a parallel loop, task 0 on the
 *  calling thread and the others on the runtime's thread pool, all at once, and waits for them.
 *
 * `num_task` 0 asks for one task per thread of the pool (TVM_NUM_THREADS, else one per core);
 * more tasks than the pool has threads run as many as it has. A launch from inside a task runs
 * serially as a single task. Read the number of tasks from `penv->num_task`.
 * \return 0, or -1 with the error of a failed task raised (its kind and message).
 */
TVM_FFI_DLL int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task);

/*!
 * \brief Waits until every task of the calling task's launch has reached this barrier.
 * \return 0, or -1 with an error raised when another task of the launch failed or `penv` is not
 *  the one the launch passed.
 */
TVM_FFI_DLL int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv);

/*!
 * \brief Finds a function for generated code: in the imports of the module whose context is
 *  `mod_node`, then in the global registry (TVMFFIEnvModLookupFromImports under its older name).
 * \param out Receives the function, borrowed from the module.
 */
TVM_FFI_DLL int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name,
                                         TVMFFIObjectHandle* out);

#ifdef __cplusplus
}  // extern "C"
#endif
#endif  // TVM_RUNTIME_C_BACKEND_API_H_
