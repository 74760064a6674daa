/*
 * tvm/ffi/c_api.h -- the stable C ABI of the tvm runtime (TVM FFI 0.1 binary layout).
 *
 * This header is the contract between the runtime (one native library per process defines every
 * TVMFFI* function declared here) and everything compiled against it: C and C++ kernels, other
 * language bindings, and backends loaded at run time. It is the tvm project's own text; the type
 * indices, struct layouts, function signatures and ownership rules are those of Apache TVM FFI
 * 0.1, so code built for either runtime works with the other.
 *
 * General rules (cpp-abi/README.md has the full list):
 *  - Functions returning `int` return 0 on success and non-zero (normally -1) on failure; on
 *    failure an Error object is left in the calling thread's error slot, to be taken with
 *    TVMFFIErrorMoveFromRaised. Exceptions are stated per function.
 *  - "owned" results carry one strong reference that the caller must release
 *    (TVMFFIObjectDecRef for handles, DecRef of v_obj for an Any whose type_index >= 64);
 *    "borrowed" results and arguments carry none.
 *  - No function of this runtime terminates the process or unwinds through the caller.
 *
 * Needs a C11 or C++11 compiler (anonymous unions). 64-bit targets are the supported ones; the
 * sizes quoted in comments are for LP64.
 */
#ifndef TVM_FFI_C_API_H_
#define TVM_FFI_C_API_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

// [Version.begin]
/*! \brief Major version of the TVM FFI ABI. */
#define TVM_FFI_VERSION_MAJOR 0
/*! \brief Minor version of the TVM FFI ABI. */
#define TVM_FFI_VERSION_MINOR 1
/*! \brief Patch version of the TVM FFI ABI. */
#define TVM_FFI_VERSION_PATCH 16
// [Version.end]

// [Macros.begin]
/*!
 * \brief Marks a function of the runtime's C API: exported by the library that defines it,
 *  imported by everyone else.
 */
#ifndef TVM_FFI_DLL
#if defined(__EMSCRIPTEN__)
#include <emscripten/emscripten.h>
#define TVM_FFI_DLL EMSCRIPTEN_KEEPALIVE
#elif defined(_MSC_VER)
#ifdef TVM_FFI_EXPORTS
#define TVM_FFI_DLL __declspec(dllexport)
#else
#define TVM_FFI_DLL __declspec(dllimport)
#endif
#else
#define TVM_FFI_DLL __attribute__((visibility("default")))
#endif
#endif

/*!
 * \brief Marks a symbol that a user library always exports, such as the `__tvm_ffi_<name>`
 *  functions a module loader looks up.
 */
#ifndef TVM_FFI_DLL_EXPORT
#if defined(__EMSCRIPTEN__)
#define TVM_FFI_DLL_EXPORT EMSCRIPTEN_KEEPALIVE
#elif defined(_MSC_VER)
#define TVM_FFI_DLL_EXPORT __declspec(dllexport)
#else
#define TVM_FFI_DLL_EXPORT __attribute__((visibility("default")))
#endif
#endif

/*! \brief A definition the linker may merge with (or replace by) another of the same name. */
#ifndef TVM_FFI_WEAK
#if defined(_MSC_VER)
#define TVM_FFI_WEAK __declspec(selectany)
#else
#define TVM_FFI_WEAK __attribute__((weak))
#endif
#endif

/*!
 * \brief "No side effects" function attribute, kept for source compatibility. This runtime does
 *  not put it on any declaration: even its lookups may record an error in the thread's slot.
 */
#ifndef TVM_FFI_ATTRIBUTE_PURE
#if defined(__GNUC__) || defined(__clang__)
#define TVM_FFI_ATTRIBUTE_PURE __attribute__((__pure__))
#else
#define TVM_FFI_ATTRIBUTE_PURE
#endif
#endif
// [Macros.end]

#ifdef __cplusplus
extern "C" {
#endif

// [TVMFFIVersion.begin]
/*! \brief A TVM FFI version triple. 12 bytes. */
typedef struct {
  /*! \brief TVM_FFI_VERSION_MAJOR of the runtime. */
  uint32_t major;
  /*! \brief TVM_FFI_VERSION_MINOR of the runtime. */
  uint32_t minor;
  /*! \brief TVM_FFI_VERSION_PATCH of the runtime. */
  uint32_t patch;
} TVMFFIVersion;
// [TVMFFIVersion.end]

// [TVMFFITypeIndex.begin]
/*!
 * \brief Built-in type indices.
 *
 *  - [0, 64): plain values carried inside TVMFFIAny; never reference counted.
 *  - [64, 128): object types with a fixed index (every object starts with a TVMFFIObject).
 *  - [128, ...): object types given an index at run time by TVMFFITypeGetOrAllocIndex.
 *    These differ between processes: always look them up by type key.
 *
 * Every struct field and parameter that holds a type index is an `int32_t`, never this enum.
 */
#ifdef __cplusplus
enum TVMFFITypeIndex : int32_t {
#else
typedef enum TVMFFITypeIndex {
#endif
  /*! \brief "Any type", used only in reflection schemas; never the tag of a live value. */
  kTVMFFIAny = -1,
  /*! \brief None; the payload is all zero bits. */
  kTVMFFINone = 0,
  /*! \brief int64_t in v_int64. */
  kTVMFFIInt = 1,
  /*! \brief Boolean in v_int64, exactly 0 or 1. */
  kTVMFFIBool = 2,
  /*! \brief double in v_float64. */
  kTVMFFIFloat = 3,
  /*! \brief An opaque pointer in v_ptr (not owned). */
  kTVMFFIOpaquePtr = 4,
  /*! \brief DLDataType in v_dtype; the four bytes after it are zero. */
  kTVMFFIDataType = 5,
  /*! \brief DLDevice in v_device. */
  kTVMFFIDevice = 6,
  /*! \brief A borrowed DLTensor* in v_ptr. */
  kTVMFFIDLTensorPtr = 7,
  /*! \brief A borrowed NUL-terminated C string in v_c_str. Arguments only, never owned. */
  kTVMFFIRawStr = 8,
  /*! \brief A borrowed TVMFFIByteArray* in v_ptr. Arguments only, never owned. */
  kTVMFFIByteArrayPtr = 9,
  /*!
   * \brief v_ptr points at a slot holding an owned object handle that the callee may take
   *  (setting the slot to NULL). Arguments only.
   */
  kTVMFFIObjectRValueRef = 10,
  /*! \brief A string of at most 7 bytes inline in v_bytes; length in small_str_len. */
  kTVMFFISmallStr = 11,
  /*! \brief Bytes, at most 7, inline in v_bytes; length in small_str_len. */
  kTVMFFISmallBytes = 12,
  /*! \brief "ffi.Unchanged": the marker a structural mutator returns for an untouched value. */
  kTVMFFIUnchanged = 13,
  /*! \brief First index of the object types with fixed indices. */
  kTVMFFIStaticObjectBegin = 64,
  /*! \brief "ffi.Object", the root of all object types (header only). */
  kTVMFFIObject = 64,
  /*! \brief "ffi.String": header + TVMFFIByteArray + the characters and a NUL. */
  kTVMFFIStr = 65,
  /*! \brief "ffi.Bytes": header + TVMFFIByteArray + the bytes and a NUL. */
  kTVMFFIBytes = 66,
  /*! \brief "ffi.Error": header + TVMFFIErrorCell. */
  kTVMFFIError = 67,
  /*! \brief "ffi.Function": header + TVMFFIFunctionCell. */
  kTVMFFIFunction = 68,
  /*! \brief "ffi.Shape": header + TVMFFIShapeCell + the int64 extents. */
  kTVMFFIShape = 69,
  /*! \brief "ffi.Tensor": header + DLTensor. */
  kTVMFFITensor = 70,
  /*! \brief "ffi.Array": header + TVMFFISeqCell + the TVMFFIAny elements inline. */
  kTVMFFIArray = 71,
  /*! \brief "ffi.Map": header + hash table laid out for inline access. */
  kTVMFFIMap = 72,
  /*! \brief "ffi.Module": reached only through global functions, no C layout. */
  kTVMFFIModule = 73,
  /*! \brief "ffi.OpaquePyObject": header + TVMFFIOpaqueObjectCell. */
  kTVMFFIOpaquePyObject = 74,
  /*! \brief "ffi.List": header + TVMFFISeqCell, elements in a separate buffer. */
  kTVMFFIList = 75,
  /*! \brief "ffi.Dict": same layout as ffi.Map, mutable in place. */
  kTVMFFIDict = 76,
  /*! \brief "ffi.VisitInterrupt": marker object of structural visits. */
  kTVMFFIVisitInterrupt = 77,
  /*!
   * \brief "ffi.BigInt": header + size_t word count + int64 words (least significant first,
   *  minimal two's complement). Values that fit in int64 are always kTVMFFIInt instead.
   */
  kTVMFFIBigInt = 78,
  /*! \brief One past the last fixed object index. */
  kTVMFFIStaticObjectEnd = 79,
  /*! \brief First index handed out at run time. */
  kTVMFFIDynObjectBegin = 128,
#ifdef __cplusplus
};
#else
} TVMFFITypeIndex;
#endif
// [TVMFFITypeIndex.end]

// [TVMFFIObject.begin]
/*!
 * \brief The header at the start of every object. 24 bytes, 8-aligned.
 *
 * An object handle (TVMFFIObjectHandle) always points at this header. The payload of the
 * built-in types ("cell") starts right after it, at offset 24.
 */
typedef struct TVMFFIObject {
  /*!
   * \brief Low 32 bits: strong count; high 32 bits: weak count. Updated atomically. A new object
   *  starts at kTVMFFIObjectBothOne (one strong reference, plus the one weak reference that all
   *  strong references hold together).
   */
  uint64_t combined_ref_count;
  /*! \brief The object's runtime type index (>= 64). */
  int32_t type_index;
  /*! \brief Always 0. */
  uint32_t __padding;
  union {
    /*!
     * \brief Called with `self` = this header when a count reaches zero; `flags` is a
     *  TVMFFIObjectDeleterFlagBitMask value saying what to do. NULL: nothing to do.
     */
    void (*deleter)(void* self, int flags);
    /*! \brief Keeps the union 8 bytes and 8-aligned on every target. */
    int64_t __ensure_align;
  };
} TVMFFIObject;

/*! \brief A pointer to an object's TVMFFIObject header. */
typedef void* TVMFFIObjectHandle;
// [TVMFFIObject.end]

// [TVMFFIRefCount.begin]
/*! \brief One strong reference in TVMFFIObject::combined_ref_count. */
#define kTVMFFIObjectStrongOne ((uint64_t)1)
/*! \brief One weak reference in TVMFFIObject::combined_ref_count. */
#define kTVMFFIObjectWeakOne ((uint64_t)1 << 32)
/*! \brief The count of a freshly created object: strong 1, weak 1. */
#define kTVMFFIObjectBothOne (kTVMFFIObjectStrongOne | kTVMFFIObjectWeakOne)

/*!
 * \brief What a deleter is asked to do.
 *
 * Strong: the strong count reached 0; destroy the value (release what it holds) but keep the
 * memory, weak references still point at it. Weak: the weak count reached 0; free the memory.
 * Both: the two at once (the common case).
 */
#ifdef __cplusplus
enum TVMFFIObjectDeleterFlagBitMask : int32_t {
#else
typedef enum TVMFFIObjectDeleterFlagBitMask {
#endif
  kTVMFFIObjectDeleterFlagBitMaskStrong = 1 << 0,
  kTVMFFIObjectDeleterFlagBitMaskWeak = 1 << 1,
  kTVMFFIObjectDeleterFlagBitMaskBoth = (1 << 0) | (1 << 1),
#ifdef __cplusplus
};
#else
} TVMFFIObjectDeleterFlagBitMask;
#endif
// [TVMFFIRefCount.end]

// [TVMFFIAny.begin]
/*!
 * \brief A tagged value. 16 bytes.
 *
 * Canonical form (hashing and equality compare raw bits): `zero_padding` is 0 except for small
 * strings/bytes, and payload bytes not used by the value are 0. For objects, `type_index` equals
 * the header's type_index and `v_obj` is non-NULL (a null reference is None).
 *
 * An owning Any holds one strong reference to its object; a borrowed one ("AnyView") holds none.
 * Function arguments are borrowed; function results are owning.
 */
typedef struct TVMFFIAny {
  /*! \brief The type index of the value (a TVMFFITypeIndex or a runtime-allocated index). */
  int32_t type_index;
  union {
    /*! \brief 0 for every value other than a small string or small bytes. */
    uint32_t zero_padding;
    /*! \brief Length of a kTVMFFISmallStr / kTVMFFISmallBytes value (0..7). */
    uint32_t small_str_len;
  };
  union {
    int64_t v_int64;
    double v_float64;
    void* v_ptr;
    const char* v_c_str;
    TVMFFIObject* v_obj;
    DLDataType v_dtype;
    DLDevice v_device;
    /*! \brief Small string/bytes content, NUL-padded (at most 7 bytes used). */
    char v_bytes[8];
    uint64_t v_uint64;
  };
} TVMFFIAny;
// [TVMFFIAny.end]

// [TVMFFIByteArray.begin]
/*! \brief A borrowed byte range; not necessarily NUL-terminated. 16 bytes. */
typedef struct {
  const char* data;
  size_t size;
} TVMFFIByteArray;
// [TVMFFIByteArray.end]

// [TVMFFIShapeCell.begin]
/*! \brief Payload of an ffi.Shape (at offset 24): its extents. 16 bytes. */
typedef struct {
  const int64_t* data;
  size_t size;
} TVMFFIShapeCell;
// [TVMFFIShapeCell.end]

// [TVMFFISeqCell.begin]
/*!
 * \brief Payload of an ffi.Array / ffi.List (at offset 24). 32 bytes.
 *
 * `data` holds `size` owning TVMFFIAny elements with room for `capacity`. An Array keeps them
 * inline right after this cell (data == (char*)obj + 56, data_deleter NULL). A List keeps them in
 * a malloc-compatible buffer released by `data_deleter`, which is non-NULL and accepts NULL.
 */
typedef struct {
  void* data;
  int64_t size;
  int64_t capacity;
  void (*data_deleter)(void* data);
} TVMFFISeqCell;
// [TVMFFISeqCell.end]

// [TVMFFIErrorCell.begin]
/*! \brief How TVMFFIErrorCell::update_backtrace combines the new text with the old. */
#ifdef __cplusplus
enum TVMFFIBacktraceUpdateMode : int32_t {
#else
typedef enum TVMFFIBacktraceUpdateMode {
#endif
  /*! \brief The new text replaces the backtrace. */
  kTVMFFIBacktraceUpdateModeReplace = 0,
  /*! \brief The new text is added at the end of the backtrace. */
  kTVMFFIBacktraceUpdateModeAppend = 1,
#ifdef __cplusplus
};
#else
} TVMFFIBacktraceUpdateMode;
#endif

/*!
 * \brief Payload of an ffi.Error (at offset 24). 72 bytes.
 *
 * The three byte arrays point at storage owned by the error object (NUL-terminated). The
 * backtrace lists the most recent call first, one `  File "<file>", line <n>, in <func>` line
 * per frame.
 */
typedef struct {
  /*! \brief The error kind, e.g. "ValueError"; selects the exception class in Python. */
  TVMFFIByteArray kind;
  /*! \brief The message. */
  TVMFFIByteArray message;
  /*!
   * \brief The backtrace text. A producer may record the frames when the error is raised and
   *  make the text only when asked (the Rust runtime does): the field is then empty until a
   *  call of update_backtrace. A reader that finds it empty asks by appending nothing,
   *  `update_backtrace(self, &(TVMFFIByteArray){"", 0}, kTVMFFIBacktraceUpdateModeAppend)`,
   *  and reads the field again (harmless for an error from any producer).
   */
  TVMFFIByteArray backtrace;
  /*!
   * \brief Replaces or extends the backtrace (`update_mode` is a TVMFFIBacktraceUpdateMode);
   *  `self` is the error's handle, `backtrace` is borrowed and copied. Never NULL.
   */
  void (*update_backtrace)(TVMFFIObjectHandle self, const TVMFFIByteArray* backtrace,
                           int32_t update_mode);
  /*! \brief The error that caused this one (an ffi.Error), owned by the cell; may be NULL. */
  TVMFFIObjectHandle cause_chain;
  /*! \brief Any object with extra context, owned by the cell; may be NULL. */
  TVMFFIObjectHandle extra_context;
} TVMFFIErrorCell;
// [TVMFFIErrorCell.end]

// [TVMFFISafeCallType.begin]
/*!
 * \brief The calling convention of every function crossing the ABI.
 *
 * \param handle What the callee was registered with (see cpp-abi/README.md, "safe-call handle").
 * \param args num_args borrowed values, valid for the duration of the call.
 * \param num_args The number of arguments.
 * \param result Set to None by the caller before the call. On success the callee stores an
 *  owning value; on failure it leaves nothing owned in it.
 * \return 0 on success; -1 with an Error in the thread's slot on failure. Callers treat any
 *  non-zero value as failure.
 */
typedef int (*TVMFFISafeCallType)(void* handle, const TVMFFIAny* args, int32_t num_args,
                                  TVMFFIAny* result);
// [TVMFFISafeCallType.end]

// [TVMFFIFunctionCell.begin]
/*! \brief Payload of an ffi.Function (at offset 24). 16 bytes. */
typedef struct {
  /*! \brief Entry point; TVMFFIFunctionCall passes the function's own handle as `handle`. */
  TVMFFISafeCallType safe_call;
  /*!
   * \brief A C++-only fast path that C++ header code calls whenever it is non-NULL. Functions
   *  made by this runtime always leave it NULL; so must any non-C++ producer.
   */
  void* cpp_call;
} TVMFFIFunctionCell;
// [TVMFFIFunctionCell.end]

// [TVMFFIOpaqueObjectCell.begin]
/*! \brief Payload of an ffi.OpaquePyObject (at offset 24): the foreign handle. 8 bytes. */
typedef struct {
  void* handle;
} TVMFFIOpaqueObjectCell;
// [TVMFFIOpaqueObjectCell.end]

// [TVMFFIFieldFlagBitMask.begin]
/*! \brief Bits of TVMFFIFieldInfo::flags and TVMFFIMethodInfo::flags. */
#ifdef __cplusplus
enum TVMFFIFieldFlagBitMask : int32_t {
#else
typedef enum TVMFFIFieldFlagBitMask {
#endif
  /*! \brief Front ends may assign the field. */
  kTVMFFIFieldFlagBitMaskWritable = 1 << 0,
  /*! \brief default_value_or_factory holds a default. */
  kTVMFFIFieldFlagBitMaskHasDefault = 1 << 1,
  /*! \brief (Methods) a static method; also the flag of functions set with SetGlobal. */
  kTVMFFIFieldFlagBitMaskIsStaticMethod = 1 << 2,
  /*! \brief Ignored by structural equality and hashing. */
  kTVMFFIFieldFlagBitMaskSEqHashIgnore = 1 << 3,
  /*! \brief The field opens a (recursive) definition region for structural equality. */
  kTVMFFIFieldFlagBitMaskSEqHashDef = 1 << 4,
  /*! \brief default_value_or_factory is a Function `() -> Any` making the default. */
  kTVMFFIFieldFlagBitMaskDefaultFromFactory = 1 << 5,
  /*! \brief Left out of repr. */
  kTVMFFIFieldFlagBitMaskReprOff = 1 << 6,
  /*! \brief Left out of recursive comparison. */
  kTVMFFIFieldFlagBitMaskCompareOff = 1 << 7,
  /*! \brief Left out of recursive hashing. */
  kTVMFFIFieldFlagBitMaskHashOff = 1 << 8,
  /*! \brief Not a parameter of the generated `__ffi_init__`. */
  kTVMFFIFieldFlagBitMaskInitOff = 1 << 9,
  /*! \brief Keyword-only parameter of the generated `__ffi_init__`. */
  kTVMFFIFieldFlagBitMaskKwOnly = 1 << 10,
  /*! \brief `setter` is an ffi.Function handle called as (OpaquePtr field_addr, value). */
  kTVMFFIFieldFlagBitMaskSetterIsFunctionObj = 1 << 11,
  /*! \brief The field opens a simple (non-recursive) definition region. */
  kTVMFFIFieldFlagBitMaskSEqHashDefSimple = 1 << 12,
#ifdef __cplusplus
};
#else
} TVMFFIFieldFlagBitMask;
#endif
// [TVMFFIFieldFlagBitMask.end]

// [TVMFFISEqHashKind.begin]
/*! \brief How structural equality and hashing treat objects of a type. */
#ifdef __cplusplus
enum TVMFFISEqHashKind : int32_t {
#else
typedef enum TVMFFISEqHashKind {
#endif
  /*! \brief Structural comparison is not supported. */
  kTVMFFISEqHashKindUnsupported = 0,
  /*! \brief Compared field by field, as a tree. */
  kTVMFFISEqHashKindTreeNode = 1,
  /*! \brief A variable bound by a definition; may be mapped to another free variable. */
  kTVMFFISEqHashKindFreeVar = 2,
  /*! \brief Compared field by field, as a DAG node (sharing matters). */
  kTVMFFISEqHashKindDAGNode = 3,
  /*! \brief A tree node that never contains variables. */
  kTVMFFISEqHashKindConstTreeNode = 4,
  /*! \brief Equal only to itself (pointer identity). */
  kTVMFFISEqHashKindUniqueInstance = 5,
#ifdef __cplusplus
};
#else
} TVMFFISEqHashKind;
#endif
// [TVMFFISEqHashKind.end]

// [TVMFFIFieldInfo.begin]
/*!
 * \brief Reads a field at `field` (address = object handle + offset) into `result` (owning).
 *  Returns 0, or -1 with an error set.
 */
typedef int (*TVMFFIFieldGetter)(void* field, TVMFFIAny* result);
/*!
 * \brief Writes `value` (borrowed) into the field at `field`. Returns 0, or -1 with an error set.
 */
typedef int (*TVMFFIFieldSetter)(void* field, const TVMFFIAny* value);
/*! \brief Creates an "empty" instance of a type (owned). Returns 0, or -1 with an error set. */
typedef int (*TVMFFIObjectCreator)(TVMFFIObjectHandle* result);

/*! \brief Reflection record of one field of an object type. 120 bytes. */
typedef struct {
  /*! \brief Field name. */
  TVMFFIByteArray name;
  /*! \brief Documentation; may be empty. */
  TVMFFIByteArray doc;
  /*! \brief A JSON object, e.g. {"type_schema": ...}; may be empty. */
  TVMFFIByteArray metadata;
  /*! \brief TVMFFIFieldFlagBitMask bits. */
  int64_t flags;
  /*! \brief sizeof the field. */
  int64_t size;
  /*! \brief alignof the field. */
  int64_t alignment;
  /*! \brief Byte offset of the field from the object's header pointer. */
  int64_t offset;
  /*! \brief Reads the field. */
  TVMFFIFieldGetter getter;
  /*!
   * \brief A TVMFFIFieldSetter, or an ffi.Function handle when
   *  kTVMFFIFieldFlagBitMaskSetterIsFunctionObj is set. Present even for read-only fields.
   */
  void* setter;
  /*! \brief The default (or a factory Function) when kTVMFFIFieldFlagBitMaskHasDefault is set. */
  TVMFFIAny default_value_or_factory;
  /*! \brief The declared type index of the field (kTVMFFIAny for "any"); a hint only. */
  int32_t field_static_type_index;
} TVMFFIFieldInfo;
// [TVMFFIFieldInfo.end]

// [TVMFFIMethodInfo.begin]
/*! \brief Reflection record of one method (or of a global function). 72 bytes. */
typedef struct {
  /*! \brief Method name. */
  TVMFFIByteArray name;
  /*! \brief Documentation; may be empty. */
  TVMFFIByteArray doc;
  /*! \brief A JSON object, e.g. {"type_schema": ...}; may be empty. */
  TVMFFIByteArray metadata;
  /*! \brief TVMFFIFieldFlagBitMask bits (kTVMFFIFieldFlagBitMaskIsStaticMethod). */
  int64_t flags;
  /*! \brief The ffi.Function; instance methods take the object as argument 0. */
  TVMFFIAny method;
} TVMFFIMethodInfo;
// [TVMFFIMethodInfo.end]

// [TVMFFITypeMetadata.begin]
/*! \brief Per-type reflection metadata. 32 bytes. */
typedef struct {
  /*! \brief Type documentation; may be empty. */
  TVMFFIByteArray doc;
  /*! \brief Creates an empty instance (fields then set through setters); may be NULL. */
  TVMFFIObjectCreator creator;
  /*! \brief sizeof the object including its header; 0 if unknown. */
  int32_t total_size;
  /*! \brief A TVMFFISEqHashKind value. */
  int32_t structural_eq_hash_kind;
} TVMFFITypeMetadata;
// [TVMFFITypeMetadata.end]

// [TVMFFITypeAttrColumn.begin]
/*!
 * \brief One named per-type attribute across all types. 16 bytes.
 *
 * The value for type index t is data[t - begin_index] when 0 <= t - begin_index < size;
 * otherwise, or when that entry is None, the type has no value. The struct's address is stable;
 * `data` may move when values are added, so re-read it.
 */
typedef struct {
  /*! \brief The values (borrowed; owned by the runtime). */
  const TVMFFIAny* data;
  /*! \brief Number of entries in data. */
  int32_t size;
  /*! \brief Type index of data[0]. */
  int32_t begin_index;
} TVMFFITypeAttrColumn;
// [TVMFFITypeAttrColumn.end]

// [TVMFFITypeInfo.begin]
/*!
 * \brief What the runtime knows about a type. 72 bytes.
 *
 * Entries live for the whole process; `fields` and `methods` may move when more are registered.
 */
typedef struct TVMFFITypeInfo {
  /*! \brief The type index. */
  int32_t type_index;
  /*! \brief Number of ancestors: 0 for ffi.Object and the plain value types, 1 for built-ins. */
  int32_t type_depth;
  /*! \brief The type key, e.g. "ffi.String". */
  TVMFFIByteArray type_key;
  /*! \brief type_depth entries: [0] is the root, [type_depth - 1] the parent. */
  const struct TVMFFITypeInfo** type_ancestors;
  /*! \brief A hash of type_key (implementation-defined; stable within a process). */
  uint64_t type_key_hash;
  /*! \brief Number of the type's own fields (ancestors' not included). */
  int32_t num_fields;
  /*! \brief Number of the type's own methods. */
  int32_t num_methods;
  /*! \brief The type's own fields. */
  const TVMFFIFieldInfo* fields;
  /*! \brief The type's own methods. */
  const TVMFFIMethodInfo* methods;
  /*! \brief Type metadata; NULL until registered. */
  const TVMFFITypeMetadata* metadata;
} TVMFFITypeInfo;
// [TVMFFITypeInfo.end]

// [TVMFFIAllocator.begin]
/*!
 * \brief Placed right before an object body allocated by a custom allocator. 8 bytes.
 */
typedef struct {
  /*! \brief Frees the body (and this header). */
  void (*delete_space)(void* body);
} TVMFFIObjectAllocHeader;

/*!
 * \brief An object allocator. 16 bytes. Installed with TVMFFISetCustomAllocator; object creation
 *  does not use it yet (the slot is kept for ABI compatibility).
 */
typedef struct {
  /*!
   * \brief Returns an uninitialized body of `size` bytes aligned to `alignment`, preceded by an
   *  initialized TVMFFIObjectAllocHeader; on failure sets an error and returns NULL.
   */
  void* (*allocate)(size_t size, size_t alignment, int32_t type_index, void* context);
  /*! \brief Passed back to `allocate`. */
  void* context;
} TVMFFICustomAllocator;
// [TVMFFIAllocator.end]

// [TVMFFIEnvTypes.begin]
/*! \brief A device stream (cudaStream_t, hipStream_t, ...); NULL is the default stream. */
typedef void* TVMFFIStreamHandle;

/*
 * DLPackManagedTensorAllocator -- the tensor allocator of TVMFFIEnvTensorAlloc:
 *   int (*)(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
 *           void (*SetError)(void* error_ctx, const char* kind, const char* message))
 * DLPack 1.3 declares it (dlpack/dlpack.h); it is declared here for older DLPack headers.
 */
#if DLPACK_MAJOR_VERSION < 1 || (DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION < 3)
typedef int (*DLPackManagedTensorAllocator)(
    DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
    void (*SetError)(void* error_ctx, const char* kind, const char* message));
#endif
// [TVMFFIEnvTypes.end]

/* ------------------------------------------------------------------------------------------ */
/* Functions                                                                                   */
/* ------------------------------------------------------------------------------------------ */

// [TVMFFIGetVersion.begin]
/*!
 * \brief Fills `out_version` with the runtime's version. Cannot fail; stable across all versions.
 * \param out_version Written; must not be NULL.
 */
TVM_FFI_DLL void TVMFFIGetVersion(TVMFFIVersion* out_version);
// [TVMFFIGetVersion.end]

// [TVMFFIObjectAPI.begin]
/*!
 * \brief Adds one strong reference. The caller must already hold one; `obj` must not be NULL.
 * \return 0.
 */
TVM_FFI_DLL int TVMFFIObjectIncRef(TVMFFIObjectHandle obj);

/*!
 * \brief Drops one strong reference, running the deleter when counts reach zero (flag Strong,
 *  then Weak; or Both at once).
 * \param obj The object, or NULL (then nothing happens).
 * \return 0.
 */
TVM_FFI_DLL int TVMFFIObjectDecRef(TVMFFIObjectHandle obj);

/*!
 * \brief Wraps a foreign handle (a PyObject*) in a new ffi.OpaquePyObject.
 * \param handle The foreign handle, stored in the object's TVMFFIOpaqueObjectCell.
 * \param type_index Must be kTVMFFIOpaquePyObject.
 * \param deleter Called as deleter(handle) when the object is destroyed; may be NULL.
 * \param out Receives the new object, owned by the caller (strong count 1).
 * \return 0; -1 with a RuntimeError if type_index is not kTVMFFIOpaquePyObject.
 */
TVM_FFI_DLL int TVMFFIObjectCreateOpaque(void* handle, int32_t type_index,
                                         void (*deleter)(void* handle), TVMFFIObjectHandle* out);

/*!
 * \brief The installed object allocator (a built-in one when none was set). Never NULL; the
 *  struct is owned by the runtime or by whoever installed it.
 */
TVM_FFI_DLL TVMFFICustomAllocator* TVMFFIGetCustomAllocator(void);

/*!
 * \brief Installs an object allocator (kept, not copied); NULL restores the built-in one. Not
 *  synchronized: call it during start-up. Object creation does not use it yet.
 * \return 0.
 */
TVM_FFI_DLL int TVMFFISetCustomAllocator(TVMFFICustomAllocator* allocator);
// [TVMFFIObjectAPI.end]

// [TVMFFIFunctionAPI.begin]
/*!
 * \brief Creates a function object from a C callback.
 *
 * If `self` and `deleter` are both NULL, `safe_call` is stored as is and is called with the
 * function object's own handle as `handle`. Otherwise it is called with `self` as `handle`, and
 * `deleter(self)` runs exactly once when the function object is destroyed.
 * \param out Receives the new ffi.Function, owned by the caller.
 * \return 0; -1 with an error set.
 */
TVM_FFI_DLL int TVMFFIFunctionCreate(void* self, TVMFFISafeCallType safe_call,
                                     void (*deleter)(void* self), TVMFFIObjectHandle* out);

/*!
 * \brief The `allow_override` value of TVMFFIFunctionSetGlobal that registers a default: an
 *  implementation a runtime library provides for a name that a library loaded later may bring
 *  its own of (Apache TVM's libtvm_runtime.so registers its RPC functions, say). A default never
 *  displaces an entry, and any later registration of the name replaces it without an error.
 */
#define TVM_FFI_GLOBAL_DEFAULT 2

/*!
 * \brief Registers `f` in the global function table under `name`.
 * \param name The name (borrowed, copied).
 * \param f An ffi.Function (borrowed; the table takes its own reference).
 * \param allow_override 1: replace an existing entry. 0: an existing entry is an error, unless
 *  it is a default, which is replaced. TVM_FFI_GLOBAL_DEFAULT: register a default, keeping an
 *  existing entry.
 * \return 0; -1 with a RuntimeError if the name is taken and allow_override is 0.
 */
TVM_FFI_DLL int TVMFFIFunctionSetGlobal(const TVMFFIByteArray* name, TVMFFIObjectHandle f,
                                        int allow_override);

/*!
 * \brief Registers a global function with its documentation and metadata.
 * \param method_info name, doc, metadata (copied), flags, and `method` (an ffi.Function; the
 *  table takes its own reference). Borrowed.
 * \param allow_override As for TVMFFIFunctionSetGlobal.
 * \return 0; -1 with a RuntimeError if the name is taken and allow_override is 0, or a
 *  TypeError if `method` is not a function.
 */
TVM_FFI_DLL int TVMFFIFunctionSetGlobalFromMethodInfo(const TVMFFIMethodInfo* method_info,
                                                      int allow_override);

/*!
 * \brief Looks up a global function.
 * \param name The name (borrowed).
 * \param out Receives the function, owned by the caller (release with TVMFFIObjectDecRef), or
 *  NULL when no function has that name.
 * \return 0 (also when the name is absent).
 */
TVM_FFI_DLL int TVMFFIFunctionGetGlobal(const TVMFFIByteArray* name, TVMFFIObjectHandle* out);

/*!
 * \brief Calls a function object: `safe_call(func, args, num_args, result)` of its cell.
 * \param func The ffi.Function (borrowed).
 * \param args num_args borrowed arguments.
 * \param result Must be set to None by the caller; receives an owning value on success.
 * \return The callee's return code: 0, or non-zero (normally -1) with an error set.
 */
TVM_FFI_DLL int TVMFFIFunctionCall(TVMFFIObjectHandle func, TVMFFIAny* args, int32_t num_args,
                                   TVMFFIAny* result);

/*!
 * \brief Turns a borrowed value into an owning one.
 *
 * Objects gain a reference; kTVMFFIRawStr becomes a string and kTVMFFIByteArrayPtr becomes
 * bytes (small or heap); kTVMFFIObjectRValueRef moves the object out of the referenced slot
 * (setting it to NULL); every other value is copied bit for bit (a DLTensor* stays a pointer).
 * \param any_view The borrowed value.
 * \param out Receives the owning value.
 * \return 0; -1 with an error set (e.g. an already-moved ObjectRValueRef).
 */
TVM_FFI_DLL int TVMFFIAnyViewToOwnedAny(const TVMFFIAny* any_view, TVMFFIAny* out);
// [TVMFFIFunctionAPI.end]

// [TVMFFIErrorAPI.begin]
/*!
 * \brief Takes the error out of the calling thread's slot, leaving it empty.
 * \param result Receives the ffi.Error, owned by the caller, or NULL if the slot was empty.
 */
TVM_FFI_DLL void TVMFFIErrorMoveFromRaised(TVMFFIObjectHandle* result);

/*!
 * \brief Puts an error in the calling thread's slot, replacing (and releasing) any error there.
 * \param error An ffi.Error, borrowed: the slot takes its own reference and the caller keeps
 *  (and must still release) its reference.
 */
TVM_FFI_DLL void TVMFFIErrorSetRaised(TVMFFIObjectHandle error);

/*!
 * \brief Creates an error with a backtrace of the calling thread and puts it in the slot.
 * \param kind The error kind, e.g. "ValueError" (borrowed, copied).
 * \param message The message (borrowed, copied).
 */
TVM_FFI_DLL void TVMFFIErrorSetRaisedFromCStr(const char* kind, const char* message);

/*!
 * \brief Like TVMFFIErrorSetRaisedFromCStr; the message is the concatenation of the non-NULL
 *  entries of message_parts[0 .. num_parts).
 */
TVM_FFI_DLL void TVMFFIErrorSetRaisedFromCStrParts(const char* kind, const char** message_parts,
                                                   int32_t num_parts);

/*!
 * \brief Creates an error object (it is not raised).
 * \param kind, message, backtrace Borrowed and copied.
 * \param out Receives the new ffi.Error, owned by the caller.
 * \return 0; -1 only if memory runs out, in which case the thread's error slot is not touched.
 */
TVM_FFI_DLL int TVMFFIErrorCreate(const TVMFFIByteArray* kind, const TVMFFIByteArray* message,
                                  const TVMFFIByteArray* backtrace, TVMFFIObjectHandle* out);

/*!
 * \brief Like TVMFFIErrorCreate, also recording a cause and extra context.
 * \param cause_chain The error that caused this one, or NULL. Borrowed; the new error takes its
 *  own reference.
 * \param extra_context Any object, or NULL. Borrowed; the new error takes its own reference.
 * \return 0; -1 only if memory runs out (the error slot is not touched).
 */
TVM_FFI_DLL int TVMFFIErrorCreateWithCauseAndExtraContext(
    const TVMFFIByteArray* kind, const TVMFFIByteArray* message, const TVMFFIByteArray* backtrace,
    TVMFFIObjectHandle cause_chain, TVMFFIObjectHandle extra_context, TVMFFIObjectHandle* out);

/*!
 * \brief Captures the calling thread's backtrace as text (most recent call first).
 * \param filename, lineno, func If filename and func are non-NULL, this location becomes the
 *  first line.
 * \param cross_ffi_boundary Zero: stop at the first FFI boundary frame. Non-zero: keep going.
 * \return A thread-local buffer owned by the runtime, valid until the next call on this thread.
 *  Never NULL.
 */
TVM_FFI_DLL const TVMFFIByteArray* TVMFFIBacktrace(const char* filename, int lineno,
                                                   const char* func, int cross_ffi_boundary);
// [TVMFFIErrorAPI.end]

// [TVMFFITensorAPI.begin]
/*!
 * \brief Makes an ffi.Tensor from a DLPack (pre-1.0) managed tensor.
 * \param from On success the tensor takes ownership and calls from->deleter(from) when it dies;
 *  on failure ownership stays with the caller.
 * \param require_alignment Non-zero: data + byte_offset must be a multiple of this many bytes.
 * \param require_contiguous Non-zero: the tensor must be compact row-major.
 * \param out Receives the new ffi.Tensor, owned by the caller. Its strides are never NULL.
 * \return 0; -1 with a ValueError if a requirement fails.
 */
TVM_FFI_DLL int TVMFFITensorFromDLPack(DLManagedTensor* from, int32_t require_alignment,
                                       int32_t require_contiguous, TVMFFIObjectHandle* out);

/*!
 * \brief Exports an ffi.Tensor as a DLPack (pre-1.0) managed tensor.
 * \param from The tensor (borrowed; the export keeps its own reference until the deleter runs).
 * \param out Receives a struct owned by the caller, who must call its deleter exactly once.
 * \return 0; -1 with an error set.
 */
TVM_FFI_DLL int TVMFFITensorToDLPack(TVMFFIObjectHandle from, DLManagedTensor** out);

/*!
 * \brief Like TVMFFITensorFromDLPack for a versioned managed tensor. Tensors flagged
 *  DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED are refused (-1, error set; ownership stays with
 *  the caller).
 */
TVM_FFI_DLL int TVMFFITensorFromDLPackVersioned(DLManagedTensorVersioned* from,
                                                int32_t require_alignment,
                                                int32_t require_contiguous,
                                                TVMFFIObjectHandle* out);

/*!
 * \brief Like TVMFFITensorToDLPack, producing a versioned managed tensor (version = the
 *  DLPACK_MAJOR/MINOR_VERSION of this header, flags = 0).
 */
TVM_FFI_DLL int TVMFFITensorToDLPackVersioned(TVMFFIObjectHandle from,
                                              DLManagedTensorVersioned** out);

/*!
 * \brief Makes a tensor that views `source`'s memory as described by `prototype`.
 * \param source The tensor whose memory is viewed (borrowed; the view keeps a reference).
 * \param prototype data, device, dtype, ndim, shape, strides (must be non-NULL when ndim > 0)
 *  and byte_offset of the view; shape and strides are copied. Not checked against the source.
 * \param out Receives the new ffi.Tensor, owned by the caller.
 * \return 0; -1 with an error set.
 */
TVM_FFI_DLL int TVMFFITensorCreateUnsafeView(TVMFFIObjectHandle source, const DLTensor* prototype,
                                             TVMFFIObjectHandle* out);
// [TVMFFITensorAPI.end]

// [TVMFFIValueAPI.begin]
/*!
 * \brief Copies bytes into a string value.
 * \param input The UTF-8 text (borrowed).
 * \param out Receives an owning value: kTVMFFISmallStr for at most 7 bytes (tail zeroed),
 *  otherwise a kTVMFFIStr object whose data is followed by a NUL.
 * \return 0; -1 with an error set.
 */
TVM_FFI_DLL int TVMFFIStringFromByteArray(const TVMFFIByteArray* input, TVMFFIAny* out);

/*!
 * \brief Like TVMFFIStringFromByteArray for bytes: kTVMFFISmallBytes or a kTVMFFIBytes object.
 */
TVM_FFI_DLL int TVMFFIBytesFromByteArray(const TVMFFIByteArray* input, TVMFFIAny* out);

/*!
 * \brief Builds an integer from little-endian int64 words in two's complement.
 * \param words The words (borrowed); the size must be a multiple of 8 (ValueError otherwise);
 *  empty means 0.
 * \param out Receives an owning value: kTVMFFIInt when the value fits in int64, otherwise a
 *  normalized kTVMFFIBigInt object.
 * \return 0; -1 with an error set.
 */
TVM_FFI_DLL int TVMFFIBigIntFromByteArray(const TVMFFIByteArray* words, TVMFFIAny* out);

/*!
 * \brief A borrowed view of the words of a kTVMFFIInt (its 8 payload bytes) or kTVMFFIBigInt
 *  value. Any other value gives an empty view. Valid while \p value is.
 */
TVM_FFI_DLL TVMFFIByteArray TVMFFIBigIntGetContentByteArray(const TVMFFIAny* value);

/*!
 * \brief Parses a dtype string such as "float32", "int8x4", "bf16", "float8_e4m3fn" or "handle".
 * \param str The text (borrowed).
 * \param out Receives the data type.
 * \return 0; -1 with a ValueError naming the string if it is not a dtype.
 */
TVM_FFI_DLL int TVMFFIDataTypeFromString(const TVMFFIByteArray* str, DLDataType* out);

/*!
 * \brief Formats a data type in its canonical spelling ("float32", "float16x4", "bool", ...).
 * \param dtype The data type (borrowed).
 * \param out Receives an owning string value (small or heap).
 * \return 0; -1 with an error set (e.g. an unknown custom code).
 */
TVM_FFI_DLL int TVMFFIDataTypeToString(const DLDataType* dtype, TVMFFIAny* out);
// [TVMFFIValueAPI.end]

// [TVMFFITypeAPI.begin]
/*!
 * \brief Finds the type index registered for a type key.
 * \param type_key The key, e.g. "ffi.String" (borrowed).
 * \param out_tindex Receives the index.
 * \return 0; -1 with a KeyError naming the key if it is not registered.
 */
TVM_FFI_DLL int TVMFFITypeKeyToIndex(const TVMFFIByteArray* type_key, int32_t* out_tindex);

/*!
 * \brief Returns the index of `type_key`, registering the type first if it is new.
 *
 * An already registered key returns its index and ignores the other arguments. Otherwise:
 * parent_type_index == -2 asks only, and returns -2; a static_type_index >= 0 registers the key
 * at that index; -1 allocates an index after the parent (inside the parent's reserved child
 * slots when there is room, else from the dynamic range starting at kTVMFFIDynObjectBegin).
 * \param type_key The key (borrowed, copied).
 * \param static_type_index A fixed index, or -1 for a dynamic one.
 * \param type_depth Must be the parent's depth + 1.
 * \param num_child_slots Indices reserved right after this type for its subtypes.
 * \param child_slots_can_overflow Non-zero: subtypes may go beyond the reserved slots.
 * \param parent_type_index The parent's index (kTVMFFIObject for direct subtypes of Object).
 * \return The index; or -1 with an error set (e.g. unknown parent, depth mismatch, static index
 *  already taken, parent out of child slots). Unlike apache-tvm-ffi, never terminates the
 *  process.
 */
TVM_FFI_DLL int32_t TVMFFITypeGetOrAllocIndex(const TVMFFIByteArray* type_key,
                                              int32_t static_type_index, int32_t type_depth,
                                              int32_t num_child_slots,
                                              int32_t child_slots_can_overflow,
                                              int32_t parent_type_index);

/*!
 * \brief What the runtime knows about a type index.
 * \return The entry, owned by the runtime and valid for the whole process; or NULL with a
 *  KeyError set if the index is not registered. (Unlike apache-tvm-ffi, never terminates
 *  the process.)
 */
TVM_FFI_DLL const TVMFFITypeInfo* TVMFFIGetTypeInfo(int32_t type_index);

/*!
 * \brief Adds a field record to a type. Strings are copied, the default value and a Function
 *  setter get a reference of the type's own.
 * \return 0; -1 with an error set (unknown type, or a second field of the same name).
 */
TVM_FFI_DLL int TVMFFITypeRegisterField(int32_t type_index, const TVMFFIFieldInfo* info);

/*!
 * \brief Adds a method record to a type. Strings are copied, `method` gets a reference of the
 *  type's own.
 * \return 0; -1 with an error set (e.g. unknown type).
 */
TVM_FFI_DLL int TVMFFITypeRegisterMethod(int32_t type_index, const TVMFFIMethodInfo* info);

/*!
 * \brief Sets a type's metadata (copied). Once per type.
 * \return 0; -1 with a RuntimeError on a second registration, or an error for an unknown type.
 */
TVM_FFI_DLL int TVMFFITypeRegisterMetadata(int32_t type_index,
                                           const TVMFFITypeMetadata* metadata);

/*!
 * \brief Sets the value of the attribute column `attr_name` for a type, creating the column if
 *  needed. type_index 0 (None) only creates the column.
 * \param attr_value Borrowed; the column keeps an owning copy.
 * \return 0; -1 with a RuntimeError if the type already has a non-None value in that column.
 */
TVM_FFI_DLL int TVMFFITypeRegisterAttr(int32_t type_index, const TVMFFIByteArray* attr_name,
                                       const TVMFFIAny* attr_value);

/*!
 * \brief The attribute column named `attr_name`.
 * \return The column, owned by the runtime, at a stable address; or NULL if no column of that
 *  name exists (no error is set).
 */
TVM_FFI_DLL const TVMFFITypeAttrColumn* TVMFFIGetTypeAttrColumn(const TVMFFIByteArray* attr_name);
// [TVMFFITypeAPI.end]

// [TVMFFIHandleOnce.begin]
/*!
 * \brief Initializes `*handle_addr` exactly once across threads.
 *
 * If `*handle_addr` is non-NULL nothing happens. Otherwise, under a process-wide lock and after a
 * second check, calls init_func(&result) and stores the result. The lock is re-entrant: init_func
 * may initialize other handles, but asking for its own handle again is an error (not a deadlock).
 * \return 0; init_func's non-zero code (with its error); or -1 with a RuntimeError if init_func
 *  succeeds but produces NULL, or re-enters for the handle it is initializing.
 */
TVM_FFI_DLL int TVMFFIHandleInitOnce(void** handle_addr, int (*init_func)(void** result));

/*!
 * \brief Atomically takes `*handle_addr` (setting it to NULL) and, if it was non-NULL, calls
 *  deinit_func on it.
 * \return 0, or deinit_func's return code.
 */
TVM_FFI_DLL int TVMFFIHandleDeinitOnce(void** handle_addr, int (*deinit_func)(void* handle));
// [TVMFFIHandleOnce.end]

// [TVMFFIEnvAPI.begin]
/*!
 * \brief Sets the calling thread's current stream for a device.
 * \param stream The stream (borrowed, not retained).
 * \param opt_out_original_stream If non-NULL, receives the previous value (NULL if never set).
 * \return 0.
 */
TVM_FFI_DLL int TVMFFIEnvSetStream(int32_t device_type, int32_t device_id,
                                   TVMFFIStreamHandle stream,
                                   TVMFFIStreamHandle* opt_out_original_stream);

/*! \brief The calling thread's current stream for a device, or NULL if never set. */
TVM_FFI_DLL TVMFFIStreamHandle TVMFFIEnvGetStream(int32_t device_type, int32_t device_id);

/*!
 * \brief Sets the tensor allocator used by TVMFFIEnvTensorAlloc on the calling thread.
 * \param allocator The allocator, or NULL to fall back to the process-wide one.
 * \param write_to_global_context Non-zero: also set the process-wide allocator.
 * \param opt_out_original_allocator If non-NULL, receives the thread's previous allocator.
 * \return 0.
 */
TVM_FFI_DLL int TVMFFIEnvSetDLPackManagedTensorAllocator(
    DLPackManagedTensorAllocator allocator, int write_to_global_context,
    DLPackManagedTensorAllocator* opt_out_original_allocator);

/*!
 * \brief The allocator TVMFFIEnvTensorAlloc would use: the calling thread's if set, else the
 *  process-wide one (may be NULL).
 */
TVM_FFI_DLL DLPackManagedTensorAllocator TVMFFIEnvGetDLPackManagedTensorAllocator(void);

/*!
 * \brief Allocates a tensor shaped like `prototype` with the current allocator.
 * \param prototype Device, ndim, shape and dtype are read (borrowed); data should be NULL.
 * \param out Receives the new ffi.Tensor, owned by the caller.
 * \return 0; -1 with a RuntimeError if no allocator is set or it produced NULL; otherwise the
 *  allocator's own non-zero code, with the error it reported.
 */
TVM_FFI_DLL int TVMFFIEnvTensorAlloc(DLTensor* prototype, TVMFFIObjectHandle* out);

/*!
 * \brief Lets the host language handle pending signals (e.g. Ctrl-C in Python). Long-running
 *  code polls it.
 * \return 0; -1 if a signal handler raised. In that case no FFI error is set: fail with an error
 *  of kind "EnvErrorAlreadySet" so the host re-raises its own exception.
 */
TVM_FFI_DLL int TVMFFIEnvCheckSignals(void);

/*!
 * \brief Gives the runtime a host-language C function. Accepted names: "PyErr_CheckSignals",
 *  "PyGILState_Ensure", "PyGILState_Release".
 * \return 0; -1 with a ValueError for any other name.
 */
TVM_FFI_DLL int TVMFFIEnvRegisterCAPI(const char* name, void* symbol);

/*!
 * \brief Finds a function for generated code: in the imports of the library module identified
 *  by `library_ctx` (the cookie the loader stored in the library's `__tvm_ffi__library_ctx`),
 *  then in the global table. The result is cached in the module.
 * \param out Receives the function, borrowed: it lives as long as the module; do not release it.
 * \return 0; -1 with a RuntimeError if no such function exists.
 */
TVM_FFI_DLL int TVMFFIEnvModLookupFromImports(TVMFFIObjectHandle library_ctx,
                                              const char* func_name, TVMFFIObjectHandle* out);

/*!
 * \brief Registers a context symbol: every library loaded afterwards that defines a `void*`
 *  global named `name` gets it set to `symbol`.
 * \return 0.
 */
TVM_FFI_DLL int TVMFFIEnvModRegisterContextSymbol(const char* name, void* symbol);

/*!
 * \brief Registers a symbol of the system library (statically linked code), e.g.
 *  "__tvm_ffi_<prefix><name>". A second registration of the same name replaces the first.
 * \return 0.
 */
TVM_FFI_DLL int TVMFFIEnvModRegisterSystemLibSymbol(const char* name, void* symbol);
// [TVMFFIEnvAPI.end]

/* ------------------------------------------------------------------------------------------ */
/* Inline helpers (not exported; they only read the layouts above)                             */
/* ------------------------------------------------------------------------------------------ */

// [TVMFFIInlineHelpers.begin]
/*! \brief The type index stored in an object's header. */
static inline int32_t TVMFFIObjectGetTypeIndex(TVMFFIObjectHandle obj) {
  return ((const TVMFFIObject*)obj)->type_index;
}

/*! \brief The byte array of an ffi.String or ffi.Bytes object (at offset 24). */
static inline TVMFFIByteArray* TVMFFIBytesGetByteArrayPtr(TVMFFIObjectHandle obj) {
  return (TVMFFIByteArray*)((char*)obj + sizeof(TVMFFIObject));
}

/*! \brief The cell of an ffi.Error object (at offset 24). */
static inline TVMFFIErrorCell* TVMFFIErrorGetCellPtr(TVMFFIObjectHandle obj) {
  return (TVMFFIErrorCell*)((char*)obj + sizeof(TVMFFIObject));
}

/*! \brief The cell of an ffi.Function object (at offset 24). */
static inline TVMFFIFunctionCell* TVMFFIFunctionGetCellPtr(TVMFFIObjectHandle obj) {
  return (TVMFFIFunctionCell*)((char*)obj + sizeof(TVMFFIObject));
}

/*! \brief The cell of an ffi.OpaquePyObject object (at offset 24). */
static inline TVMFFIOpaqueObjectCell* TVMFFIOpaqueObjectGetCellPtr(TVMFFIObjectHandle obj) {
  return (TVMFFIOpaqueObjectCell*)((char*)obj + sizeof(TVMFFIObject));
}

/*! \brief The cell of an ffi.Shape object (at offset 24). */
static inline TVMFFIShapeCell* TVMFFIShapeGetCellPtr(TVMFFIObjectHandle obj) {
  return (TVMFFIShapeCell*)((char*)obj + sizeof(TVMFFIObject));
}

/*! \brief The DLTensor of an ffi.Tensor object (at offset 24). */
static inline DLTensor* TVMFFITensorGetDLTensorPtr(TVMFFIObjectHandle obj) {
  return (DLTensor*)((char*)obj + sizeof(TVMFFIObject));
}

/*!
 * \brief A view of the content of a kTVMFFISmallStr / kTVMFFISmallBytes value. The view points
 *  into `*value` and is valid as long as it is.
 */
static inline TVMFFIByteArray TVMFFISmallBytesGetContentByteArray(const TVMFFIAny* value) {
  TVMFFIByteArray result;
  result.data = value->v_bytes;
  result.size = (size_t)value->small_str_len;
  return result;
}

/*! \brief A DLDevice from two integers. */
static inline DLDevice TVMFFIDLDeviceFromIntPair(int32_t device_type, int32_t device_id) {
  DLDevice device;
  device.device_type = (DLDeviceType)device_type;
  device.device_id = device_id;
  return device;
}
// [TVMFFIInlineHelpers.end]

#ifdef __cplusplus
}  // extern "C"
#endif

// [TVMFFIAbiVersionRecord.begin]
/*!
 * \brief The ABI version a library was built for: `(TVM_FFI_VERSION_MAJOR << 16) |
 *  TVM_FFI_VERSION_MINOR` of the header it included.
 *
 * Every translation unit that includes this header (C or C++) defines this exported, weak,
 * read-only `uint32_t`; the linker keeps one copy per shared library. A module loader looks it up
 * with dlsym in the library it loaded and refuses a library built for another major version.
 * Libraries without the record (built with other headers) load as before. Define
 * TVM_FFI_NO_ABI_VERSION_RECORD before including the header to leave the symbol out.
 *
 * In C++ the definition is `extern "C"` (a namespace-scope `const` would otherwise have internal
 * linkage and one copy per translation unit); in C a file-scope `const` is external already.
 */
#ifndef TVM_FFI_NO_ABI_VERSION_RECORD
#ifdef __cplusplus
#define TVM_FFI_ABI_VERSION_RECORD_LINKAGE extern "C"
#else
#define TVM_FFI_ABI_VERSION_RECORD_LINKAGE
#endif
TVM_FFI_ABI_VERSION_RECORD_LINKAGE TVM_FFI_WEAK TVM_FFI_DLL_EXPORT const uint32_t
    __tvm_ffi__abi_version =
        ((uint32_t)TVM_FFI_VERSION_MAJOR << 16) | (uint32_t)TVM_FFI_VERSION_MINOR;
#undef TVM_FFI_ABI_VERSION_RECORD_LINKAGE
#endif
// [TVMFFIAbiVersionRecord.end]

#endif  // TVM_FFI_C_API_H_
