//! The environment: per-thread streams and tensor allocators, signal checks through the host
//! interpreter, context symbols for loaded libraries, and the system library's symbol table.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};

use tvm_ffi::boundary::{ffi_boundary, ffi_status};
use tvm_ffi::error::{Error, ErrorKind};
use tvm_ffi::function::Function;
use tvm_ffi_sys::{DLPackManagedTensorAllocator, TVMFFIObjectHandle, TVMFFIStreamHandle};

use crate::args::{cstr_arg, out_arg};

thread_local! {
    static STREAMS: RefCell<HashMap<(i32, i32), usize>> = RefCell::new(HashMap::new());
    /// The thread's tensor allocator: `None` until the thread sets one (the process-wide one
    /// applies), then what it set, NULL ("no allocator") included.
    static TLS_ALLOCATOR: Cell<Option<DLPackManagedTensorAllocator>> = const { Cell::new(None) };
}

fn global_allocator() -> DLPackManagedTensorAllocator {
    *GLOBAL_ALLOCATOR.lock().unwrap_or_else(|e| e.into_inner())
}

/// The calling thread's allocator: the one it set, or the process-wide one if it set none.
fn thread_allocator() -> DLPackManagedTensorAllocator {
    TLS_ALLOCATOR
        .try_with(Cell::get)
        .ok()
        .flatten()
        .unwrap_or_else(global_allocator)
}

static GLOBAL_ALLOCATOR: Mutex<DLPackManagedTensorAllocator> = Mutex::new(None);

/// Sets the calling thread's current stream for a device; the previous one (NULL if never set)
/// goes to `opt_out_original` when non-NULL.
///
/// # Safety
/// `opt_out_original` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIEnvSetStream(
    device_type: i32,
    device_id: i32,
    stream: TVMFFIStreamHandle,
    opt_out_original: *mut TVMFFIStreamHandle,
) -> c_int {
    ffi_status("TVMFFIEnvSetStream", || {
        let previous = STREAMS.with(|s| {
            let mut s = s.borrow_mut();
            if stream.is_null() {
                s.remove(&(device_type, device_id))
            } else {
                s.insert((device_type, device_id), stream as usize)
            }
        });
        // SAFETY: per the contract.
        if let Some(out) = unsafe { opt_out_original.as_mut() } {
            *out = previous.unwrap_or(0) as TVMFFIStreamHandle;
        }
        Ok(())
    })
}

/// The calling thread's current stream for a device, or NULL.
#[unsafe(no_mangle)]
pub extern "C" fn TVMFFIEnvGetStream(device_type: i32, device_id: i32) -> TVMFFIStreamHandle {
    ffi_boundary("TVMFFIEnvGetStream", || {
        STREAMS
            .try_with(|s| {
                s.borrow()
                    .get(&(device_type, device_id))
                    .copied()
                    .unwrap_or(0)
            })
            .unwrap_or(0) as TVMFFIStreamHandle
    })
}

/// Sets the calling thread's tensor allocator (and the process-wide one if
/// `write_to_global_context` is non-zero); the thread's previous one (the process-wide one if it
/// had set none) goes to `opt_out_original`. A thread starts with the process-wide allocator;
/// setting NULL leaves it with none, and tensor allocation on it fails, as in Apache TVM FFI.
///
/// # Safety
/// `opt_out_original` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIEnvSetDLPackManagedTensorAllocator(
    allocator: DLPackManagedTensorAllocator,
    write_to_global_context: c_int,
    opt_out_original: *mut DLPackManagedTensorAllocator,
) -> c_int {
    ffi_status("TVMFFIEnvSetDLPackManagedTensorAllocator", || {
        let previous = thread_allocator();
        TLS_ALLOCATOR.with(|a| a.set(Some(allocator)));
        if write_to_global_context != 0 {
            *GLOBAL_ALLOCATOR.lock().unwrap_or_else(|e| e.into_inner()) = allocator;
        }
        // SAFETY: per the contract.
        if let Some(out) = unsafe { opt_out_original.as_mut() } {
            *out = previous;
        }
        Ok(())
    })
}

/// The calling thread's tensor allocator if set, else the process-wide one.
#[unsafe(no_mangle)]
pub extern "C" fn TVMFFIEnvGetDLPackManagedTensorAllocator() -> DLPackManagedTensorAllocator {
    ffi_boundary("TVMFFIEnvGetDLPackManagedTensorAllocator", || {
        thread_allocator()
    })
}

static CHECK_SIGNALS: AtomicUsize = AtomicUsize::new(0);
static GIL_ENSURE: AtomicUsize = AtomicUsize::new(0);
static GIL_RELEASE: AtomicUsize = AtomicUsize::new(0);

/// Registers a host-interpreter function: `PyErr_CheckSignals`, `PyGILState_Ensure` or
/// `PyGILState_Release`; any other name is a `ValueError`.
///
/// # Safety
/// `name` is NUL-terminated; `symbol` is the named function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIEnvRegisterCAPI(name: *const c_char, symbol: *mut c_void) -> c_int {
    ffi_status("TVMFFIEnvRegisterCAPI", || {
        // SAFETY: per the contract.
        let name = unsafe { cstr_arg(name, "name")? };
        let slot = match name {
            "PyErr_CheckSignals" => &CHECK_SIGNALS,
            "PyGILState_Ensure" => &GIL_ENSURE,
            "PyGILState_Release" => &GIL_RELEASE,
            other => tvm_ffi::bail!(ErrorKind::ValueError, "Unknown env API `{other}`"),
        };
        slot.store(symbol as usize, Ordering::Release);
        Ok(())
    })
}

/// Asks the host interpreter whether a signal (Ctrl-C) is pending: -1 if so (the interpreter's
/// exception is then pending; no error is raised here), else 0.
#[unsafe(no_mangle)]
pub extern "C" fn TVMFFIEnvCheckSignals() -> c_int {
    ffi_boundary("TVMFFIEnvCheckSignals", || {
        let check = CHECK_SIGNALS.load(Ordering::Acquire);
        if check == 0 {
            return 0;
        }
        let ensure = GIL_ENSURE.load(Ordering::Acquire);
        let release = GIL_RELEASE.load(Ordering::Acquire);
        // SAFETY: the registered symbols have the CPython signatures; the GIL is taken around the
        // check when the state functions were registered.
        unsafe {
            let check: extern "C" fn() -> c_int = std::mem::transmute(check);
            if ensure != 0 && release != 0 {
                let ensure: extern "C" fn() -> c_int = std::mem::transmute(ensure);
                let release: extern "C" fn(c_int) = std::mem::transmute(release);
                let state = ensure();
                let rc = check();
                release(state);
                if rc != 0 { -1 } else { 0 }
            } else if check() != 0 {
                -1
            } else {
                0
            }
        }
    })
}

static CONTEXT_SYMBOLS: Mutex<Vec<(String, usize)>> = Mutex::new(Vec::new());
static SYSTEM_LIB_SYMBOLS: RwLock<Option<HashMap<String, usize>>> = RwLock::new(None);

/// Records a symbol written into every library loaded afterwards that defines a `void*` global
/// of the same name.
///
/// # Safety
/// `name` is NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIEnvModRegisterContextSymbol(
    name: *const c_char,
    symbol: *mut c_void,
) -> c_int {
    ffi_status("TVMFFIEnvModRegisterContextSymbol", || {
        // SAFETY: per the contract.
        let name = unsafe { cstr_arg(name, "name")? };
        let mut symbols = CONTEXT_SYMBOLS.lock().unwrap_or_else(|e| e.into_inner());
        symbols.retain(|(n, _)| n != name);
        symbols.push((name.to_owned(), symbol as usize));
        Ok(())
    })
}

/// The registered context symbols (name, address).
pub(crate) fn context_symbols() -> Vec<(String, usize)> {
    CONTEXT_SYMBOLS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// Records a symbol of the system library (functions linked into the program), such as
/// `__tvm_ffi_<prefix><name>`. Re-registering a name overrides it.
///
/// # Safety
/// `name` is NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIEnvModRegisterSystemLibSymbol(
    name: *const c_char,
    symbol: *mut c_void,
) -> c_int {
    ffi_status("TVMFFIEnvModRegisterSystemLibSymbol", || {
        // SAFETY: per the contract.
        let name = unsafe { cstr_arg(name, "name")? };
        let mut table = SYSTEM_LIB_SYMBOLS
            .write()
            .unwrap_or_else(|e| e.into_inner());
        table
            .get_or_insert_with(HashMap::new)
            .insert(name.to_owned(), symbol as usize);
        Ok(())
    })
}

/// The address registered for a system-library symbol.
pub(crate) fn system_lib_symbol(name: &str) -> Option<usize> {
    let table = SYSTEM_LIB_SYMBOLS.read().unwrap_or_else(|e| e.into_inner());
    table.as_ref().and_then(|t| t.get(name).copied())
}

/// Cache of functions handed out by [`TVMFFIEnvModLookupFromImports`] (kept alive for the
/// process, since the result is borrowed).
static LOOKUP_CACHE: Mutex<Vec<(usize, String, Function)>> = Mutex::new(Vec::new());

/// Finds a function for generated code: the imports of the library whose context is
/// `library_ctx`, then the global registry. The result is borrowed (cached here).
///
/// # Safety
/// `func_name` is NUL-terminated; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIEnvModLookupFromImports(
    library_ctx: TVMFFIObjectHandle,
    func_name: *const c_char,
    out: *mut TVMFFIObjectHandle,
) -> c_int {
    ffi_status("TVMFFIEnvModLookupFromImports", || {
        // SAFETY: per the contract.
        let (name, out) = unsafe { (cstr_arg(func_name, "func_name")?, out_arg(out, "out")?) };
        let key = library_ctx as usize;
        let mut cache = LOOKUP_CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, f)) = cache.iter().find(|(k, n, _)| *k == key && n == name) {
            *out = f.as_object().as_raw().cast();
            return Ok(());
        }
        let resolver = crate::global_registry().get("ffi.ModuleLookupFromImports");
        let found = match resolver {
            Some(resolver) if !library_ctx.is_null() => resolver
                .call((key as i64, name))?
                .cast::<Option<Function>>()?,
            _ => None,
        };
        let function = found
            .or_else(|| crate::global_registry().get(name))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::RuntimeError,
                    format!(
                        "Cannot find function {name} in the imported modules or global registry."
                    ),
                )
            })?;
        *out = function.as_object().as_raw().cast();
        cache.push((key, name.to_owned(), function));
        Ok(())
    })
}
