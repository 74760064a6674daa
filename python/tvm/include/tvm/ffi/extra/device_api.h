/*
 * tvm/ffi/extra/device_api.h -- the C form of the runtime's device API: a table of functions
 * that adds a kind of device to a running process.
 *
 * A backend library (C, C++ or Rust; loaded by tvm.base.load_backend_libs, typically from a
 * `tvm.backends` entry point) fills a TVMFFIDeviceAPITable and registers it for one DLPack
 * device type with TVMFFIDeviceAPIRegister. From then on tensors on that device can be
 * allocated, copied, synchronized and queried from every language, exactly like the devices the
 * runtime ships.
 *
 * Rules:
 *  - Every function returns 0 on success; on failure it sets the calling thread's error with
 *    TVMFFIErrorSetRaisedFromCStr (or TVMFFIErrorSetRaised) and returns -1. The runtime turns that
 *    error into the caller's exception (a Python ValueError for kind "ValueError", and so on).
 *  - `self` is passed back unchanged to every function; the runtime never reads it.
 *  - The functions may be called from any thread, concurrently; a backend locks what it shares.
 *  - Pointers and streams are the backend's own: the runtime only hands a backend what that
 *    backend produced, or host memory on the CPU side of a copy.
 *  - The runtime checks shapes, dtypes and that the device exists before calling `copy`, and
 *    calls `exist`-queries (attr kind 0) for any device index.
 *  - The table is copied at registration; `release(self)` (if not NULL) runs when the process's
 *    runtime is done with it, which may be never.
 *  - A second registration for the same device type fails with a ValueError.
 */
#ifndef TVM_FFI_EXTRA_DEVICE_API_H_
#define TVM_FFI_EXTRA_DEVICE_API_H_

#include <tvm/ffi/c_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief The version of the table's layout; struct_size grows with each addition. */
#define TVM_FFI_DEVICE_API_TABLE_VERSION 1

/*!
 * \brief Attribute kinds of TVMFFIDeviceAPITable::get_attr (TVM's DeviceAttrKind numbering).
 * Ints are written as kTVMFFIInt, text as a raw C string the runtime copies at once
 * (kTVMFFIRawStr, pointing at storage the backend keeps alive), unknown attributes as kTVMFFINone.
 */
typedef enum {
  kTVMFFIDeviceAttrExist = 0,
  kTVMFFIDeviceAttrMaxThreadsPerBlock = 1,
  kTVMFFIDeviceAttrWarpSize = 2,
  kTVMFFIDeviceAttrMaxSharedMemoryPerBlock = 3,
  kTVMFFIDeviceAttrComputeVersion = 4,
  kTVMFFIDeviceAttrDeviceName = 5,
  kTVMFFIDeviceAttrMaxClockRate = 6,
  kTVMFFIDeviceAttrMultiProcessorCount = 7,
  kTVMFFIDeviceAttrMaxThreadDimensions = 8,
  kTVMFFIDeviceAttrMaxRegistersPerBlock = 9,
  kTVMFFIDeviceAttrGcnArch = 10,
  kTVMFFIDeviceAttrApiVersion = 11,
  kTVMFFIDeviceAttrDriverVersion = 12,
  kTVMFFIDeviceAttrL2CacheSizeBytes = 13,
  kTVMFFIDeviceAttrTotalGlobalMemory = 14,
  kTVMFFIDeviceAttrAvailableGlobalMemory = 15,
  kTVMFFIDeviceAttrImagePitchAlignment = 16,
} TVMFFIDeviceAttrKind;

/*! \brief The functions of one kind of device. Every entry but `release` is required. */
typedef struct TVMFFIDeviceAPITable {
  /*! \brief sizeof(TVMFFIDeviceAPITable) as the backend was compiled; checked at registration. */
  uint32_t struct_size;
  /*! \brief TVM_FFI_DEVICE_API_TABLE_VERSION as the backend was compiled. */
  uint32_t version;
  /*! \brief The backend's context, passed to every function. */
  void* self;
  /*! \brief A short name for messages ("mydev"); NUL-terminated, copied at registration. */
  const char* name;
  /*! \brief Writes attribute `kind` of `device` to `out` (see TVMFFIDeviceAttrKind). */
  int (*get_attr)(void* self, DLDevice device, int32_t kind, TVMFFIAny* out);
  /*! \brief Allocates `nbytes` aligned to `alignment` (a power of two) into `*out`. */
  int (*alloc)(void* self, DLDevice device, size_t nbytes, size_t alignment,
               DLDataType dtype_hint, void** out);
  /*! \brief Frees memory from `alloc` (queued work on it completes first). */
  int (*free)(void* self, DLDevice device, void* ptr);
  /*!
   * \brief Copies the elements of `from` into `to` (same shape and dtype; any strides and byte
   * offsets) on `stream`. One side may be on the CPU. The copy may finish only when the stream
   * is synchronized.
   */
  int (*copy)(void* self, const DLTensor* from, const DLTensor* to, TVMFFIStreamHandle stream);
  /*! \brief Creates a stream on `device` into `*out` (NULL for backends without streams). */
  int (*stream_create)(void* self, DLDevice device, TVMFFIStreamHandle* out);
  /*! \brief Frees a stream from `stream_create`. */
  int (*stream_free)(void* self, DLDevice device, TVMFFIStreamHandle stream);
  /*! \brief Waits for the work queued on `stream` (NULL: the default stream). */
  int (*stream_sync)(void* self, DLDevice device, TVMFFIStreamHandle stream);
  /*! \brief Optional: releases `self` when the runtime no longer needs the table. */
  void (*release)(void* self);
} TVMFFIDeviceAPITable;

/*!
 * \brief Registers `table` for `device_type` through the global function ffi.DeviceAPIRegister.
 * \return 0; -1 with the error raised (no such function in this runtime, a NULL entry, a wrong
 *  struct_size or version, or a backend already registered for the type).
 */
static inline int TVMFFIDeviceAPIRegister(int32_t device_type, const TVMFFIDeviceAPITable* table) {
  TVMFFIByteArray name = {"ffi.DeviceAPIRegister", sizeof("ffi.DeviceAPIRegister") - 1};
  TVMFFIObjectHandle func = NULL;
  if (TVMFFIFunctionGetGlobal(&name, &func) != 0) return -1;
  if (func == NULL) {
    TVMFFIErrorSetRaisedFromCStr("RuntimeError",
                                 "ffi.DeviceAPIRegister is not registered: the runtime in this "
                                 "process has no device registry");
    return -1;
  }
  TVMFFIAny args[2];
  args[0].type_index = kTVMFFIInt;
  args[0].zero_padding = 0;
  args[0].v_int64 = device_type;
  args[1].type_index = kTVMFFIOpaquePtr;
  args[1].zero_padding = 0;
  args[1].v_ptr = (void*)table;
  TVMFFIAny result;
  result.type_index = kTVMFFINone;
  result.zero_padding = 0;
  result.v_int64 = 0;
  int status = TVMFFIFunctionCall(func, args, 2, &result);
  TVMFFIObjectDecRef(func);
  return status;
}

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // TVM_FFI_EXTRA_DEVICE_API_H_
