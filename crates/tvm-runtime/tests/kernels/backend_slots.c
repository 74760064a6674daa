/* A kernel library laid out as TVM compiles one: it calls the runtime only through `void*`
 * slots named `__TVMBackend*`, which the loader fills. `parallel_sum(n)` sums 0..n-1 in a
 * parallel loop whose tasks each copy their range into a workspace first, then meet at a
 * barrier; `slots_filled()` says whether every slot was filled. */
#include <stdint.h>
#include <tvm/ffi/c_api.h>
#include <tvm/runtime/c_backend_api.h>

TVM_FFI_DLL_EXPORT void* __TVMBackendParallelLaunch = NULL;
TVM_FFI_DLL_EXPORT void* __TVMBackendParallelBarrier = NULL;
TVM_FFI_DLL_EXPORT void* __TVMBackendAllocWorkspace = NULL;
TVM_FFI_DLL_EXPORT void* __TVMBackendFreeWorkspace = NULL;
TVM_FFI_DLL_EXPORT void* __TVMFFIErrorSetRaisedFromCStr = NULL;

typedef struct {
  int64_t n;
  int64_t partial[256];
} SumClosure;

static int sum_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  SumClosure* closure = (SumClosure*)cdata;
  int64_t begin = closure->n * task_id / penv->num_task;
  int64_t end = closure->n * (task_id + 1) / penv->num_task;
  int64_t count = end - begin;
  int64_t* scratch = ((void* (*)(int, int, uint64_t, int, int))__TVMBackendAllocWorkspace)(
      kDLCPU, 0, (uint64_t)(count > 0 ? count : 1) * sizeof(int64_t), kDLInt, 64);
  if (scratch == NULL) return -1;
  for (int64_t i = 0; i < count; ++i) scratch[i] = begin + i;
  int64_t sum = 0;
  for (int64_t i = 0; i < count; ++i) sum += scratch[i];
  closure->partial[task_id] = sum;
  if (((int (*)(int, int, void*))__TVMBackendFreeWorkspace)(kDLCPU, 0, scratch) != 0) return -1;
  return ((int (*)(int, TVMParallelGroupEnv*))__TVMBackendParallelBarrier)(task_id, penv);
}

TVM_FFI_DLL_EXPORT int __tvm_ffi_parallel_sum(void* handle, const TVMFFIAny* args,
                                              int32_t num_args, TVMFFIAny* result) {
  (void)handle;
  if (num_args != 1 || args[0].type_index != kTVMFFIInt || args[0].v_int64 < 0) {
    ((void (*)(const char*, const char*))__TVMFFIErrorSetRaisedFromCStr)(
        "TypeError", "parallel_sum expects a count");
    return -1;
  }
  SumClosure closure = {args[0].v_int64, {0}};
  if (((int (*)(FTVMParallelLambda, void*, int))__TVMBackendParallelLaunch)(sum_task, &closure,
                                                                             0) != 0) {
    return -1;
  }
  int64_t total = 0;
  for (int task = 0; task < 256; ++task) total += closure.partial[task];
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = total;
  return 0;
}

TVM_FFI_DLL_EXPORT int __tvm_ffi_slots_filled(void* handle, const TVMFFIAny* args,
                                              int32_t num_args, TVMFFIAny* result) {
  (void)handle, (void)args, (void)num_args;
  result->type_index = kTVMFFIBool;
  result->zero_padding = 0;
  result->v_int64 = __TVMBackendParallelLaunch && __TVMBackendParallelBarrier &&
                    __TVMBackendAllocWorkspace && __TVMBackendFreeWorkspace &&
                    __TVMFFIErrorSetRaisedFromCStr;
  return 0;
}
