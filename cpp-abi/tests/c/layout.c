/*
 * layout.c -- the binary layout of tvm/ffi/c_api.h and dlpack/dlpack.h, checked on the C side.
 *
 * Every size, alignment, field offset, field size and constant below is the value the ABI
 * reference prescribes. The compiler checks each one (_Static_assert), and the same facts, as the
 * compiler sees them, are exported in a {name, value} table that the Rust test compares one by one
 * against `tvm_ffi::abi` (std::mem::size_of / offsets / consts): the "both sides" check.
 *
 * Built against cpp-abi/include only.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <dlpack/dlpack.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/extra/device_api.h>

#include "abi_tests.h"

/* X(type, size, alignment) */
#define ABI_STRUCTS(X)                  \
  X(TVMFFIVersion, 12, 4)               \
  X(TVMFFIObject, 24, 8)                \
  X(TVMFFIAny, 16, 8)                   \
  X(TVMFFIByteArray, 16, 8)             \
  X(TVMFFIShapeCell, 16, 8)             \
  X(TVMFFISeqCell, 32, 8)               \
  X(TVMFFIErrorCell, 72, 8)             \
  X(TVMFFIFunctionCell, 16, 8)          \
  X(TVMFFIOpaqueObjectCell, 8, 8)       \
  X(TVMFFIFieldInfo, 120, 8)            \
  X(TVMFFIMethodInfo, 72, 8)            \
  X(TVMFFITypeMetadata, 32, 8)          \
  X(TVMFFITypeAttrColumn, 16, 8)        \
  X(TVMFFITypeInfo, 72, 8)              \
  X(TVMFFIObjectAllocHeader, 8, 8)      \
  X(TVMFFICustomAllocator, 16, 8)       \
  X(DLPackVersion, 8, 4)                \
  X(DLDevice, 8, 4)                     \
  X(DLDataType, 4, 2)                   \
  X(DLTensor, 48, 8)                    \
  X(DLManagedTensor, 64, 8)             \
  X(DLManagedTensorVersioned, 80, 8)    \
  X(TVMFFIDeviceAPITable, 88, 8)

/* X(type, field, offset, size) */
#define ABI_FIELDS(X)                                              \
  X(TVMFFIVersion, major, 0, 4)                                    \
  X(TVMFFIVersion, minor, 4, 4)                                    \
  X(TVMFFIVersion, patch, 8, 4)                                    \
  X(TVMFFIObject, combined_ref_count, 0, 8)                        \
  X(TVMFFIObject, type_index, 8, 4)                                \
  X(TVMFFIObject, __padding, 12, 4)                                \
  X(TVMFFIObject, deleter, 16, 8)                                  \
  X(TVMFFIObject, __ensure_align, 16, 8)                           \
  X(TVMFFIAny, type_index, 0, 4)                                   \
  X(TVMFFIAny, zero_padding, 4, 4)                                 \
  X(TVMFFIAny, small_str_len, 4, 4)                                \
  X(TVMFFIAny, v_int64, 8, 8)                                      \
  X(TVMFFIAny, v_float64, 8, 8)                                    \
  X(TVMFFIAny, v_ptr, 8, 8)                                        \
  X(TVMFFIAny, v_c_str, 8, 8)                                      \
  X(TVMFFIAny, v_obj, 8, 8)                                        \
  X(TVMFFIAny, v_dtype, 8, 4)                                      \
  X(TVMFFIAny, v_device, 8, 8)                                     \
  X(TVMFFIAny, v_bytes, 8, 8)                                      \
  X(TVMFFIAny, v_uint64, 8, 8)                                     \
  X(TVMFFIByteArray, data, 0, 8)                                   \
  X(TVMFFIByteArray, size, 8, 8)                                   \
  X(TVMFFIShapeCell, data, 0, 8)                                   \
  X(TVMFFIShapeCell, size, 8, 8)                                   \
  X(TVMFFISeqCell, data, 0, 8)                                     \
  X(TVMFFISeqCell, size, 8, 8)                                     \
  X(TVMFFISeqCell, capacity, 16, 8)                                \
  X(TVMFFISeqCell, data_deleter, 24, 8)                            \
  X(TVMFFIErrorCell, kind, 0, 16)                                  \
  X(TVMFFIErrorCell, message, 16, 16)                              \
  X(TVMFFIErrorCell, backtrace, 32, 16)                            \
  X(TVMFFIErrorCell, update_backtrace, 48, 8)                      \
  X(TVMFFIErrorCell, cause_chain, 56, 8)                           \
  X(TVMFFIErrorCell, extra_context, 64, 8)                         \
  X(TVMFFIFunctionCell, safe_call, 0, 8)                           \
  X(TVMFFIFunctionCell, cpp_call, 8, 8)                            \
  X(TVMFFIOpaqueObjectCell, handle, 0, 8)                          \
  X(TVMFFIFieldInfo, name, 0, 16)                                  \
  X(TVMFFIFieldInfo, doc, 16, 16)                                  \
  X(TVMFFIFieldInfo, metadata, 32, 16)                             \
  X(TVMFFIFieldInfo, flags, 48, 8)                                 \
  X(TVMFFIFieldInfo, size, 56, 8)                                  \
  X(TVMFFIFieldInfo, alignment, 64, 8)                             \
  X(TVMFFIFieldInfo, offset, 72, 8)                                \
  X(TVMFFIFieldInfo, getter, 80, 8)                                \
  X(TVMFFIFieldInfo, setter, 88, 8)                                \
  X(TVMFFIFieldInfo, default_value_or_factory, 96, 16)             \
  X(TVMFFIFieldInfo, field_static_type_index, 112, 4)              \
  X(TVMFFIMethodInfo, name, 0, 16)                                 \
  X(TVMFFIMethodInfo, doc, 16, 16)                                 \
  X(TVMFFIMethodInfo, metadata, 32, 16)                            \
  X(TVMFFIMethodInfo, flags, 48, 8)                                \
  X(TVMFFIMethodInfo, method, 56, 16)                              \
  X(TVMFFITypeMetadata, doc, 0, 16)                                \
  X(TVMFFITypeMetadata, creator, 16, 8)                            \
  X(TVMFFITypeMetadata, total_size, 24, 4)                         \
  X(TVMFFITypeMetadata, structural_eq_hash_kind, 28, 4)            \
  X(TVMFFITypeAttrColumn, data, 0, 8)                              \
  X(TVMFFITypeAttrColumn, size, 8, 4)                              \
  X(TVMFFITypeAttrColumn, begin_index, 12, 4)                      \
  X(TVMFFITypeInfo, type_index, 0, 4)                              \
  X(TVMFFITypeInfo, type_depth, 4, 4)                              \
  X(TVMFFITypeInfo, type_key, 8, 16)                               \
  X(TVMFFITypeInfo, type_ancestors, 24, 8)                         \
  X(TVMFFITypeInfo, type_key_hash, 32, 8)                          \
  X(TVMFFITypeInfo, num_fields, 40, 4)                             \
  X(TVMFFITypeInfo, num_methods, 44, 4)                            \
  X(TVMFFITypeInfo, fields, 48, 8)                                 \
  X(TVMFFITypeInfo, methods, 56, 8)                                \
  X(TVMFFITypeInfo, metadata, 64, 8)                               \
  X(TVMFFIObjectAllocHeader, delete_space, 0, 8)                   \
  X(TVMFFICustomAllocator, allocate, 0, 8)                         \
  X(TVMFFICustomAllocator, context, 8, 8)                          \
  X(DLPackVersion, major, 0, 4)                                    \
  X(DLPackVersion, minor, 4, 4)                                    \
  X(DLDevice, device_type, 0, 4)                                   \
  X(DLDevice, device_id, 4, 4)                                     \
  X(DLDataType, code, 0, 1)                                        \
  X(DLDataType, bits, 1, 1)                                        \
  X(DLDataType, lanes, 2, 2)                                       \
  X(DLTensor, data, 0, 8)                                          \
  X(DLTensor, device, 8, 8)                                        \
  X(DLTensor, ndim, 16, 4)                                         \
  X(DLTensor, dtype, 20, 4)                                        \
  X(DLTensor, shape, 24, 8)                                        \
  X(DLTensor, strides, 32, 8)                                      \
  X(DLTensor, byte_offset, 40, 8)                                  \
  X(DLManagedTensor, dl_tensor, 0, 48)                             \
  X(DLManagedTensor, manager_ctx, 48, 8)                           \
  X(DLManagedTensor, deleter, 56, 8)                               \
  X(DLManagedTensorVersioned, version, 0, 8)                       \
  X(DLManagedTensorVersioned, manager_ctx, 8, 8)                   \
  X(DLManagedTensorVersioned, deleter, 16, 8)                      \
  X(DLManagedTensorVersioned, flags, 24, 8)                        \
  X(DLManagedTensorVersioned, dl_tensor, 32, 48)                   \
  X(TVMFFIDeviceAPITable, struct_size, 0, 4)                       \
  X(TVMFFIDeviceAPITable, version, 4, 4)                           \
  X(TVMFFIDeviceAPITable, self, 8, 8)                              \
  X(TVMFFIDeviceAPITable, name, 16, 8)                             \
  X(TVMFFIDeviceAPITable, get_attr, 24, 8)                         \
  X(TVMFFIDeviceAPITable, alloc, 32, 8)                            \
  X(TVMFFIDeviceAPITable, free, 40, 8)                             \
  X(TVMFFIDeviceAPITable, copy, 48, 8)                             \
  X(TVMFFIDeviceAPITable, stream_create, 56, 8)                    \
  X(TVMFFIDeviceAPITable, stream_free, 64, 8)                      \
  X(TVMFFIDeviceAPITable, stream_sync, 72, 8)                      \
  X(TVMFFIDeviceAPITable, release, 80, 8)

/* X(name, value) */
#define ABI_CONSTANTS(X)                                  \
  X(TVM_FFI_VERSION_MAJOR, 0)                             \
  X(TVM_FFI_VERSION_MINOR, 1)                             \
  X(TVM_FFI_VERSION_PATCH, 16)                            \
  X(DLPACK_MAJOR_VERSION, 1)                              \
  X(DLPACK_MINOR_VERSION, 3)                              \
  X(TVM_FFI_DEVICE_API_TABLE_VERSION, 1)                  \
  X(kTVMFFIAny, -1)                                       \
  X(kTVMFFINone, 0)                                       \
  X(kTVMFFIInt, 1)                                        \
  X(kTVMFFIBool, 2)                                       \
  X(kTVMFFIFloat, 3)                                      \
  X(kTVMFFIOpaquePtr, 4)                                  \
  X(kTVMFFIDataType, 5)                                   \
  X(kTVMFFIDevice, 6)                                     \
  X(kTVMFFIDLTensorPtr, 7)                                \
  X(kTVMFFIRawStr, 8)                                     \
  X(kTVMFFIByteArrayPtr, 9)                               \
  X(kTVMFFIObjectRValueRef, 10)                           \
  X(kTVMFFISmallStr, 11)                                  \
  X(kTVMFFISmallBytes, 12)                                \
  X(kTVMFFIUnchanged, 13)                                 \
  X(kTVMFFIStaticObjectBegin, 64)                         \
  X(kTVMFFIObject, 64)                                    \
  X(kTVMFFIStr, 65)                                       \
  X(kTVMFFIBytes, 66)                                     \
  X(kTVMFFIError, 67)                                     \
  X(kTVMFFIFunction, 68)                                  \
  X(kTVMFFIShape, 69)                                     \
  X(kTVMFFITensor, 70)                                    \
  X(kTVMFFIArray, 71)                                     \
  X(kTVMFFIMap, 72)                                       \
  X(kTVMFFIModule, 73)                                    \
  X(kTVMFFIOpaquePyObject, 74)                            \
  X(kTVMFFIList, 75)                                      \
  X(kTVMFFIDict, 76)                                      \
  X(kTVMFFIVisitInterrupt, 77)                            \
  X(kTVMFFIBigInt, 78)                                    \
  X(kTVMFFIStaticObjectEnd, 79)                           \
  X(kTVMFFIDynObjectBegin, 128)                           \
  X(kTVMFFIObjectStrongOne, 1)                            \
  X(kTVMFFIObjectWeakOne, 0x100000000LL)                  \
  X(kTVMFFIObjectBothOne, 0x100000001LL)                  \
  X(kTVMFFIObjectDeleterFlagBitMaskStrong, 1)             \
  X(kTVMFFIObjectDeleterFlagBitMaskWeak, 2)               \
  X(kTVMFFIObjectDeleterFlagBitMaskBoth, 3)               \
  X(kTVMFFIBacktraceUpdateModeReplace, 0)                 \
  X(kTVMFFIBacktraceUpdateModeAppend, 1)                  \
  X(kTVMFFIFieldFlagBitMaskWritable, 1)                   \
  X(kTVMFFIFieldFlagBitMaskHasDefault, 2)                 \
  X(kTVMFFIFieldFlagBitMaskIsStaticMethod, 4)             \
  X(kTVMFFIFieldFlagBitMaskSEqHashIgnore, 8)              \
  X(kTVMFFIFieldFlagBitMaskSEqHashDef, 16)                \
  X(kTVMFFIFieldFlagBitMaskDefaultFromFactory, 32)        \
  X(kTVMFFIFieldFlagBitMaskReprOff, 64)                   \
  X(kTVMFFIFieldFlagBitMaskCompareOff, 128)               \
  X(kTVMFFIFieldFlagBitMaskHashOff, 256)                  \
  X(kTVMFFIFieldFlagBitMaskInitOff, 512)                  \
  X(kTVMFFIFieldFlagBitMaskKwOnly, 1024)                  \
  X(kTVMFFIFieldFlagBitMaskSetterIsFunctionObj, 2048)     \
  X(kTVMFFIFieldFlagBitMaskSEqHashDefSimple, 4096)        \
  X(kTVMFFISEqHashKindUnsupported, 0)                     \
  X(kTVMFFISEqHashKindTreeNode, 1)                        \
  X(kTVMFFISEqHashKindFreeVar, 2)                         \
  X(kTVMFFISEqHashKindDAGNode, 3)                         \
  X(kTVMFFISEqHashKindConstTreeNode, 4)                   \
  X(kTVMFFISEqHashKindUniqueInstance, 5)                  \
  X(kDLCPU, 1)                                            \
  X(kDLCUDA, 2)                                           \
  X(kDLCUDAHost, 3)                                       \
  X(kDLOpenCL, 4)                                         \
  X(kDLVulkan, 7)                                         \
  X(kDLMetal, 8)                                          \
  X(kDLVPI, 9)                                            \
  X(kDLROCM, 10)                                          \
  X(kDLROCMHost, 11)                                      \
  X(kDLExtDev, 12)                                        \
  X(kDLCUDAManaged, 13)                                   \
  X(kDLOneAPI, 14)                                        \
  X(kDLWebGPU, 15)                                        \
  X(kDLHexagon, 16)                                       \
  X(kDLMAIA, 17)                                          \
  X(kDLTrn, 18)                                           \
  X(kDLInt, 0)                                            \
  X(kDLUInt, 1)                                           \
  X(kDLFloat, 2)                                          \
  X(kDLOpaqueHandle, 3)                                   \
  X(kDLBfloat, 4)                                         \
  X(kDLComplex, 5)                                        \
  X(kDLBool, 6)                                           \
  X(kDLFloat8_e3m4, 7)                                    \
  X(kDLFloat8_e4m3, 8)                                    \
  X(kDLFloat8_e4m3b11fnuz, 9)                             \
  X(kDLFloat8_e4m3fn, 10)                                 \
  X(kDLFloat8_e4m3fnuz, 11)                               \
  X(kDLFloat8_e5m2, 12)                                   \
  X(kDLFloat8_e5m2fnuz, 13)                               \
  X(kDLFloat8_e8m0fnu, 14)                                \
  X(kDLFloat6_e2m3fn, 15)                                 \
  X(kDLFloat6_e3m2fn, 16)                                 \
  X(kDLFloat4_e2m1fn, 17)                                 \
  X(DLPACK_FLAG_BITMASK_READ_ONLY, 1)                     \
  X(DLPACK_FLAG_BITMASK_IS_COPIED, 2)                     \
  X(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, 4)

/* ---- compile-time checks against the reference values ---- */

#define FIELD_SIZE(T, f) sizeof(((T*)0)->f)

#define CHECK_STRUCT(T, size, align)                                  \
  _Static_assert(sizeof(T) == (size), "sizeof(" #T ") != " #size);    \
  _Static_assert(_Alignof(T) == (align), "alignof(" #T ") != " #align);
ABI_STRUCTS(CHECK_STRUCT)

#define CHECK_FIELD(T, f, off, size)                                               \
  _Static_assert(offsetof(T, f) == (off), "offsetof(" #T ", " #f ") != " #off);   \
  _Static_assert(FIELD_SIZE(T, f) == (size), "sizeof(" #T "." #f ") != " #size);
ABI_FIELDS(CHECK_FIELD)

#define CHECK_CONSTANT(c, v) _Static_assert((int64_t)(c) == (int64_t)(v), #c " != " #v);
ABI_CONSTANTS(CHECK_CONSTANT)

/* Types of the ABI that only C declares (no Rust mirror in tvm_ffi::abi): checked here only. */
_Static_assert(sizeof(DLPackExchangeAPIHeader) == 16, "sizeof(DLPackExchangeAPIHeader)");
_Static_assert(offsetof(DLPackExchangeAPIHeader, version) == 0, "DLPackExchangeAPIHeader.version");
_Static_assert(offsetof(DLPackExchangeAPIHeader, prev_api) == 8, "DLPackExchangeAPIHeader.prev_api");
_Static_assert(sizeof(DLPackExchangeAPI) == 56, "sizeof(DLPackExchangeAPI)");
_Static_assert(offsetof(DLPackExchangeAPI, header) == 0, "DLPackExchangeAPI.header");
_Static_assert(offsetof(DLPackExchangeAPI, managed_tensor_allocator) == 16,
               "DLPackExchangeAPI.managed_tensor_allocator");
_Static_assert(offsetof(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync) == 24,
               "DLPackExchangeAPI.managed_tensor_from_py_object_no_sync");
_Static_assert(offsetof(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync) == 32,
               "DLPackExchangeAPI.managed_tensor_to_py_object_no_sync");
_Static_assert(offsetof(DLPackExchangeAPI, dltensor_from_py_object_no_sync) == 40,
               "DLPackExchangeAPI.dltensor_from_py_object_no_sync");
_Static_assert(offsetof(DLPackExchangeAPI, current_work_stream) == 48,
               "DLPackExchangeAPI.current_work_stream");
/* Enumerations stored in 4-byte fields must be 4 bytes wide. */
_Static_assert(sizeof(DLDeviceType) == 4, "sizeof(DLDeviceType)");
_Static_assert(sizeof(TVMFFITypeIndex) == 4, "sizeof(TVMFFITypeIndex)");
_Static_assert(sizeof(TVMFFISEqHashKind) == 4, "sizeof(TVMFFISEqHashKind)");
/* Function pointers and data pointers share one size (the ABI stores both in void* slots). */
_Static_assert(sizeof(TVMFFISafeCallType) == sizeof(void*), "sizeof(TVMFFISafeCallType)");
_Static_assert(sizeof(DLPackManagedTensorAllocator) == sizeof(void*),
               "sizeof(DLPackManagedTensorAllocator)");

/* ---- the table the Rust side compares against ---- */

#define ENTRY_STRUCT(T, size, align)              \
  {"sizeof(" #T ")", (int64_t)sizeof(T)},         \
  {"alignof(" #T ")", (int64_t)_Alignof(T)},
#define ENTRY_FIELD(T, f, off, size)                        \
  {"offsetof(" #T ", " #f ")", (int64_t)offsetof(T, f)},    \
  {"sizeof(" #T "." #f ")", (int64_t)FIELD_SIZE(T, f)},
#define ENTRY_CONSTANT(c, v) {#c, (int64_t)(c)},

static const TvmFfiAbiLayoutEntry kLayoutTable[] = {
    ABI_STRUCTS(ENTRY_STRUCT) ABI_FIELDS(ENTRY_FIELD) ABI_CONSTANTS(ENTRY_CONSTANT)};

const TvmFfiAbiLayoutEntry* tvm_ffi_abi_c_layout_table(size_t* out_count) {
  *out_count = sizeof(kLayoutTable) / sizeof(kLayoutTable[0]);
  return kLayoutTable;
}

int64_t tvm_ffi_abi_c_layout(const char* name) {
  size_t i;
  for (i = 0; i < sizeof(kLayoutTable) / sizeof(kLayoutTable[0]); ++i) {
    if (strcmp(kLayoutTable[i].name, name) == 0) return kLayoutTable[i].value;
  }
  return INT64_MIN;
}
