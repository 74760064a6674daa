//! Every exported `TVMFFI*` function returns its failure value (`-1`, NULL, ...) with an
//! `InternalError` naming it raised, and never aborts, when a panic happens inside it.
//!
//! The panics are injected at the entry of each function's panic boundary, through the
//! `panic-injection` feature of `tvm-ffi`, which this crate's dev-dependencies turn on. The list
//! of cases is checked against the exports found in this crate's sources, so that a new export
//! without a case fails the test.

use std::collections::BTreeSet;
use std::ffi::c_int;
use std::path::Path;
use std::ptr::{null, null_mut};

use tvm_ffi::abi::{self, TVMFFIAny, TVMFFIByteArray};
use tvm_ffi::boundary::{inject_panic, take_injected_panic};

/// What an export returned, judged against its failure value.
trait Returned {
    /// Whether this is the failure value of its type.
    fn is_failure(&self) -> bool;
}

impl Returned for c_int {
    fn is_failure(&self) -> bool {
        *self == -1
    }
}

impl Returned for () {
    fn is_failure(&self) -> bool {
        // Only the raised error tells.
        true
    }
}

impl<T> Returned for *const T {
    fn is_failure(&self) -> bool {
        self.is_null()
    }
}

impl<T> Returned for *mut T {
    fn is_failure(&self) -> bool {
        self.is_null()
    }
}

impl<T> Returned for Option<T> {
    fn is_failure(&self) -> bool {
        self.is_none()
    }
}

impl Returned for TVMFFIByteArray {
    fn is_failure(&self) -> bool {
        self.data.is_null() && self.size == 0
    }
}

/// One export and a call of it; the call reports whether it returned the failure value.
struct Case {
    name: &'static str,
    call: fn() -> bool,
}

/// One case per export: `Name(arguments);`. The arguments are harmless (NULL or empty, so an
/// export that failed to panic reports an argument error instead of crashing).
macro_rules! cases {
    ($($name:ident($($arg:expr),* $(,)?);)*) => {
        &[$(Case {
            name: stringify!($name),
            call: || {
                // SAFETY: every pointer argument is NULL or valid for the call.
                let returned = unsafe { abi::$name($($arg),*) };
                returned.is_failure()
            },
        }),*]
    };
}

const CASES: &[Case] = cases! {
    TVMFFIGetVersion(null_mut());
    TVMFFIObjectIncRef(null_mut());
    TVMFFIObjectDecRef(null_mut());
    TVMFFIObjectCreateOpaque(null_mut(), abi::kTVMFFIOpaquePyObject, None, null_mut());
    TVMFFIGetCustomAllocator();
    TVMFFISetCustomAllocator(null_mut());
    TVMFFITypeKeyToIndex(null(), null_mut());
    TVMFFIFunctionCreate(null_mut(), None, None, null_mut());
    TVMFFIFunctionGetGlobal(null(), null_mut());
    TVMFFIFunctionSetGlobal(null(), null_mut(), 0);
    TVMFFIFunctionSetGlobalFromMethodInfo(null(), 0);
    TVMFFIAnyViewToOwnedAny(null(), null_mut());
    TVMFFIFunctionCall(live_function(), null_mut(), 0, &mut { TVMFFIAny::NONE });
    TVMFFIErrorMoveFromRaised(null_mut());
    TVMFFIErrorSetRaised(null_mut());
    TVMFFIErrorSetRaisedFromCStr(null(), null());
    TVMFFIErrorSetRaisedFromCStrParts(null(), null(), 0);
    TVMFFIErrorCreate(null(), null(), null(), null_mut());
    TVMFFIErrorCreateWithCauseAndExtraContext(
        null(), null(), null(), null_mut(), null_mut(), null_mut(),
    );
    TVMFFITensorFromDLPack(null_mut(), 0, 0, null_mut());
    TVMFFITensorToDLPack(null_mut(), null_mut());
    TVMFFITensorFromDLPackVersioned(null_mut(), 0, 0, null_mut());
    TVMFFITensorToDLPackVersioned(null_mut(), null_mut());
    TVMFFITensorCreateUnsafeView(null_mut(), null(), null_mut());
    TVMFFIStringFromByteArray(null(), null_mut());
    TVMFFIBytesFromByteArray(null(), null_mut());
    TVMFFIBigIntFromByteArray(null(), null_mut());
    TVMFFIBigIntGetContentByteArray(null());
    TVMFFIDataTypeFromString(null(), null_mut());
    TVMFFIDataTypeToString(null(), null_mut());
    TVMFFITypeRegisterField(abi::kTVMFFIObject, null());
    TVMFFITypeRegisterMethod(abi::kTVMFFIObject, null());
    TVMFFITypeRegisterMetadata(abi::kTVMFFIObject, null());
    TVMFFITypeRegisterAttr(abi::kTVMFFIObject, null(), null());
    TVMFFIGetTypeAttrColumn(null());
    TVMFFIBacktrace(null(), 0, null(), 0);
    TVMFFITypeGetOrAllocIndex(null(), -1, 0, 0, 0, 0);
    TVMFFIGetTypeInfo(-7);
    TVMFFIHandleInitOnce(null_mut(), None);
    TVMFFIHandleDeinitOnce(null_mut(), None);
    TVMFFIEnvSetStream(0, 0, null_mut(), null_mut());
    TVMFFIEnvGetStream(0, 0);
    TVMFFIEnvSetDLPackManagedTensorAllocator(None, 0, null_mut());
    TVMFFIEnvGetDLPackManagedTensorAllocator();
    TVMFFIEnvTensorAlloc(null_mut(), null_mut());
    TVMFFIEnvCheckSignals();
    TVMFFIEnvRegisterCAPI(null(), null_mut());
    TVMFFIEnvModLookupFromImports(null_mut(), null(), null_mut());
    TVMFFIEnvModRegisterContextSymbol(null(), null_mut());
    TVMFFIEnvModRegisterSystemLibSymbol(null(), null_mut());
    TVMFFIExtContainerLock(null());
    TVMFFIExtContainerUnlock(null());
    TVMFFIExtTensorMarkReadOnly(null(), 1);
    TVMFFIExtTensorIsReadOnly(null());
};

/// A function object that lives for the process (`TVMFFIFunctionCall` reads its argument before
/// anything else can fail).
fn live_function() -> abi::TVMFFIObjectHandle {
    static FUNCTION: std::sync::OnceLock<tvm_ffi::Function> = std::sync::OnceLock::new();
    FUNCTION
        .get_or_init(|| tvm_ffi::Function::from_packed(|_| Ok(tvm_ffi::Any::none())))
        .as_object()
        .as_raw()
        .cast()
}

/// The symbols this crate exports: the functions marked `#[no_mangle]` (or named by
/// `export_name`) in its sources.
fn exported_names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut pending_no_mangle = false;
    for path in rust_sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src")) {
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        for line in text.lines().map(str::trim) {
            if let Some(rest) = line.split("export_name").nth(1) {
                let name = rest.split('"').nth(1).expect("export_name = \"...\"");
                names.insert(name.to_owned());
            } else if line.starts_with("#[") && line.contains("no_mangle") {
                pending_no_mangle = true;
            } else if pending_no_mangle && !line.starts_with("#[") {
                let name = line
                    .split("fn ")
                    .nth(1)
                    .and_then(|rest| rest.split(['(', '<']).next())
                    .unwrap_or_else(|| panic!("{}: no function after no_mangle", path.display()));
                names.insert(name.trim().to_owned());
                pending_no_mangle = false;
            }
        }
    }
    names
}

/// The `.rs` files under `dir`, recursively.
fn rust_sources(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            files.extend(rust_sources(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files
}

#[test]
fn every_export_has_a_case() {
    let exported = exported_names();
    assert!(exported.len() >= 50, "found only {exported:?}");
    let cased: BTreeSet<String> = CASES.iter().map(|c| c.name.to_owned()).collect();
    assert_eq!(cased.len(), CASES.len(), "a case is listed twice");
    let missing: Vec<_> = exported.difference(&cased).collect();
    let stale: Vec<_> = cased.difference(&exported).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "exports without a panic case: {missing:?}; cases without an export: {stale:?}"
    );
}

#[test]
fn every_export_returns_its_failure_value_after_a_panic() {
    // Keep the expected panics out of the output; anything else is printed as usual.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let injected = info
            .payload()
            .downcast_ref::<String>()
            .is_some_and(|m| m.starts_with("injected panic in "));
        if !injected {
            default_hook(info);
        }
    }));

    // Set up the lazily created state first, so each call below panics at its own entry.
    live_function();
    let mut failures = Vec::new();
    for case in CASES {
        drop(tvm_ffi::Error::take_raised());
        inject_panic(case.name);
        let failed = (case.call)();
        if let Some(name) = take_injected_panic() {
            failures.push(format!(
                "{name}: did not enter ffi_boundary(\"{name}\", ...)"
            ));
            continue;
        }
        if !failed {
            failures.push(format!("{}: did not return its failure value", case.name));
        }
        let expected = format!("panic in {0}: injected panic in {0}", case.name);
        match tvm_ffi::Error::take_raised() {
            Some(err) if err.kind() == "InternalError" && err.message() == expected => {}
            Some(err) => failures.push(format!("{}: raised {err}", case.name)),
            None => failures.push(format!("{}: raised no error", case.name)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(CASES.len(), exported_names().len());
}
