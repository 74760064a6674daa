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

/// The system-library module for `prefix` (one per prefix, cached).
pub fn system_lib(prefix: &str) -> Module {
    static CACHE: OnceLock<Mutex<HashMap<String, Module>>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    cache
        .entry(prefix.to_owned())
        .or_insert_with(|| Module::new(SystemLibModule::new(prefix)))
        .clone()
}
