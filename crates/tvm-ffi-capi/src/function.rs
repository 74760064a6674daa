//! Function objects made from C safe-call pointers, calls, and the global function registry.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{OnceLock, RwLock};

use tvm_ffi::any::AnyView;
use tvm_ffi::boundary::{ffi_boundary_result, ffi_status};
use tvm_ffi::error::{Error, ErrorKind, Result};
use tvm_ffi::function::{Function, FunctionObj};
use tvm_ffi::object::{ObjectRef, alloc_object};
use tvm_ffi_sys::{
    TVMFFIAny, TVMFFIByteArray, TVMFFIMethodInfo, TVMFFIObjectHandle, TVMFFISafeCallType,
    kTVMFFIFunction,
};

use crate::{bytes_arg, non_null, out_arg, text_arg};

/// A function object that forwards to a C safe-call with a user `self` pointer.
#[repr(C)]
struct ExternFunctionObj {
    function: FunctionObj,
    self_: *mut c_void,
    safe_call: TVMFFISafeCallType,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
}

impl Drop for ExternFunctionObj {
    fn drop(&mut self) {
        if let Some(deleter) = self.deleter {
            // SAFETY: the object owns `self_` and releases it exactly once.
            unsafe { deleter(self.self_) };
        }
    }
}

unsafe extern "C" fn extern_trampoline(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> c_int {
    ffi_boundary_result("the safe-call trampoline of a C function", || {
        // SAFETY: the trampoline is installed only on `ExternFunctionObj`, and `handle` is that
        // object.
        let obj = unsafe { &*handle.cast::<ExternFunctionObj>() };
        match obj.safe_call {
            // SAFETY: forwarded per the safe-call convention.
            Some(call) => Ok(unsafe { call(obj.self_, args, num_args, result) }),
            None => Err(missing_safe_call()),
        }
    })
}

/// The error of a function object without a safe-call.
fn missing_safe_call() -> Error {
    Error::new(ErrorKind::InternalError, "function without safe_call")
}

/// Creates a function object from a C safe-call. With NULL `self_` and `deleter` the callee
/// receives the function object as its handle; otherwise it receives `self_`.
///
/// # Safety
/// `safe_call` follows the safe-call convention; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIFunctionCreate(
    self_: *mut c_void,
    safe_call: TVMFFISafeCallType,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    out: *mut TVMFFIObjectHandle,
) -> c_int {
    ffi_status("TVMFFIFunctionCreate", || {
        // SAFETY: per the contract.
        let out = unsafe { out_arg(out, "out")? };
        if safe_call.is_none() {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "TVMFFIFunctionCreate: safe_call must not be NULL"
            );
        }
        let ptr = if self_.is_null() && deleter.is_none() {
            // SAFETY: FunctionObj is repr(C) with the header first and owns nothing.
            unsafe { alloc_object(FunctionObj::new(safe_call), 0, kTVMFFIFunction) }
                .cast::<c_void>()
        } else {
            let value = ExternFunctionObj {
                function: FunctionObj::new(Some(extern_trampoline)),
                self_,
                safe_call,
                deleter,
            };
            // SAFETY: repr(C) with the header first; Drop runs the user deleter.
            unsafe { alloc_object(value, 0, kTVMFFIFunction) }.cast::<c_void>()
        };
        *out = ptr.as_ptr();
        Ok(())
    })
}

/// Calls a function object: forwards to its cell's safe-call with the object as handle.
///
/// The call is never a tail call: this function's frame stays on the stack while the callee
/// runs, because backtraces end at it (the boundary between a foreign caller and the call). An
/// optimized build otherwise jumps to the safe-call, and an error raised inside showed the
/// caller's frames too.
///
/// # Safety
/// `func` is a live function object; `args` holds `num_args` values; `result` is valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIFunctionCall(
    func: TVMFFIObjectHandle,
    args: *mut TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> c_int {
    ffi_boundary_result("TVMFFIFunctionCall", || {
        // SAFETY: per the contract, `func` is a function object.
        let cell = unsafe { (*func.cast::<FunctionObj>()).cell() };
        match cell.safe_call {
            Some(call) => {
                // SAFETY: forwarded per the safe-call convention.
                let status = unsafe { call(func, args, num_args, result) };
                // Emits nothing, but comes after the call, so the call has to return here.
                std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
                Ok(status)
            }
            None => Err(missing_safe_call()),
        }
    })
}

/// One registered global function with its documentation.
pub(crate) struct GlobalEntry {
    pub(crate) function: Function,
    pub(crate) doc: String,
    pub(crate) metadata: String,
    /// A default implementation: any later registration of the name replaces it.
    pub(crate) is_default: bool,
}

/// How a registration treats an entry already under its name (`allow_override` of the C API).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Overwrite {
    /// An existing entry is an error, unless it is a default.
    Refuse,
    /// An existing entry is replaced.
    Replace,
    /// The new entry is a default: an existing entry stays.
    AsDefault,
}

impl Overwrite {
    /// The mode of an `allow_override` argument (`TVM_FFI_GLOBAL_DEFAULT`, non-zero, zero).
    pub(crate) fn from_c(allow_override: c_int) -> Overwrite {
        match allow_override {
            0 => Overwrite::Refuse,
            tvm_ffi_sys::TVM_FFI_GLOBAL_DEFAULT => Overwrite::AsDefault,
            _ => Overwrite::Replace,
        }
    }
}

/// The global function registry, safe for concurrent registration and lookup. Names are kept
/// as bytes (always UTF-8: they are inserted as `&str`), so a C lookup needs no validation.
pub(crate) struct Registry {
    entries: RwLock<HashMap<Vec<u8>, GlobalEntry, BuildHasherDefault<NameHasher>>>,
}

/// The hash of registry names: one rotate, xor and multiply per 8-byte word (the FxHash
/// scheme). Names come from the programs and libraries of the process, not from untrusted
/// input, so a keyed hash (std's SipHash, 4x the instructions of a whole lookup here) buys
/// nothing.
#[derive(Default)]
pub(crate) struct NameHasher(u64);

impl NameHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for NameHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            self.add(u64::from_le_bytes(word.try_into().expect("8 bytes")));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

impl Registry {
    /// The registry, with the core's own functions registered on first use.
    pub(crate) fn global() -> &'static Registry {
        static REGISTRY: OnceLock<Registry> = OnceLock::new();
        REGISTRY.get_or_init(|| {
            let registry = Registry {
                entries: RwLock::new(HashMap::default()),
            };
            for (name, function) in crate::globals::builtin_functions() {
                registry
                    .insert(
                        name,
                        function,
                        String::new(),
                        String::new(),
                        Overwrite::Refuse,
                    )
                    .expect("builtin names are unique");
            }
            // Type attributes of the core's own types, registered with its functions.
            crate::bigint::register_key_hooks().expect("the BigInt map-key hooks register");
            tvm_ffi::convert::register_core_converters()
                .expect("the __ffi_convert__ entries of the core types register");
            registry
        })
    }

    /// Adds an entry; what happens to an existing one is `overwrite`'s to say.
    pub(crate) fn insert(
        &self,
        name: &str,
        function: Function,
        doc: String,
        metadata: String,
        overwrite: Overwrite,
    ) -> Result<()> {
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = entries.get(name.as_bytes()) {
            match overwrite {
                Overwrite::AsDefault => return Ok(()),
                Overwrite::Refuse if !existing.is_default => tvm_ffi::bail!(
                    ErrorKind::RuntimeError,
                    "Global Function `{name}` is already registered"
                ),
                Overwrite::Refuse | Overwrite::Replace => {}
            }
        }
        let entry = GlobalEntry {
            function,
            doc,
            metadata,
            is_default: overwrite == Overwrite::AsDefault,
        };
        let previous = entries.insert(name.as_bytes().to_vec(), entry);
        drop(entries);
        drop(previous);
        Ok(())
    }

    /// The function registered as `name`.
    pub(crate) fn get(&self, name: &str) -> Option<Function> {
        self.get_bytes(name.as_bytes())
    }

    /// The function registered under the name spelled by `name` (none when it is not UTF-8).
    pub(crate) fn get_bytes(&self, name: &[u8]) -> Option<Function> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries.get(name).map(|e| e.function.clone())
    }

    /// Runs `read` on the entry for `name`.
    pub(crate) fn with_entry<T>(
        &self,
        name: &str,
        read: impl FnOnce(&GlobalEntry) -> T,
    ) -> Option<T> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries.get(name.as_bytes()).map(read)
    }

    /// Removes `name`; whether it was registered.
    pub(crate) fn remove(&self, name: &str) -> bool {
        let removed = self
            .entries
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name.as_bytes());
        removed.is_some()
    }

    /// All registered names, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        let mut names: Vec<String> = entries
            .keys()
            .map(|name| String::from_utf8_lossy(name).into_owned())
            .collect();
        names.sort_unstable();
        names
    }
}

/// Looks up a global function; `*out` is an owned reference, or NULL when absent (rc 0).
///
/// # Safety
/// `name` is a valid byte array; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIFunctionGetGlobal(
    name: *const TVMFFIByteArray,
    out: *mut TVMFFIObjectHandle,
) -> c_int {
    ffi_status("TVMFFIFunctionGetGlobal", || {
        // SAFETY: per the contract.
        let (name, out) = unsafe { (bytes_arg(name, "name")?, out_arg(out, "out")?) };
        // A name that is not UTF-8 names no function: absent, like any other missing name.
        *out = Registry::global()
            .get_bytes(name)
            .map_or(std::ptr::null_mut(), |f| {
                f.as_object().clone().into_raw().cast()
            });
        Ok(())
    })
}

/// Borrows a function argument as a `Function`, or a `TypeError`.
fn function_arg(handle: TVMFFIObjectHandle) -> Result<Function> {
    if handle.is_null() {
        tvm_ffi::bail!(ErrorKind::ValueError, "function handle must not be NULL");
    }
    // SAFETY: a non-NULL handle is a live object lent for the call.
    let obj = unsafe { ObjectRef::<tvm_ffi::object::Object>::from_borrowed(handle.cast()) };
    let key = obj.header().type_key();
    obj.downcast::<FunctionObj>()
        .map(Function::from_object)
        .map_err(|_| {
            Error::new(
                ErrorKind::TypeError,
                format!("expected ffi.Function, got {key}"),
            )
        })
}

/// Registers `f` as the global `name` (retained).
///
/// # Safety
/// `name` is a valid byte array; `f` is a live function object.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIFunctionSetGlobal(
    name: *const TVMFFIByteArray,
    f: TVMFFIObjectHandle,
    allow_override: c_int,
) -> c_int {
    ffi_status("TVMFFIFunctionSetGlobal", || {
        // SAFETY: per the contract.
        let name = unsafe { text_arg(name, "name")? };
        let function = function_arg(f)?;
        Registry::global().insert(
            name,
            function,
            String::new(),
            String::new(),
            Overwrite::from_c(allow_override),
        )
    })
}

/// Registers a global function from a method record (name, doc and metadata copied).
///
/// # Safety
/// `info` is a valid method record holding a function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIFunctionSetGlobalFromMethodInfo(
    info: *const TVMFFIMethodInfo,
    allow_override: c_int,
) -> c_int {
    ffi_status("TVMFFIFunctionSetGlobalFromMethodInfo", || {
        // SAFETY: per the contract.
        let info = unsafe { non_null(info, "method info")? };
        // SAFETY: the record's arrays and value are valid for the call.
        let (name, doc, metadata, method) = unsafe {
            (
                text_arg(&info.name, "name")?,
                bytes_arg(&info.doc, "doc")?,
                bytes_arg(&info.metadata, "metadata")?,
                AnyView::from_raw(info.method),
            )
        };
        let function: Function = method.cast()?;
        Registry::global().insert(
            name,
            function,
            String::from_utf8_lossy(doc).into_owned(),
            String::from_utf8_lossy(metadata).into_owned(),
            Overwrite::from_c(allow_override),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tvm_ffi::Any;

    #[test]
    fn a_default_yields_to_any_later_registration_and_never_displaces() {
        let registry = Registry {
            entries: RwLock::new(HashMap::default()),
        };
        let constant = |value: i64| Function::from_packed(move |_| Ok(Any::from(value)));
        let value_of = |name: &str| registry.get(name).unwrap().call(()).unwrap().cast::<i64>();
        let insert = |name: &str, value: i64, overwrite: Overwrite| {
            registry.insert(
                name,
                constant(value),
                String::new(),
                String::new(),
                overwrite,
            )
        };
        insert("x.f", 1, Overwrite::AsDefault).unwrap();
        // A plain registration of a default's name replaces it, and is no longer a default.
        insert("x.f", 2, Overwrite::Refuse).unwrap();
        assert_eq!(value_of("x.f").unwrap(), 2);
        assert!(insert("x.f", 3, Overwrite::Refuse).is_err());
        // A default never displaces an entry.
        insert("x.f", 4, Overwrite::AsDefault).unwrap();
        assert_eq!(value_of("x.f").unwrap(), 2);
        assert_eq!(Overwrite::from_c(0), Overwrite::Refuse);
        assert_eq!(Overwrite::from_c(1), Overwrite::Replace);
        assert_eq!(Overwrite::from_c(-3), Overwrite::Replace);
        assert_eq!(
            Overwrite::from_c(tvm_ffi_sys::TVM_FFI_GLOBAL_DEFAULT),
            Overwrite::AsDefault
        );
    }

    #[test]
    fn names_of_every_length_are_found_by_text_and_by_bytes() {
        let registry = Registry {
            entries: RwLock::new(HashMap::default()),
        };
        // Names that differ only in their last word, and lengths across the 8-byte words.
        let names: Vec<String> = (1..=20)
            .map(|len| "registry.x".repeat(3)[..len].to_owned())
            .collect();
        for (i, name) in names.iter().enumerate() {
            let value = i as i64;
            let function = Function::from_packed(move |_| Ok(Any::from(value)));
            registry
                .insert(
                    name,
                    function,
                    String::new(),
                    String::new(),
                    Overwrite::Refuse,
                )
                .unwrap();
        }
        for (i, name) in names.iter().enumerate() {
            let by_text = registry.get(name).expect("registered");
            assert_eq!(by_text.call(()).unwrap().cast::<i64>().unwrap(), i as i64);
            let by_bytes = registry.get_bytes(name.as_bytes()).expect("registered");
            assert_eq!(by_bytes.call(()).unwrap().cast::<i64>().unwrap(), i as i64);
        }
        assert!(registry.get_bytes(b"registry.\xff").is_none());
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(registry.names(), sorted);
        assert!(registry.remove(&names[3]));
        assert!(registry.get(&names[3]).is_none());
    }
}
