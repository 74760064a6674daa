//! Modules of kind `"rpc"`: the session itself (its functions are the remote's globals) and
//! modules loaded on the remote.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tvm_ffi::{Any, AnyView, Error, ErrorKind, Function, Result};
use tvm_runtime::{Module, ModuleImpl};

use crate::remote::{RemoteHandle, SessionCore, forget_session_module};

/// The module standing for a whole session.
pub struct SessionModule {
    core: Arc<SessionCore>,
    /// The address of the module object, set once it exists (for lookups by address).
    address: Arc<AtomicUsize>,
}

impl SessionModule {
    /// The module of session `core`.
    /// The module of session `core`; `address` receives the module object's address.
    pub(crate) fn new(core: Arc<SessionCore>, address: Arc<AtomicUsize>) -> SessionModule {
        SessionModule { core, address }
    }

    /// The session.
    pub fn core(&self) -> &Arc<SessionCore> {
        &self.core
    }
}

impl Drop for SessionModule {
    fn drop(&mut self) {
        forget_session_module(self.address.load(Ordering::Acquire));
    }
}

impl ModuleImpl for SessionModule {
    fn kind(&self) -> &str {
        "rpc"
    }

    fn get_function(&self, _module: &Module, name: &str) -> Result<Option<Function>> {
        if name == "CloseRPCConnection" {
            let core = Arc::clone(&self.core);
            return Ok(Some(Function::from_packed(move |_| {
                core.session().shutdown();
                Ok(Any::none())
            })));
        }
        self.core.get_function(name)
    }
}

/// A module that lives on the remote (a library it loaded, say).
pub struct RemoteModule {
    handle: Arc<RemoteHandle>,
}

impl RemoteModule {
    /// The module behind remote `handle`.
    pub fn new(handle: Arc<RemoteHandle>) -> RemoteModule {
        RemoteModule { handle }
    }
}

impl ModuleImpl for RemoteModule {
    fn kind(&self) -> &str {
        "rpc"
    }

    fn get_function(&self, module: &Module, name: &str) -> Result<Option<Function>> {
        let core = self.handle.core();
        let lookup = core
            .get_function("tvm.rpc.server.ModuleGetFunction")?
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::AttributeError,
                    "the remote has no tvm.rpc.server.ModuleGetFunction",
                )
            })?;
        let module_value = Any::from(module.as_object().clone());
        let name_value = Any::from(name);
        let found = lookup.call_packed(&[
            AnyView::from(&module_value),
            AnyView::from(&name_value),
            AnyView::from(&Any::from(true)),
        ])?;
        if found.is_none() {
            return Ok(None);
        }
        found.cast().map(Some)
    }
}
