//! The system library: functions linked into the running program, registered at start-up
//! through `TVMFFIEnvModRegisterSystemLibSymbol("__tvm_ffi_<prefix><name>", fn)`.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};

use tvm_ffi::abi::TVMFFISafeCallType;
use tvm_ffi::{Function, Result};

use crate::library::{SYMBOL_PREFIX, call_symbol};
use crate::module::{Module, ModuleImpl};

/// The system-library module for one prefix.
pub(crate) struct SystemLibModule {
    prefix: String,
}

impl SystemLibModule {
    pub(crate) fn new(prefix: &str) -> SystemLibModule {
        SystemLibModule {
            prefix: prefix.to_owned(),
        }
    }
}

fn registered_symbol(name: &str) -> Result<Option<*mut c_void>> {
    let lookup = Function::get_global_required("ffi.SystemLibGetSymbol")?;
    let ptr: *mut c_void = lookup.call((name,))?.cast()?;
    Ok((!ptr.is_null()).then_some(ptr))
}

impl ModuleImpl for SystemLibModule {
    fn kind(&self) -> &str {
        "system_lib"
    }

    fn property_mask(&self) -> i64 {
        Module::BINARY_SERIALIZABLE | Module::RUNNABLE
    }

    fn get_function(&self, _module: &Module, name: &str) -> Result<Option<Function>> {
        let candidates = [
            format!("{SYMBOL_PREFIX}{}{name}", self.prefix),
            format!("{SYMBOL_PREFIX}{name}"),
        ];
        for candidate in candidates {
            if let Some(ptr) = registered_symbol(&candidate)? {
                // SAFETY: system-library symbols with the export prefix are safe-call functions.
                let call: TVMFFISafeCallType = unsafe { std::mem::transmute(ptr) };
                let call = call.expect("non-NULL");
                return Ok(Some(Function::from_packed(move |args| {
                    call_symbol(call, args)
                })));
            }
        }
        Ok(None)
    }
}

/// Writes every context symbol into the system library's slot of the same name (a `void*`
/// that statically linked kernels registered, such as `__TVMBackendParallelLaunch`, looked up
/// with the library's prefix first), as the shared-library loader does for a loaded file.
fn fill_context_slots(prefix: &str) -> Result<()> {
    for (name, address) in crate::library::registered_context_symbols()? {
        for candidate in [format!("{prefix}{name}"), name.clone()] {
            if let Some(slot) = registered_symbol(&candidate)? {
                // SAFETY: a system-library symbol named like a context symbol is its `void*`
                // slot, registered by the code that reads it.
                unsafe { *slot.cast::<*mut c_void>() = address };
                break;
            }
        }
    }
    Ok(())
}

/// The system-library module for `prefix` (one per prefix, cached), with the runtime's
/// functions written into the slots its kernels registered (on every call: kernels in a library
/// loaded later register theirs then).
pub fn system_lib(prefix: &str) -> Result<Module> {
    fill_context_slots(prefix)?;
    static CACHE: OnceLock<Mutex<HashMap<String, Module>>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    Ok(cache
        .entry(prefix.to_owned())
        .or_insert_with(|| Module::new(SystemLibModule::new(prefix)))
        .clone())
}
