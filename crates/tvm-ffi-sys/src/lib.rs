//! Raw bindings of the TVM FFI C ABI: `#[repr(C)]` mirrors of `python/tvm/include/tvm/ffi/c_api.h`
//! and `dlpack/dlpack.h`, their constants, and the `extern "C"` declarations of the `TVMFFI*`
//! functions.
//!
//! Names follow the C header exactly. The crate holds layout, declarations and the few helpers
//! every user of raw values needs (byte arrays from and to Rust slices, the cell of an opaque
//! object); it has no state and defines no C function. The functions are defined by whichever
//! library owns the process state (in this project the `tvm-ffi-capi` crate, linked by final
//! artifacts only). The layout is that of Apache TVM FFI 0.1; the layout tests of
//! `cpp-abi/tests` check both sides against each other.
#![allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    missing_docs
)]

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::AtomicU64;

// ---------------------------------------------------------------------------------------------
// Versions
// ---------------------------------------------------------------------------------------------

pub const TVM_FFI_VERSION_MAJOR: u32 = 0;
pub const TVM_FFI_VERSION_MINOR: u32 = 1;
pub const TVM_FFI_VERSION_PATCH: u32 = 16;

pub const DLPACK_MAJOR_VERSION: u32 = 1;
pub const DLPACK_MINOR_VERSION: u32 = 3;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TVMFFIVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

// ---------------------------------------------------------------------------------------------
// Type indices (plain i32: dynamic indices exist, so no Rust enum)
// ---------------------------------------------------------------------------------------------

pub const kTVMFFIAny: i32 = -1;
pub const kTVMFFINone: i32 = 0;
pub const kTVMFFIInt: i32 = 1;
pub const kTVMFFIBool: i32 = 2;
pub const kTVMFFIFloat: i32 = 3;
pub const kTVMFFIOpaquePtr: i32 = 4;
pub const kTVMFFIDataType: i32 = 5;
pub const kTVMFFIDevice: i32 = 6;
pub const kTVMFFIDLTensorPtr: i32 = 7;
pub const kTVMFFIRawStr: i32 = 8;
pub const kTVMFFIByteArrayPtr: i32 = 9;
pub const kTVMFFIObjectRValueRef: i32 = 10;
pub const kTVMFFISmallStr: i32 = 11;
pub const kTVMFFISmallBytes: i32 = 12;
pub const kTVMFFIUnchanged: i32 = 13;
pub const kTVMFFIStaticObjectBegin: i32 = 64;
pub const kTVMFFIObject: i32 = 64;
pub const kTVMFFIStr: i32 = 65;
pub const kTVMFFIBytes: i32 = 66;
pub const kTVMFFIError: i32 = 67;
pub const kTVMFFIFunction: i32 = 68;
pub const kTVMFFIShape: i32 = 69;
pub const kTVMFFITensor: i32 = 70;
pub const kTVMFFIArray: i32 = 71;
pub const kTVMFFIMap: i32 = 72;
pub const kTVMFFIModule: i32 = 73;
pub const kTVMFFIOpaquePyObject: i32 = 74;
pub const kTVMFFIList: i32 = 75;
pub const kTVMFFIDict: i32 = 76;
pub const kTVMFFIVisitInterrupt: i32 = 77;
pub const kTVMFFIBigInt: i32 = 78;
pub const kTVMFFIStaticObjectEnd: i32 = 79;
pub const kTVMFFIDynObjectBegin: i32 = 128;

// ---------------------------------------------------------------------------------------------
// Object header
// ---------------------------------------------------------------------------------------------

/// Strong-count unit in the packed reference count.
pub const kTVMFFIObjectStrongOne: u64 = 1;
/// Weak-count unit in the packed reference count.
pub const kTVMFFIObjectWeakOne: u64 = 1 << 32;
/// Count of a freshly created object: one strong and the collective weak reference.
pub const kTVMFFIObjectBothOne: u64 = kTVMFFIObjectStrongOne | kTVMFFIObjectWeakOne;

pub const kTVMFFIObjectDeleterFlagBitMaskStrong: c_int = 1;
pub const kTVMFFIObjectDeleterFlagBitMaskWeak: c_int = 2;
pub const kTVMFFIObjectDeleterFlagBitMaskBoth: c_int = 3;

pub type TVMFFIObjectDeleter = Option<unsafe extern "C" fn(self_: *mut c_void, flags: c_int)>;

/// The 24-byte header at the start of every object.
#[repr(C)]
pub struct TVMFFIObject {
    /// Low 32 bits: strong count; high 32 bits: weak count.
    pub combined_ref_count: AtomicU64,
    pub type_index: i32,
    pub __padding: u32,
    pub deleter: TVMFFIObjectDeleter,
}

pub type TVMFFIObjectHandle = *mut c_void;

// ---------------------------------------------------------------------------------------------
// DLPack
// ---------------------------------------------------------------------------------------------

pub const kDLCPU: i32 = 1;
pub const kDLCUDA: i32 = 2;
pub const kDLCUDAHost: i32 = 3;
pub const kDLOpenCL: i32 = 4;
pub const kDLVulkan: i32 = 7;
pub const kDLMetal: i32 = 8;
pub const kDLVPI: i32 = 9;
pub const kDLROCM: i32 = 10;
pub const kDLROCMHost: i32 = 11;
pub const kDLExtDev: i32 = 12;
pub const kDLCUDAManaged: i32 = 13;
pub const kDLOneAPI: i32 = 14;
pub const kDLWebGPU: i32 = 15;
pub const kDLHexagon: i32 = 16;
pub const kDLMAIA: i32 = 17;
pub const kDLTrn: i32 = 18;

pub const kDLInt: u8 = 0;
pub const kDLUInt: u8 = 1;
pub const kDLFloat: u8 = 2;
pub const kDLOpaqueHandle: u8 = 3;
pub const kDLBfloat: u8 = 4;
pub const kDLComplex: u8 = 5;
pub const kDLBool: u8 = 6;
pub const kDLFloat8_e3m4: u8 = 7;
pub const kDLFloat8_e4m3: u8 = 8;
pub const kDLFloat8_e4m3b11fnuz: u8 = 9;
pub const kDLFloat8_e4m3fn: u8 = 10;
pub const kDLFloat8_e4m3fnuz: u8 = 11;
pub const kDLFloat8_e5m2: u8 = 12;
pub const kDLFloat8_e5m2fnuz: u8 = 13;
pub const kDLFloat8_e8m0fnu: u8 = 14;
pub const kDLFloat6_e2m3fn: u8 = 15;
pub const kDLFloat6_e3m2fn: u8 = 16;
pub const kDLFloat4_e2m1fn: u8 = 17;

pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1;
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 2;
pub const DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED: u64 = 4;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DLPackVersion {
    pub major: u32,
    pub minor: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DLDevice {
    pub device_type: i32,
    pub device_id: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}

#[repr(C)]
pub struct DLManagedTensor {
    pub dl_tensor: DLTensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(self_: *mut DLManagedTensor)>,
}

#[repr(C)]
pub struct DLManagedTensorVersioned {
    pub version: DLPackVersion,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(self_: *mut DLManagedTensorVersioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}

/// The error callback of [`DLPackManagedTensorAllocator`]: `(error_ctx, kind, message)`.
pub type DLPackSetError = Option<
    unsafe extern "C" fn(error_ctx: *mut c_void, kind: *const c_char, message: *const c_char),
>;
/// A framework tensor (`PyObject*`) to a managed tensor the caller owns; 0 on success, else a
/// Python error set.
pub type DLPackManagedTensorFromPyObjectNoSync = Option<
    unsafe extern "C" fn(py_object: *mut c_void, out: *mut *mut DLManagedTensorVersioned) -> c_int,
>;
/// A managed tensor to a new framework tensor (`PyObject*`), owning it on success.
pub type DLPackManagedTensorToPyObjectNoSync = Option<
    unsafe extern "C" fn(tensor: *mut DLManagedTensorVersioned, out: *mut *mut c_void) -> c_int,
>;
/// A borrowed `DLTensor` view of a framework tensor (`PyObject*`).
pub type DLPackDLTensorFromPyObjectNoSync =
    Option<unsafe extern "C" fn(py_object: *mut c_void, out: *mut DLTensor) -> c_int>;
/// The framework's current stream of a device (NULL for the default or none).
pub type DLPackCurrentWorkStream = Option<
    unsafe extern "C" fn(device_type: i32, device_id: i32, out_stream: *mut *mut c_void) -> c_int,
>;

/// `DLPackExchangeAPIHeader`: the version of a table and an older one from the same producer.
#[repr(C)]
#[derive(Debug)]
pub struct DLPackExchangeAPIHeader {
    pub version: DLPackVersion,
    pub prev_api: *mut DLPackExchangeAPIHeader,
}

/// `DLPackExchangeAPI`: a framework's C-level DLPack entry points, found on its tensor type as
/// `__dlpack_c_exchange_api__` (a capsule named `"dlpack_exchange_api"`).
#[repr(C)]
#[derive(Debug)]
pub struct DLPackExchangeAPI {
    pub header: DLPackExchangeAPIHeader,
    pub managed_tensor_allocator: DLPackManagedTensorAllocator,
    pub managed_tensor_from_py_object_no_sync: DLPackManagedTensorFromPyObjectNoSync,
    pub managed_tensor_to_py_object_no_sync: DLPackManagedTensorToPyObjectNoSync,
    pub dltensor_from_py_object_no_sync: DLPackDLTensorFromPyObjectNoSync,
    pub current_work_stream: DLPackCurrentWorkStream,
}

// ---------------------------------------------------------------------------------------------
// Any
// ---------------------------------------------------------------------------------------------

/// Payload of [`TVMFFIAny`].
#[repr(C)]
#[derive(Clone, Copy)]
pub union TVMFFIAnyPayload {
    pub v_int64: i64,
    pub v_float64: f64,
    pub v_ptr: *mut c_void,
    pub v_c_str: *const c_char,
    pub v_obj: *mut TVMFFIObject,
    pub v_dtype: DLDataType,
    pub v_device: DLDevice,
    pub v_bytes: [u8; 8],
    pub v_uint64: u64,
}

/// The 16-byte tagged value. `zero_padding` doubles as `small_str_len`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TVMFFIAny {
    pub type_index: i32,
    /// Zero, or the byte length of a small string or small bytes value.
    pub small_str_len: u32,
    pub payload: TVMFFIAnyPayload,
}

impl TVMFFIAny {
    /// The None value (all bits zero).
    pub const NONE: TVMFFIAny = TVMFFIAny {
        type_index: kTVMFFINone,
        small_str_len: 0,
        payload: TVMFFIAnyPayload { v_uint64: 0 },
    };

    /// A borrowed view of a NUL-terminated C string (`kTVMFFIRawStr`), valid while it is.
    pub const fn raw_c_str(text: *const c_char) -> TVMFFIAny {
        TVMFFIAny {
            type_index: kTVMFFIRawStr,
            small_str_len: 0,
            payload: TVMFFIAnyPayload { v_c_str: text },
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Cells
// ---------------------------------------------------------------------------------------------

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TVMFFIByteArray {
    pub data: *const c_char,
    pub size: usize,
}

impl TVMFFIByteArray {
    /// The empty array (NULL data, size 0).
    pub const EMPTY: TVMFFIByteArray = TVMFFIByteArray {
        data: std::ptr::null(),
        size: 0,
    };

    /// A view of `bytes`, valid while they are.
    pub const fn from_bytes(bytes: &[u8]) -> TVMFFIByteArray {
        TVMFFIByteArray {
            data: bytes.as_ptr().cast(),
            size: bytes.len(),
        }
    }

    /// A view of the UTF-8 bytes of `text`, valid while it is.
    pub const fn from_text(text: &str) -> TVMFFIByteArray {
        Self::from_bytes(text.as_bytes())
    }

    /// The bytes viewed (empty for size 0, whatever `data` is).
    ///
    /// # Safety
    /// `data` points at `size` readable bytes that stay alive and unchanged for `'a`.
    pub unsafe fn as_bytes<'a>(&self) -> &'a [u8] {
        if self.size == 0 {
            return &[];
        }
        // SAFETY: guaranteed by the caller.
        unsafe { std::slice::from_raw_parts(self.data.cast(), self.size) }
    }

    /// The text viewed, or the UTF-8 error.
    ///
    /// # Safety
    /// As for [`TVMFFIByteArray::as_bytes`].
    pub unsafe fn to_str<'a>(&self) -> Result<&'a str, std::str::Utf8Error> {
        // SAFETY: forwarded.
        std::str::from_utf8(unsafe { self.as_bytes() })
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TVMFFIShapeCell {
    pub data: *const i64,
    pub size: usize,
}

#[repr(C)]
pub struct TVMFFISeqCell {
    pub data: *mut c_void,
    pub size: i64,
    pub capacity: i64,
    pub data_deleter: Option<unsafe extern "C" fn(*mut c_void)>,
}

pub const kTVMFFIBacktraceUpdateModeReplace: i32 = 0;
pub const kTVMFFIBacktraceUpdateModeAppend: i32 = 1;

#[repr(C)]
pub struct TVMFFIErrorCell {
    pub kind: TVMFFIByteArray,
    pub message: TVMFFIByteArray,
    pub backtrace: TVMFFIByteArray,
    pub update_backtrace: Option<
        unsafe extern "C" fn(
            self_: TVMFFIObjectHandle,
            backtrace: *const TVMFFIByteArray,
            mode: i32,
        ),
    >,
    pub cause_chain: TVMFFIObjectHandle,
    pub extra_context: TVMFFIObjectHandle,
}

pub type TVMFFISafeCallType = Option<
    unsafe extern "C" fn(
        handle: *mut c_void,
        args: *const TVMFFIAny,
        num_args: i32,
        result: *mut TVMFFIAny,
    ) -> c_int,
>;

#[repr(C)]
pub struct TVMFFIFunctionCell {
    pub safe_call: TVMFFISafeCallType,
    pub cpp_call: *mut c_void,
}

#[repr(C)]
pub struct TVMFFIOpaqueObjectCell {
    pub handle: *mut c_void,
}

/// The payload cell of an object whose cell follows the 24-byte header (`ffi.OpaquePyObject`,
/// and the other cells of the header: string, shape, error, function, ...).
///
/// # Safety
/// `obj` points at a live object whose type stores a `T` right after the header.
pub unsafe fn object_cell<T>(obj: *const TVMFFIObject) -> *mut T {
    // SAFETY: the header is 24 bytes and the cell follows it, per the caller's promise.
    unsafe { obj.cast_mut().add(1).cast() }
}

// ---------------------------------------------------------------------------------------------
// Reflection
// ---------------------------------------------------------------------------------------------

pub const kTVMFFIFieldFlagBitMaskWritable: i64 = 1 << 0;
pub const kTVMFFIFieldFlagBitMaskHasDefault: i64 = 1 << 1;
pub const kTVMFFIFieldFlagBitMaskIsStaticMethod: i64 = 1 << 2;
pub const kTVMFFIFieldFlagBitMaskSEqHashIgnore: i64 = 1 << 3;
pub const kTVMFFIFieldFlagBitMaskSEqHashDef: i64 = 1 << 4;
pub const kTVMFFIFieldFlagBitMaskDefaultFromFactory: i64 = 1 << 5;
pub const kTVMFFIFieldFlagBitMaskReprOff: i64 = 1 << 6;
pub const kTVMFFIFieldFlagBitMaskCompareOff: i64 = 1 << 7;
pub const kTVMFFIFieldFlagBitMaskHashOff: i64 = 1 << 8;
pub const kTVMFFIFieldFlagBitMaskInitOff: i64 = 1 << 9;
pub const kTVMFFIFieldFlagBitMaskKwOnly: i64 = 1 << 10;
pub const kTVMFFIFieldFlagBitMaskSetterIsFunctionObj: i64 = 1 << 11;
pub const kTVMFFIFieldFlagBitMaskSEqHashDefSimple: i64 = 1 << 12;

pub const kTVMFFISEqHashKindUnsupported: i32 = 0;
pub const kTVMFFISEqHashKindTreeNode: i32 = 1;
pub const kTVMFFISEqHashKindFreeVar: i32 = 2;
pub const kTVMFFISEqHashKindDAGNode: i32 = 3;
pub const kTVMFFISEqHashKindConstTreeNode: i32 = 4;
pub const kTVMFFISEqHashKindUniqueInstance: i32 = 5;

pub type TVMFFIFieldGetter =
    Option<unsafe extern "C" fn(field: *mut c_void, result: *mut TVMFFIAny) -> c_int>;
pub type TVMFFIFieldSetter =
    Option<unsafe extern "C" fn(field: *mut c_void, value: *const TVMFFIAny) -> c_int>;
pub type TVMFFIObjectCreator =
    Option<unsafe extern "C" fn(result: *mut TVMFFIObjectHandle) -> c_int>;

#[repr(C)]
pub struct TVMFFIFieldInfo {
    pub name: TVMFFIByteArray,
    pub doc: TVMFFIByteArray,
    pub metadata: TVMFFIByteArray,
    pub flags: i64,
    pub size: i64,
    pub alignment: i64,
    pub offset: i64,
    pub getter: TVMFFIFieldGetter,
    /// A `TVMFFIFieldSetter`, or a Function handle when `SetterIsFunctionObj` is set.
    pub setter: *mut c_void,
    pub default_value_or_factory: TVMFFIAny,
    pub field_static_type_index: i32,
}

#[repr(C)]
pub struct TVMFFIMethodInfo {
    pub name: TVMFFIByteArray,
    pub doc: TVMFFIByteArray,
    pub metadata: TVMFFIByteArray,
    pub flags: i64,
    pub method: TVMFFIAny,
}

#[repr(C)]
pub struct TVMFFITypeMetadata {
    pub doc: TVMFFIByteArray,
    pub creator: TVMFFIObjectCreator,
    pub total_size: i32,
    pub structural_eq_hash_kind: i32,
}

#[repr(C)]
pub struct TVMFFITypeAttrColumn {
    pub data: *const TVMFFIAny,
    pub size: i32,
    pub begin_index: i32,
}

#[repr(C)]
pub struct TVMFFITypeInfo {
    pub type_index: i32,
    pub type_depth: i32,
    pub type_key: TVMFFIByteArray,
    pub type_ancestors: *const *const TVMFFITypeInfo,
    pub type_key_hash: u64,
    pub num_fields: i32,
    pub num_methods: i32,
    pub fields: *const TVMFFIFieldInfo,
    pub methods: *const TVMFFIMethodInfo,
    pub metadata: *const TVMFFITypeMetadata,
}

// ---------------------------------------------------------------------------------------------
// Allocators and environment
// ---------------------------------------------------------------------------------------------

#[repr(C)]
pub struct TVMFFIObjectAllocHeader {
    pub delete_space: Option<unsafe extern "C" fn(body: *mut c_void)>,
}

#[repr(C)]
pub struct TVMFFICustomAllocator {
    pub allocate: Option<
        unsafe extern "C" fn(
            size: usize,
            alignment: usize,
            type_index: i32,
            context: *mut c_void,
        ) -> *mut c_void,
    >,
    pub context: *mut c_void,
}

pub type TVMFFIStreamHandle = *mut c_void;

/// Allocates a tensor shaped like `prototype` (device, ndim, shape, dtype); 0 on success, else
/// the reason reported through `set_error`.
pub type DLPackManagedTensorAllocator = Option<
    unsafe extern "C" fn(
        prototype: *mut DLTensor,
        out: *mut *mut DLManagedTensorVersioned,
        error_ctx: *mut c_void,
        set_error: DLPackSetError,
    ) -> c_int,
>;

// ---------------------------------------------------------------------------------------------
// The C functions. Defined by the library that owns the process state (`tvm-ffi-capi` here);
// declared here once for every client.
// ---------------------------------------------------------------------------------------------

unsafe extern "C" {
    pub fn TVMFFIGetVersion(out_version: *mut TVMFFIVersion);

    pub fn TVMFFIObjectIncRef(obj: TVMFFIObjectHandle) -> c_int;
    pub fn TVMFFIObjectDecRef(obj: TVMFFIObjectHandle) -> c_int;
    pub fn TVMFFIObjectCreateOpaque(
        handle: *mut c_void,
        type_index: i32,
        deleter: Option<unsafe extern "C" fn(*mut c_void)>,
        out: *mut TVMFFIObjectHandle,
    ) -> c_int;
    pub fn TVMFFIGetCustomAllocator() -> *mut TVMFFICustomAllocator;
    pub fn TVMFFISetCustomAllocator(allocator: *mut TVMFFICustomAllocator) -> c_int;

    pub fn TVMFFITypeKeyToIndex(type_key: *const TVMFFIByteArray, out_tindex: *mut i32) -> c_int;

    pub fn TVMFFIFunctionCreate(
        self_: *mut c_void,
        safe_call: TVMFFISafeCallType,
        deleter: Option<unsafe extern "C" fn(*mut c_void)>,
        out: *mut TVMFFIObjectHandle,
    ) -> c_int;
    pub fn TVMFFIFunctionGetGlobal(
        name: *const TVMFFIByteArray,
        out: *mut TVMFFIObjectHandle,
    ) -> c_int;
    pub fn TVMFFIFunctionSetGlobal(
        name: *const TVMFFIByteArray,
        f: TVMFFIObjectHandle,
        allow_override: c_int,
    ) -> c_int;
    pub fn TVMFFIFunctionSetGlobalFromMethodInfo(
        method_info: *const TVMFFIMethodInfo,
        allow_override: c_int,
    ) -> c_int;
    pub fn TVMFFIAnyViewToOwnedAny(any_view: *const TVMFFIAny, out: *mut TVMFFIAny) -> c_int;
    pub fn TVMFFIFunctionCall(
        func: TVMFFIObjectHandle,
        args: *mut TVMFFIAny,
        num_args: i32,
        result: *mut TVMFFIAny,
    ) -> c_int;

    pub fn TVMFFIErrorMoveFromRaised(result: *mut TVMFFIObjectHandle);
    pub fn TVMFFIErrorSetRaised(error: TVMFFIObjectHandle);
    pub fn TVMFFIErrorSetRaisedFromCStr(kind: *const c_char, message: *const c_char);
    pub fn TVMFFIErrorSetRaisedFromCStrParts(
        kind: *const c_char,
        message_parts: *const *const c_char,
        num_parts: i32,
    );
    pub fn TVMFFIErrorCreate(
        kind: *const TVMFFIByteArray,
        message: *const TVMFFIByteArray,
        backtrace: *const TVMFFIByteArray,
        out: *mut TVMFFIObjectHandle,
    ) -> c_int;
    pub fn TVMFFIErrorCreateWithCauseAndExtraContext(
        kind: *const TVMFFIByteArray,
        message: *const TVMFFIByteArray,
        backtrace: *const TVMFFIByteArray,
        cause_chain: TVMFFIObjectHandle,
        extra_context: TVMFFIObjectHandle,
        out: *mut TVMFFIObjectHandle,
    ) -> c_int;

    pub fn TVMFFITensorFromDLPack(
        from: *mut DLManagedTensor,
        require_alignment: i32,
        require_contiguous: i32,
        out: *mut TVMFFIObjectHandle,
    ) -> c_int;
    pub fn TVMFFITensorToDLPack(from: TVMFFIObjectHandle, out: *mut *mut DLManagedTensor) -> c_int;
    pub fn TVMFFITensorFromDLPackVersioned(
        from: *mut DLManagedTensorVersioned,
        require_alignment: i32,
        require_contiguous: i32,
        out: *mut TVMFFIObjectHandle,
    ) -> c_int;
    pub fn TVMFFITensorToDLPackVersioned(
        from: TVMFFIObjectHandle,
        out: *mut *mut DLManagedTensorVersioned,
    ) -> c_int;
    pub fn TVMFFITensorCreateUnsafeView(
        source: TVMFFIObjectHandle,
        prototype: *const DLTensor,
        out: *mut TVMFFIObjectHandle,
    ) -> c_int;

    pub fn TVMFFIStringFromByteArray(input: *const TVMFFIByteArray, out: *mut TVMFFIAny) -> c_int;
    pub fn TVMFFIBytesFromByteArray(input: *const TVMFFIByteArray, out: *mut TVMFFIAny) -> c_int;
    pub fn TVMFFIBigIntFromByteArray(words: *const TVMFFIByteArray, out: *mut TVMFFIAny) -> c_int;
    pub fn TVMFFIBigIntGetContentByteArray(value: *const TVMFFIAny) -> TVMFFIByteArray;
    pub fn TVMFFIDataTypeFromString(str: *const TVMFFIByteArray, out: *mut DLDataType) -> c_int;
    pub fn TVMFFIDataTypeToString(dtype: *const DLDataType, out: *mut TVMFFIAny) -> c_int;

    pub fn TVMFFITypeRegisterField(type_index: i32, info: *const TVMFFIFieldInfo) -> c_int;
    pub fn TVMFFITypeRegisterMethod(type_index: i32, info: *const TVMFFIMethodInfo) -> c_int;
    pub fn TVMFFITypeRegisterMetadata(
        type_index: i32,
        metadata: *const TVMFFITypeMetadata,
    ) -> c_int;
    pub fn TVMFFITypeRegisterAttr(
        type_index: i32,
        attr_name: *const TVMFFIByteArray,
        attr_value: *const TVMFFIAny,
    ) -> c_int;
    pub fn TVMFFIGetTypeAttrColumn(
        attr_name: *const TVMFFIByteArray,
    ) -> *const TVMFFITypeAttrColumn;
    pub fn TVMFFIBacktrace(
        filename: *const c_char,
        lineno: c_int,
        func: *const c_char,
        cross_ffi_boundary: c_int,
    ) -> *const TVMFFIByteArray;
    pub fn TVMFFITypeGetOrAllocIndex(
        type_key: *const TVMFFIByteArray,
        static_type_index: i32,
        type_depth: i32,
        num_child_slots: i32,
        child_slots_can_overflow: i32,
        parent_type_index: i32,
    ) -> i32;
    pub fn TVMFFIGetTypeInfo(type_index: i32) -> *const TVMFFITypeInfo;
    pub fn TVMFFIHandleInitOnce(
        handle_addr: *mut *mut c_void,
        init_func: Option<unsafe extern "C" fn(result: *mut *mut c_void) -> c_int>,
    ) -> c_int;
    pub fn TVMFFIHandleDeinitOnce(
        handle_addr: *mut *mut c_void,
        deinit_func: Option<unsafe extern "C" fn(handle: *mut c_void) -> c_int>,
    ) -> c_int;

    // Environment (c_env_api.h)
    pub fn TVMFFIEnvSetStream(
        device_type: i32,
        device_id: i32,
        stream: TVMFFIStreamHandle,
        opt_out_original_stream: *mut TVMFFIStreamHandle,
    ) -> c_int;
    pub fn TVMFFIEnvGetStream(device_type: i32, device_id: i32) -> TVMFFIStreamHandle;
    pub fn TVMFFIEnvSetDLPackManagedTensorAllocator(
        allocator: DLPackManagedTensorAllocator,
        write_to_global_context: c_int,
        opt_out_original_allocator: *mut DLPackManagedTensorAllocator,
    ) -> c_int;
    pub fn TVMFFIEnvGetDLPackManagedTensorAllocator() -> DLPackManagedTensorAllocator;
    pub fn TVMFFIEnvTensorAlloc(prototype: *mut DLTensor, out: *mut TVMFFIObjectHandle) -> c_int;
    pub fn TVMFFIEnvCheckSignals() -> c_int;
    pub fn TVMFFIEnvRegisterCAPI(name: *const c_char, symbol: *mut c_void) -> c_int;
    pub fn TVMFFIEnvModLookupFromImports(
        library_ctx: TVMFFIObjectHandle,
        func_name: *const c_char,
        out: *mut TVMFFIObjectHandle,
    ) -> c_int;
    pub fn TVMFFIEnvModRegisterContextSymbol(name: *const c_char, symbol: *mut c_void) -> c_int;
    pub fn TVMFFIEnvModRegisterSystemLibSymbol(name: *const c_char, symbol: *mut c_void) -> c_int;
}

/// `allow_override` of `TVMFFIFunctionSetGlobal` that registers a default implementation: it
/// never displaces an entry, and a later registration of the name replaces it without an error.
pub const TVM_FFI_GLOBAL_DEFAULT: c_int = 2;

// ---------------------------------------------------------------------------------------------
// tvm/ffi/extra/shared_state.h: state the copies of the Rust safe API in a process share
// ---------------------------------------------------------------------------------------------

unsafe extern "C" {
    pub fn TVMFFIExtContainerLock(obj: *const c_void) -> i32;
    pub fn TVMFFIExtContainerUnlock(obj: *const c_void);
    pub fn TVMFFIExtTensorMarkReadOnly(obj: *const c_void, read_only: i32) -> c_int;
    pub fn TVMFFIExtTensorIsReadOnly(obj: *const c_void) -> i32;
}

// ---------------------------------------------------------------------------------------------
// tvm/ffi/extra/device_api.h: the C form of the device API
// ---------------------------------------------------------------------------------------------

/// The table layout version of `tvm/ffi/extra/device_api.h`.
pub const TVM_FFI_DEVICE_API_TABLE_VERSION: u32 = 1;

/// The functions of one kind of device, as a backend library registers them
/// (`TVMFFIDeviceAPITable`). Every entry but `release` is required.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TVMFFIDeviceAPITable {
    /// `sizeof(TVMFFIDeviceAPITable)` as the backend was compiled.
    pub struct_size: u32,
    /// `TVM_FFI_DEVICE_API_TABLE_VERSION` as the backend was compiled.
    pub version: u32,
    /// The backend's context, passed to every function.
    pub self_: *mut c_void,
    /// A short NUL-terminated name for messages.
    pub name: *const c_char,
    /// Writes an attribute (TVM's `DeviceAttrKind` numbering) of a device.
    pub get_attr: Option<
        unsafe extern "C" fn(
            this: *mut c_void,
            device: DLDevice,
            kind: i32,
            out: *mut TVMFFIAny,
        ) -> c_int,
    >,
    /// Allocates `nbytes` aligned to `alignment`.
    pub alloc: Option<
        unsafe extern "C" fn(
            this: *mut c_void,
            device: DLDevice,
            nbytes: usize,
            alignment: usize,
            dtype_hint: DLDataType,
            out: *mut *mut c_void,
        ) -> c_int,
    >,
    /// Frees memory from `alloc`.
    pub free: Option<
        unsafe extern "C" fn(this: *mut c_void, device: DLDevice, ptr: *mut c_void) -> c_int,
    >,
    /// Copies one tensor into another on a stream.
    pub copy: Option<
        unsafe extern "C" fn(
            this: *mut c_void,
            from: *const DLTensor,
            to: *const DLTensor,
            stream: TVMFFIStreamHandle,
        ) -> c_int,
    >,
    /// Creates a stream.
    pub stream_create: Option<
        unsafe extern "C" fn(
            this: *mut c_void,
            device: DLDevice,
            out: *mut TVMFFIStreamHandle,
        ) -> c_int,
    >,
    /// Frees a stream.
    pub stream_free: Option<
        unsafe extern "C" fn(
            this: *mut c_void,
            device: DLDevice,
            stream: TVMFFIStreamHandle,
        ) -> c_int,
    >,
    /// Waits for the work queued on a stream.
    pub stream_sync: Option<
        unsafe extern "C" fn(
            this: *mut c_void,
            device: DLDevice,
            stream: TVMFFIStreamHandle,
        ) -> c_int,
    >,
    /// Optional: releases `self_`.
    pub release: Option<unsafe extern "C" fn(this: *mut c_void)>,
}

// ---------------------------------------------------------------------------------------------
// Layout guards for the hot types (the full check is in the layout tests)
// ---------------------------------------------------------------------------------------------

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<TVMFFIAny>() == 16);
    assert!(size_of::<TVMFFIObject>() == 24);
    assert!(offset_of!(TVMFFIObject, type_index) == 8);
    assert!(offset_of!(TVMFFIObject, deleter) == 16);
    assert!(size_of::<DLTensor>() == 48);
    assert!(size_of::<DLPackExchangeAPIHeader>() == 16);
    assert!(size_of::<DLPackExchangeAPI>() == 56);
    assert!(offset_of!(DLPackExchangeAPI, current_work_stream) == 48);
    assert!(size_of::<TVMFFIErrorCell>() == 72);
    assert!(size_of::<TVMFFISeqCell>() == 32);
    assert!(size_of::<TVMFFITypeInfo>() == 72);
    assert!(size_of::<TVMFFIFieldInfo>() == 120);
    assert!(size_of::<TVMFFIMethodInfo>() == 72);
    assert!(size_of::<TVMFFIDeviceAPITable>() == 88);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_cell_is_the_payload_after_the_header() {
        #[repr(C)]
        struct WithCell {
            header: TVMFFIObject,
            cell: TVMFFIOpaqueObjectCell,
        }
        let object = WithCell {
            header: TVMFFIObject {
                combined_ref_count: AtomicU64::new(1),
                type_index: kTVMFFIOpaquePyObject,
                __padding: 0,
                deleter: None,
            },
            cell: TVMFFIOpaqueObjectCell {
                handle: 0x1234 as *mut c_void,
            },
        };
        // SAFETY: `WithCell` stores its cell right after the header.
        let cell = unsafe { object_cell::<TVMFFIOpaqueObjectCell>(&object.header) };
        assert_eq!(cell.cast_const(), &object.cell as *const _);
        // SAFETY: `cell` points at the live cell of `object`.
        assert_eq!(unsafe { (*cell).handle } as usize, 0x1234);
    }
}
