//! The C ABI contract, checked from both sides in one process whose runtime is `tvm-ffi`:
//!
//! * `layout_matches_on_both_sides`: every size, alignment, field offset, field size and constant
//!   as the C compiler sees `cpp-abi/include` (the table of `c/layout.c`, whose values are also
//!   `_Static_assert`ed against the reference) equals the Rust mirror in `tvm_ffi_sys` (re-exported as `tvm_ffi::abi`).
//! * one `#[test]` per C test function of `c/capi_*.c`: the C API called from C through the
//!   header alone.
//! * `header_functions_are_exported`: every function `c_api.h` declares with `TVM_FFI_DLL`
//!   resolves with `dlsym(RTLD_DEFAULT, ...)` in this executable, as it must for kernels loaded
//!   at run time; `header_declares_exactly_the_abi_functions` keeps the header and `tvm-ffi-sys` in step.

// This binary is a final artifact: it links the process state (and the `testing.*` functions,
// registered when the binary loads).
use tvm_ffi_capi as _;
use tvm_ffi_testing as _;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::mem::{MaybeUninit, align_of, size_of};
use std::path::{Path, PathBuf};

use tvm_ffi::abi;

// ---------------------------------------------------------------------------------------------
// The C side
// ---------------------------------------------------------------------------------------------

/// One row of the layout table of `c/layout.c` (`TvmFfiAbiLayoutEntry`).
#[repr(C)]
struct CLayoutEntry {
    name: *const c_char,
    value: i64,
}

unsafe extern "C" {
    fn tvm_ffi_abi_c_layout_table(out_count: *mut usize) -> *const CLayoutEntry;
    fn tvm_ffi_abi_c_layout(name: *const c_char) -> i64;
}

type CTest = unsafe extern "C" fn(msg_buf: *mut c_char, n: usize) -> c_int;

fn run_c_test(name: &str, test: CTest) {
    let mut buf = vec![0 as c_char; 4096];
    // SAFETY: `buf` is writable for `buf.len()` bytes; the test writes a NUL-terminated message
    // into it and touches nothing else of ours.
    let rc = unsafe { test(buf.as_mut_ptr(), buf.len()) };
    if rc != 0 {
        // SAFETY: the buffer is zero-initialized and the C side NUL-terminates what it writes.
        let message = unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        panic!("C test {name} failed (rc {rc}): {message}");
    }
}

macro_rules! c_tests {
    ($($name:ident),* $(,)?) => {
        mod c_side {
            use std::ffi::{c_char, c_int};
            unsafe extern "C" {
                $(pub fn $name(msg_buf: *mut c_char, n: usize) -> c_int;)*
            }
        }
        $(
            #[test]
            fn $name() {
                run_c_test(stringify!($name), c_side::$name);
            }
        )*
    };
}

c_tests!(
    test_version,
    test_refcount_string,
    test_refcount_foreign_object,
    test_small_string,
    test_heap_string,
    test_bytes,
    test_any_view_to_owned,
    test_function_null_self,
    test_function_self_deleter,
    test_global_function,
    test_error_raise_and_move,
    test_error_create_and_set_raised,
    test_error_update_backtrace,
    test_error_backtrace_on_request,
    test_function_call_bounds_backtraces,
    test_error_cause_chain,
    test_error_propagates_from_callee,
    test_dtype,
    test_array,
    test_type_table,
    test_echo,
    test_handle_init_once,
    test_env_stream,
    test_opaque_object,
);

// ---------------------------------------------------------------------------------------------
// Layout on both sides
// ---------------------------------------------------------------------------------------------

fn c_layout() -> BTreeMap<String, i64> {
    let mut count = 0usize;
    // SAFETY: the function writes the length of a static table and returns its address.
    let table = unsafe { tvm_ffi_abi_c_layout_table(&mut count) };
    assert!(!table.is_null() && count > 0, "the C layout table is empty");
    // SAFETY: `table` points at `count` entries of a static array.
    let entries = unsafe { std::slice::from_raw_parts(table, count) };
    let mut map = BTreeMap::new();
    for entry in entries {
        // SAFETY: names are static NUL-terminated string literals.
        let name = unsafe { CStr::from_ptr(entry.name) }
            .to_str()
            .expect("ASCII name")
            .to_owned();
        assert!(
            map.insert(name.clone(), entry.value).is_none(),
            "C table repeats {name}"
        );
    }
    map
}

fn pointee_size<F>(_: *const F) -> usize {
    size_of::<F>()
}

/// `sizeof(T)` and `alignof(T)` rows for the Rust mirrors.
macro_rules! structs {
    ($($t:ident),* $(,)?) => {{
        let mut rows: Vec<(String, i64)> = Vec::new();
        $(
            rows.push((format!("sizeof({})", stringify!($t)), size_of::<abi::$t>() as i64));
            rows.push((format!("alignof({})", stringify!($t)), align_of::<abi::$t>() as i64));
        )*
        rows
    }};
}

/// `offsetof(T, c_field)` and `sizeof(T.c_field)` rows, the field reached in Rust by `path`
/// (the same name unless the C field lives in an anonymous union).
macro_rules! field {
    ($rows:ident, $t:ident, $c:ident) => {
        field!($rows, $t, $c => $c)
    };
    ($rows:ident, $t:ident, $c:ident => $($path:ident).+) => {{
        let value = MaybeUninit::<abi::$t>::uninit();
        let base = value.as_ptr();
        // SAFETY: only the field's address is computed (no reference, no read) inside a live
        // allocation of the right type.
        let field = unsafe { std::ptr::addr_of!((*base).$($path).+) };
        $rows.push((
            format!("offsetof({}, {})", stringify!($t), stringify!($c)),
            (field as usize - base as usize) as i64,
        ));
        $rows.push((
            format!("sizeof({}.{})", stringify!($t), stringify!($c)),
            pointee_size(field) as i64,
        ));
    }};
}

macro_rules! constants {
    ($rows:ident, $($c:ident),* $(,)?) => {
        $( $rows.push((stringify!($c).to_owned(), abi::$c as i64)); )*
    };
}

fn rust_layout() -> Vec<(String, i64)> {
    let mut rows = structs!(
        TVMFFIVersion,
        TVMFFIObject,
        TVMFFIAny,
        TVMFFIByteArray,
        TVMFFIShapeCell,
        TVMFFISeqCell,
        TVMFFIErrorCell,
        TVMFFIFunctionCell,
        TVMFFIOpaqueObjectCell,
        TVMFFIFieldInfo,
        TVMFFIMethodInfo,
        TVMFFITypeMetadata,
        TVMFFITypeAttrColumn,
        TVMFFITypeInfo,
        TVMFFIObjectAllocHeader,
        TVMFFICustomAllocator,
        DLPackVersion,
        DLDevice,
        DLDataType,
        DLTensor,
        DLManagedTensor,
        DLManagedTensorVersioned,
        TVMFFIDeviceAPITable,
    );

    field!(rows, TVMFFIVersion, major);
    field!(rows, TVMFFIVersion, minor);
    field!(rows, TVMFFIVersion, patch);
    field!(rows, TVMFFIObject, combined_ref_count);
    field!(rows, TVMFFIObject, type_index);
    field!(rows, TVMFFIObject, __padding);
    field!(rows, TVMFFIObject, deleter);
    field!(rows, TVMFFIObject, __ensure_align => deleter);
    field!(rows, TVMFFIAny, type_index);
    field!(rows, TVMFFIAny, zero_padding => small_str_len);
    field!(rows, TVMFFIAny, small_str_len);
    field!(rows, TVMFFIAny, v_int64 => payload.v_int64);
    field!(rows, TVMFFIAny, v_float64 => payload.v_float64);
    field!(rows, TVMFFIAny, v_ptr => payload.v_ptr);
    field!(rows, TVMFFIAny, v_c_str => payload.v_c_str);
    field!(rows, TVMFFIAny, v_obj => payload.v_obj);
    field!(rows, TVMFFIAny, v_dtype => payload.v_dtype);
    field!(rows, TVMFFIAny, v_device => payload.v_device);
    field!(rows, TVMFFIAny, v_bytes => payload.v_bytes);
    field!(rows, TVMFFIAny, v_uint64 => payload.v_uint64);
    field!(rows, TVMFFIByteArray, data);
    field!(rows, TVMFFIByteArray, size);
    field!(rows, TVMFFIShapeCell, data);
    field!(rows, TVMFFIShapeCell, size);
    field!(rows, TVMFFISeqCell, data);
    field!(rows, TVMFFISeqCell, size);
    field!(rows, TVMFFISeqCell, capacity);
    field!(rows, TVMFFISeqCell, data_deleter);
    field!(rows, TVMFFIErrorCell, kind);
    field!(rows, TVMFFIErrorCell, message);
    field!(rows, TVMFFIErrorCell, backtrace);
    field!(rows, TVMFFIErrorCell, update_backtrace);
    field!(rows, TVMFFIErrorCell, cause_chain);
    field!(rows, TVMFFIErrorCell, extra_context);
    field!(rows, TVMFFIFunctionCell, safe_call);
    field!(rows, TVMFFIFunctionCell, cpp_call);
    field!(rows, TVMFFIOpaqueObjectCell, handle);
    field!(rows, TVMFFIFieldInfo, name);
    field!(rows, TVMFFIFieldInfo, doc);
    field!(rows, TVMFFIFieldInfo, metadata);
    field!(rows, TVMFFIFieldInfo, flags);
    field!(rows, TVMFFIFieldInfo, size);
    field!(rows, TVMFFIFieldInfo, alignment);
    field!(rows, TVMFFIFieldInfo, offset);
    field!(rows, TVMFFIFieldInfo, getter);
    field!(rows, TVMFFIFieldInfo, setter);
    field!(rows, TVMFFIFieldInfo, default_value_or_factory);
    field!(rows, TVMFFIFieldInfo, field_static_type_index);
    field!(rows, TVMFFIMethodInfo, name);
    field!(rows, TVMFFIMethodInfo, doc);
    field!(rows, TVMFFIMethodInfo, metadata);
    field!(rows, TVMFFIMethodInfo, flags);
    field!(rows, TVMFFIMethodInfo, method);
    field!(rows, TVMFFITypeMetadata, doc);
    field!(rows, TVMFFITypeMetadata, creator);
    field!(rows, TVMFFITypeMetadata, total_size);
    field!(rows, TVMFFITypeMetadata, structural_eq_hash_kind);
    field!(rows, TVMFFITypeAttrColumn, data);
    field!(rows, TVMFFITypeAttrColumn, size);
    field!(rows, TVMFFITypeAttrColumn, begin_index);
    field!(rows, TVMFFITypeInfo, type_index);
    field!(rows, TVMFFITypeInfo, type_depth);
    field!(rows, TVMFFITypeInfo, type_key);
    field!(rows, TVMFFITypeInfo, type_ancestors);
    field!(rows, TVMFFITypeInfo, type_key_hash);
    field!(rows, TVMFFITypeInfo, num_fields);
    field!(rows, TVMFFITypeInfo, num_methods);
    field!(rows, TVMFFITypeInfo, fields);
    field!(rows, TVMFFITypeInfo, methods);
    field!(rows, TVMFFITypeInfo, metadata);
    field!(rows, TVMFFIObjectAllocHeader, delete_space);
    field!(rows, TVMFFICustomAllocator, allocate);
    field!(rows, TVMFFICustomAllocator, context);
    field!(rows, DLPackVersion, major);
    field!(rows, DLPackVersion, minor);
    field!(rows, DLDevice, device_type);
    field!(rows, DLDevice, device_id);
    field!(rows, DLDataType, code);
    field!(rows, DLDataType, bits);
    field!(rows, DLDataType, lanes);
    field!(rows, DLTensor, data);
    field!(rows, DLTensor, device);
    field!(rows, DLTensor, ndim);
    field!(rows, DLTensor, dtype);
    field!(rows, DLTensor, shape);
    field!(rows, DLTensor, strides);
    field!(rows, DLTensor, byte_offset);
    field!(rows, DLManagedTensor, dl_tensor);
    field!(rows, DLManagedTensor, manager_ctx);
    field!(rows, DLManagedTensor, deleter);
    field!(rows, DLManagedTensorVersioned, version);
    field!(rows, DLManagedTensorVersioned, manager_ctx);
    field!(rows, DLManagedTensorVersioned, deleter);
    field!(rows, DLManagedTensorVersioned, flags);
    field!(rows, DLManagedTensorVersioned, dl_tensor);
    field!(rows, TVMFFIDeviceAPITable, struct_size);
    field!(rows, TVMFFIDeviceAPITable, version);
    field!(rows, TVMFFIDeviceAPITable, self => self_);
    field!(rows, TVMFFIDeviceAPITable, name);
    field!(rows, TVMFFIDeviceAPITable, get_attr);
    field!(rows, TVMFFIDeviceAPITable, alloc);
    field!(rows, TVMFFIDeviceAPITable, free);
    field!(rows, TVMFFIDeviceAPITable, copy);
    field!(rows, TVMFFIDeviceAPITable, stream_create);
    field!(rows, TVMFFIDeviceAPITable, stream_free);
    field!(rows, TVMFFIDeviceAPITable, stream_sync);
    field!(rows, TVMFFIDeviceAPITable, release);

    constants!(
        rows,
        TVM_FFI_VERSION_MAJOR,
        TVM_FFI_VERSION_MINOR,
        TVM_FFI_VERSION_PATCH,
        DLPACK_MAJOR_VERSION,
        DLPACK_MINOR_VERSION,
        TVM_FFI_DEVICE_API_TABLE_VERSION,
        kTVMFFIAny,
        kTVMFFINone,
        kTVMFFIInt,
        kTVMFFIBool,
        kTVMFFIFloat,
        kTVMFFIOpaquePtr,
        kTVMFFIDataType,
        kTVMFFIDevice,
        kTVMFFIDLTensorPtr,
        kTVMFFIRawStr,
        kTVMFFIByteArrayPtr,
        kTVMFFIObjectRValueRef,
        kTVMFFISmallStr,
        kTVMFFISmallBytes,
        kTVMFFIUnchanged,
        kTVMFFIStaticObjectBegin,
        kTVMFFIObject,
        kTVMFFIStr,
        kTVMFFIBytes,
        kTVMFFIError,
        kTVMFFIFunction,
        kTVMFFIShape,
        kTVMFFITensor,
        kTVMFFIArray,
        kTVMFFIMap,
        kTVMFFIModule,
        kTVMFFIOpaquePyObject,
        kTVMFFIList,
        kTVMFFIDict,
        kTVMFFIVisitInterrupt,
        kTVMFFIBigInt,
        kTVMFFIStaticObjectEnd,
        kTVMFFIDynObjectBegin,
        kTVMFFIObjectStrongOne,
        kTVMFFIObjectWeakOne,
        kTVMFFIObjectBothOne,
        kTVMFFIObjectDeleterFlagBitMaskStrong,
        kTVMFFIObjectDeleterFlagBitMaskWeak,
        kTVMFFIObjectDeleterFlagBitMaskBoth,
        kTVMFFIBacktraceUpdateModeReplace,
        kTVMFFIBacktraceUpdateModeAppend,
        kTVMFFIFieldFlagBitMaskWritable,
        kTVMFFIFieldFlagBitMaskHasDefault,
        kTVMFFIFieldFlagBitMaskIsStaticMethod,
        kTVMFFIFieldFlagBitMaskSEqHashIgnore,
        kTVMFFIFieldFlagBitMaskSEqHashDef,
        kTVMFFIFieldFlagBitMaskDefaultFromFactory,
        kTVMFFIFieldFlagBitMaskReprOff,
        kTVMFFIFieldFlagBitMaskCompareOff,
        kTVMFFIFieldFlagBitMaskHashOff,
        kTVMFFIFieldFlagBitMaskInitOff,
        kTVMFFIFieldFlagBitMaskKwOnly,
        kTVMFFIFieldFlagBitMaskSetterIsFunctionObj,
        kTVMFFIFieldFlagBitMaskSEqHashDefSimple,
        kTVMFFISEqHashKindUnsupported,
        kTVMFFISEqHashKindTreeNode,
        kTVMFFISEqHashKindFreeVar,
        kTVMFFISEqHashKindDAGNode,
        kTVMFFISEqHashKindConstTreeNode,
        kTVMFFISEqHashKindUniqueInstance,
        kDLCPU,
        kDLCUDA,
        kDLCUDAHost,
        kDLOpenCL,
        kDLVulkan,
        kDLMetal,
        kDLVPI,
        kDLROCM,
        kDLROCMHost,
        kDLExtDev,
        kDLCUDAManaged,
        kDLOneAPI,
        kDLWebGPU,
        kDLHexagon,
        kDLMAIA,
        kDLTrn,
        kDLInt,
        kDLUInt,
        kDLFloat,
        kDLOpaqueHandle,
        kDLBfloat,
        kDLComplex,
        kDLBool,
        kDLFloat8_e3m4,
        kDLFloat8_e4m3,
        kDLFloat8_e4m3b11fnuz,
        kDLFloat8_e4m3fn,
        kDLFloat8_e4m3fnuz,
        kDLFloat8_e5m2,
        kDLFloat8_e5m2fnuz,
        kDLFloat8_e8m0fnu,
        kDLFloat6_e2m3fn,
        kDLFloat6_e3m2fn,
        kDLFloat4_e2m1fn,
        DLPACK_FLAG_BITMASK_READ_ONLY,
        DLPACK_FLAG_BITMASK_IS_COPIED,
        DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
    );
    rows
}

#[test]
fn layout_matches_on_both_sides() {
    let c = c_layout();
    let rows = rust_layout();
    let mut rust = BTreeMap::new();
    for (name, value) in rows {
        assert!(
            rust.insert(name.clone(), value).is_none(),
            "Rust table repeats {name}"
        );
    }
    // The tables are the full lists (every struct, field and constant), so the comparison
    // cannot pass by comparing nothing.
    assert!(c.len() >= 300, "only {} C layout entries", c.len());

    let mut problems = Vec::new();
    for (name, c_value) in &c {
        match rust.get(name) {
            None => problems.push(format!("{name}: only C has it")),
            Some(rust_value) if rust_value != c_value => {
                problems.push(format!("{name}: C {c_value}, Rust {rust_value}"))
            }
            Some(_) => {}
        }
    }
    for name in rust.keys() {
        if !c.contains_key(name) {
            problems.push(format!("{name}: only Rust has it"));
        }
    }
    assert!(
        problems.is_empty(),
        "C and Rust layouts differ:\n  {}",
        problems.join("\n  ")
    );

    // The lookup entry point agrees with the table.
    let name = CString::new("sizeof(TVMFFIAny)").expect("no NUL");
    // SAFETY: a NUL-terminated name; the function only reads it.
    assert_eq!(unsafe { tvm_ffi_abi_c_layout(name.as_ptr()) }, 16);
    let name = CString::new("no such entry").expect("no NUL");
    // SAFETY: as above.
    assert_eq!(unsafe { tvm_ffi_abi_c_layout(name.as_ptr()) }, i64::MIN);
}

// ---------------------------------------------------------------------------------------------
// Exported symbols
// ---------------------------------------------------------------------------------------------

/// The ABI 0.1 C API has 48 functions (core, handle init-once, environment); the parsers must
/// find at least that many, so the symbol checks cannot pass vacuously.
const MIN_ABI_FUNCTIONS: usize = 48;

fn repo_file(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Removes `/* ... */` and `// ...` comments (the header has no string literal containing them
/// outside preprocessor lines, which the callers skip).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("/*") {
            let end = after.find("*/").expect("unterminated block comment");
            // Keep line structure.
            out.extend(after[..end].chars().filter(|&c| c == '\n'));
            rest = &after[end + 2..];
        } else if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            rest = &rest[end..];
        } else {
            let c = rest.chars().next().expect("non-empty");
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// The headers that declare the functions the runtime exports: the ABI, and the state the
/// copies of the Rust safe API share.
const FUNCTION_HEADERS: [&str; 2] = [
    "../include/tvm/ffi/c_api.h",
    "../include/tvm/ffi/extra/shared_state.h",
];

/// Names of all functions declared `TVM_FFI_DLL <return type> <name>(...)` in those headers.
fn header_function_names() -> Vec<String> {
    let mut names = Vec::new();
    for header in FUNCTION_HEADERS {
        names.extend(declared_function_names(&repo_file(header)));
    }
    names
}

/// Names of the functions one header declares `TVM_FFI_DLL <return type> <name>(...)`.
fn declared_function_names(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut names = Vec::new();
    for line in strip_comments(&text).lines() {
        let line = line.trim();
        let Some(decl) = line.strip_prefix("TVM_FFI_DLL ") else {
            continue;
        };
        let head = decl.split('(').next().expect("split yields one part");
        let name = head
            .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .find(|token| !token.is_empty())
            .unwrap_or_else(|| panic!("no name in declaration: {line}"));
        names.push(name.to_owned());
    }
    names
}

/// Names of the functions in the `extern "C"` block of `tvm_ffi_sys`.
fn abi_rs_function_names() -> BTreeSet<String> {
    let path = repo_file("../../crates/tvm-ffi-sys/src/lib.rs");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("pub fn "))
        .filter_map(|rest| rest.split('(').next())
        .filter(|name| name.starts_with("TVMFFI"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn header_declares_exactly_the_abi_functions() {
    let header: BTreeSet<String> = header_function_names().into_iter().collect();
    let rust = abi_rs_function_names();
    assert!(
        rust.len() >= MIN_ABI_FUNCTIONS,
        "found only {} functions in abi.rs",
        rust.len()
    );
    let only_header: Vec<_> = header.difference(&rust).collect();
    let only_rust: Vec<_> = rust.difference(&header).collect();
    assert!(
        only_header.is_empty() && only_rust.is_empty(),
        "c_api.h and tvm_ffi::abi declare different functions; only in the header: \
         {only_header:?}; only in abi.rs: {only_rust:?}"
    );
}

#[test]
fn header_functions_are_exported() {
    let names = header_function_names();
    assert!(
        names.len() >= MIN_ABI_FUNCTIONS,
        "found only {} TVM_FFI_DLL declarations in c_api.h; the parser is broken",
        names.len()
    );
    let unique: BTreeSet<&String> = names.iter().collect();
    assert_eq!(
        unique.len(),
        names.len(),
        "c_api.h declares a function twice"
    );

    let mut missing = Vec::new();
    for name in &names {
        assert!(
            name.starts_with("TVMFFI"),
            "unexpected exported name {name}"
        );
        let c_name = CString::new(name.as_str()).expect("no NUL in a C identifier");
        // SAFETY: dlsym with RTLD_DEFAULT only reads the NUL-terminated name.
        let address = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c_name.as_ptr()) };
        if address.is_null() {
            missing.push(name.as_str());
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {} functions declared in c_api.h are not exported by the test executable: {missing:?}",
        missing.len(),
        names.len()
    );

    // The exported symbol is the very definition this binary links against.
    let name = CString::new("TVMFFIObjectIncRef").expect("no NUL");
    // SAFETY: as above.
    let exported = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    let linked = abi::TVMFFIObjectIncRef as *const c_void;
    assert_eq!(
        exported.cast_const(),
        linked,
        "dlsym found another TVMFFIObjectIncRef"
    );
}
