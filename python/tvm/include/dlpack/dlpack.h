/*
 * dlpack/dlpack.h -- the DLPack 1.3 tensor exchange structs, as used by the tvm C ABI.
 *
 * This file is the tvm project's own text. It declares the same names and the same binary
 * layout as DLPack 1.3, so tensors can move between this runtime and any framework that speaks
 * DLPack (PyTorch, JAX, NumPy, CuPy, ...) without copies.
 *
 * Layout summary (LP64):
 *   DLDevice                  8 bytes  {int32 device_type @0, int32 device_id @4}
 *   DLDataType                4 bytes  {uint8 code @0, uint8 bits @1, uint16 lanes @2}
 *   DLTensor                 48 bytes
 *   DLManagedTensor          64 bytes
 *   DLManagedTensorVersioned 80 bytes
 *
 * It compiles as C99, C11 and C++.
 */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

// [DLPackMacros.begin]
/*! \brief Major version of the DLPack ABI described here. A major bump breaks the ABI. */
#define DLPACK_MAJOR_VERSION 1
/*! \brief Minor version of the DLPack ABI described here. Minor bumps only add. */
#define DLPACK_MINOR_VERSION 3

/*! \brief Export/import marker for functions of a library that implements DLPack helpers. */
#ifndef DLPACK_DLL
#if defined(_WIN32)
#ifdef DLPACK_EXPORTS
#define DLPACK_DLL __declspec(dllexport)
#else
#define DLPACK_DLL
#endif
#else
#define DLPACK_DLL
#endif
#endif

/*! \brief `extern "C"` under C++, nothing under C. */
#ifndef DLPACK_EXTERN_C
#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif
#endif
// [DLPackMacros.end]

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// [DLPackVersion.begin]
/*!
 * \brief A DLPack ABI version, carried by DLManagedTensorVersioned.
 *
 * A consumer must refuse a tensor whose major version differs from the one it was built with.
 */
typedef struct {
  /*! \brief Major version (DLPACK_MAJOR_VERSION of the producer). */
  uint32_t major;
  /*! \brief Minor version (DLPACK_MINOR_VERSION of the producer). */
  uint32_t minor;
} DLPackVersion;
// [DLPackVersion.end]

// [DLDeviceType.begin]
/*!
 * \brief Kinds of device a tensor's memory can live on.
 *
 * The numbering is fixed by DLPack; gaps (0, 5, 6) are retired values and must not be reused.
 */
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  /*! \brief Host memory (malloc-style). */
  kDLCPU = 1,
  /*! \brief CUDA device memory. */
  kDLCUDA = 2,
  /*! \brief Page-locked host memory allocated through CUDA (cudaMallocHost). */
  kDLCUDAHost = 3,
  /*! \brief OpenCL buffers. */
  kDLOpenCL = 4,
  /*! \brief Vulkan buffers. */
  kDLVulkan = 7,
  /*! \brief Metal buffers (Apple). */
  kDLMetal = 8,
  /*! \brief Verilog simulator buffers. */
  kDLVPI = 9,
  /*! \brief ROCm/HIP device memory. */
  kDLROCM = 10,
  /*! \brief Page-locked host memory allocated through ROCm (hipMallocHost). */
  kDLROCMHost = 11,
  /*! \brief Reserved for device types defined outside DLPack. */
  kDLExtDev = 12,
  /*! \brief CUDA managed (unified) memory. */
  kDLCUDAManaged = 13,
  /*! \brief oneAPI unified shared memory (SYCL). */
  kDLOneAPI = 14,
  /*! \brief WebGPU buffers. */
  kDLWebGPU = 15,
  /*! \brief Qualcomm Hexagon DSP memory. */
  kDLHexagon = 16,
  /*! \brief Microsoft MAIA accelerator memory. */
  kDLMAIA = 17,
  /*! \brief AWS Trainium accelerator memory. */
  kDLTrn = 18,
} DLDeviceType;
// [DLDeviceType.end]

// [DLDevice.begin]
/*! \brief A device: its kind and its ordinal among devices of that kind. 8 bytes. */
typedef struct {
  /*! \brief The kind of device (a DLDeviceType value; stored as 4 bytes). */
  DLDeviceType device_type;
  /*! \brief The device ordinal, 0 for the first device of the kind. */
  int32_t device_id;
} DLDevice;
// [DLDevice.end]

// [DLDataTypeCode.begin]
/*!
 * \brief Element type families, stored in DLDataType::code (one byte).
 *
 * For the float8/float6/float4 families the code names the exact format; `bits` then holds
 * 8, 6 or 4. Codes 129 and up are free for custom types.
 */
typedef enum {
  /*! \brief Signed two's complement integer. */
  kDLInt = 0U,
  /*! \brief Unsigned integer. */
  kDLUInt = 1U,
  /*! \brief IEEE 754 binary floating point (float16/32/64). */
  kDLFloat = 2U,
  /*! \brief An opaque handle (pointer-sized); also "void" when bits and lanes are 0. */
  kDLOpaqueHandle = 3U,
  /*! \brief bfloat16. */
  kDLBfloat = 4U,
  /*! \brief Complex number: two floats of bits/2 each (real part first). */
  kDLComplex = 5U,
  /*! \brief Boolean (8 bits per element unless stated otherwise). */
  kDLBool = 6U,
  /*! \brief 8-bit float, 3 exponent bits, 4 mantissa bits. */
  kDLFloat8_e3m4 = 7U,
  /*! \brief 8-bit float, 4 exponent bits, 3 mantissa bits (IEEE-like, with infinities). */
  kDLFloat8_e4m3 = 8U,
  /*! \brief 8-bit float e4m3, exponent bias 11, finite only, NaN as negative zero. */
  kDLFloat8_e4m3b11fnuz = 9U,
  /*! \brief 8-bit float e4m3, finite only (OCP FP8 E4M3). */
  kDLFloat8_e4m3fn = 10U,
  /*! \brief 8-bit float e4m3, finite only, NaN as negative zero. */
  kDLFloat8_e4m3fnuz = 11U,
  /*! \brief 8-bit float, 5 exponent bits, 2 mantissa bits (OCP FP8 E5M2). */
  kDLFloat8_e5m2 = 12U,
  /*! \brief 8-bit float e5m2, finite only, NaN as negative zero. */
  kDLFloat8_e5m2fnuz = 13U,
  /*! \brief 8-bit exponent-only scale format (OCP MX E8M0). */
  kDLFloat8_e8m0fnu = 14U,
  /*! \brief 6-bit float, 2 exponent bits, 3 mantissa bits, finite only (OCP MX FP6). */
  kDLFloat6_e2m3fn = 15U,
  /*! \brief 6-bit float, 3 exponent bits, 2 mantissa bits, finite only (OCP MX FP6). */
  kDLFloat6_e3m2fn = 16U,
  /*! \brief 4-bit float, 2 exponent bits, 1 mantissa bit, finite only (OCP MX FP4). */
  kDLFloat4_e2m1fn = 17U,
} DLDataTypeCode;
// [DLDataTypeCode.end]

// [DLDataType.begin]
/*!
 * \brief An element type: family, width and vector lanes. 4 bytes.
 *
 * Examples: float32 = {kDLFloat, 32, 1}; float16x4 = {kDLFloat, 16, 4}; bool = {kDLBool, 8, 1}.
 * A lane count whose top bit is set (as a signed 16-bit value, negative) denotes a scalable
 * vector of -lanes times the hardware vector length.
 */
typedef struct {
  /*! \brief The type family, a DLDataTypeCode value (custom codes are >= 129). */
  uint8_t code;
  /*! \brief Bits per lane, e.g. 8, 16, 32, 64, or 4/6/8 for the small float formats. */
  uint8_t bits;
  /*! \brief Number of lanes; 1 for scalars. */
  uint16_t lanes;
} DLDataType;
// [DLDataType.end]

// [DLTensor.begin]
/*!
 * \brief A borrowed view of a strided n-dimensional array. 48 bytes.
 *
 * The struct owns nothing: `data`, `shape` and `strides` belong to whoever produced it.
 * The address of element (i0, ..., in-1) is
 *   (char*)data + byte_offset + (i0*strides[0] + ... + in-1*strides[n-1]) * element_size
 * where element_size = bits * lanes / 8 rounded up.
 */
typedef struct {
  /*!
   * \brief Start of the allocation (device address for device memory; may be an opaque
   *  handle on some backends such as OpenCL). Producers keep it 256-byte aligned where they can;
   *  use byte_offset to point into the middle of an allocation.
   */
  void* data;
  /*! \brief Where the memory lives. */
  DLDevice device;
  /*! \brief Number of dimensions (0 for a scalar). */
  int32_t ndim;
  /*! \brief Element type. */
  DLDataType dtype;
  /*! \brief ndim extents. May be NULL only when ndim is 0. */
  int64_t* shape;
  /*! \brief ndim strides counted in elements (not bytes); NULL means compact row-major. */
  int64_t* strides;
  /*! \brief Offset in bytes from `data` to the first element. */
  uint64_t byte_offset;
} DLTensor;
// [DLTensor.end]

// [DLManagedTensor.begin]
/*!
 * \brief A DLTensor together with the means to release it (pre-1.0 exchange form). 64 bytes.
 *
 * The consumer that receives one owns it and must call `deleter(self)` exactly once when done
 * (if `deleter` is non-NULL). Prefer DLManagedTensorVersioned in new code.
 */
typedef struct DLManagedTensor {
  /*! \brief The tensor view; its memory stays valid until the deleter runs. */
  DLTensor dl_tensor;
  /*! \brief Producer's private context (e.g. the framework tensor that owns the memory). */
  void* manager_ctx;
  /*! \brief Releases the tensor and this struct; called once by the consumer. May be NULL. */
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;
// [DLManagedTensor.end]

// [DLPackFlags.begin]
/*! \brief The consumer must not write to the tensor's memory. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
/*! \brief The producer made a copy for this exchange; the consumer holds the only reference. */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
/*!
 * \brief For sub-byte element types: each element is padded to a whole byte instead of being
 *  packed. Consumers that expect packed storage must reject such tensors.
 */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)
// [DLPackFlags.end]

// [DLManagedTensorVersioned.begin]
/*!
 * \brief A DLTensor with its version, flags and release callback (DLPack >= 1.0). 80 bytes.
 *
 * The receiver owns it and must call `deleter(self)` exactly once when done (if non-NULL).
 * `version` lets the receiver check compatibility before touching anything past it.
 */
typedef struct DLManagedTensorVersioned {
  /*! \brief The DLPack ABI version of the producer. Always the first field. */
  DLPackVersion version;
  /*! \brief Producer's private context. */
  void* manager_ctx;
  /*! \brief Releases the tensor and this struct; called once by the consumer. May be NULL. */
  void (*deleter)(struct DLManagedTensorVersioned* self);
  /*! \brief A bitmask of DLPACK_FLAG_BITMASK_* values. */
  uint64_t flags;
  /*! \brief The tensor view. */
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
// [DLManagedTensorVersioned.end]

// [DLPackExchangeAPI.begin]
/*!
 * \brief Allocates a new tensor shaped like `prototype` (only its device, ndim, shape and dtype
 *  are read; `data` should be NULL).
 *
 * On success returns 0 and stores a tensor owned by the caller in `*out`. On failure returns a
 * non-zero code, and reports the reason by calling `SetError(error_ctx, kind, message)` when
 * `SetError` is non-NULL (kind is an error class name such as "RuntimeError").
 */
typedef int (*DLPackManagedTensorAllocator)(
    DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
    void (*SetError)(void* error_ctx, const char* kind, const char* message));

/*!
 * \brief Converts a framework tensor object (a PyObject*) to a managed tensor without waiting on
 *  streams. Returns 0 on success (caller owns `*out`), non-zero with a Python error set otherwise.
 */
typedef int (*DLPackManagedTensorFromPyObjectNoSync)(void* py_object,
                                                      DLManagedTensorVersioned** out);

/*!
 * \brief Wraps a managed tensor into a new framework tensor object (PyObject*), taking ownership
 *  of `tensor` on success. Returns 0 on success, non-zero with a Python error set otherwise.
 */
typedef int (*DLPackManagedTensorToPyObjectNoSync)(DLManagedTensorVersioned* tensor,
                                                    void** out_py_object);

/*!
 * \brief Fills `out` with a borrowed view of a framework tensor object (PyObject*), valid while
 *  that object lives. Returns 0 on success, non-zero with a Python error set otherwise.
 */
typedef int (*DLPackDLTensorFromPyObjectNoSync)(void* py_object, DLTensor* out);

/*!
 * \brief Stores in `*out_current_stream` the framework's current stream for a device (NULL for
 *  the default stream or for devices without streams). Returns 0 on success.
 */
typedef int (*DLPackCurrentWorkStream)(DLDeviceType device_type, int32_t device_id,
                                       void** out_current_stream);

/*! \brief Common head of every DLPack exchange API table. 16 bytes. */
typedef struct DLPackExchangeAPIHeader {
  /*! \brief The DLPack version the table was built for. */
  DLPackVersion version;
  /*! \brief An older table offered by the same producer, or NULL. */
  struct DLPackExchangeAPIHeader* prev_api;
} DLPackExchangeAPIHeader;

/*!
 * \brief A framework's C-level DLPack entry points, so tensors can be exchanged without going
 *  through Python method calls. 56 bytes. Found on the framework's tensor type as the attribute
 *  `__dlpack_c_exchange_api__` (a PyCapsule named "dlpack_exchange_api").
 */
typedef struct DLPackExchangeAPI {
  /*! \brief Version and link to an older table. */
  DLPackExchangeAPIHeader header;
  /*! \brief Allocates framework tensors. */
  DLPackManagedTensorAllocator managed_tensor_allocator;
  /*! \brief Framework tensor -> managed tensor. */
  DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
  /*! \brief Managed tensor -> framework tensor. */
  DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
  /*! \brief Framework tensor -> borrowed DLTensor; may be NULL. */
  DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;
  /*! \brief The framework's current stream for a device. */
  DLPackCurrentWorkStream current_work_stream;
} DLPackExchangeAPI;
// [DLPackExchangeAPI.end]

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // DLPACK_DLPACK_H_
