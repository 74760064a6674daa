//! Modules of kind `"rpc"`: the session itself (its functions are the remote's globals) and
//! modules loaded on the remote.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tvm_ffi::{Any, AnyView, Device, Error, ErrorKind, Function, Result};
use tvm_runtime::profiling::TimerConfig;
use tvm_runtime::{Module, ModuleImpl};

use crate::remote::{RemoteHandle, SessionCore, forget_session_module, publish_session_module};

/// The modules that stand for a session and for its remote modules (built here, so that the
/// session's values need not know the module types).
impl SessionCore {
    /// A local module standing for remote module `handle`.
    pub fn wrap_module(self: &Arc<Self>, handle: u64) -> Module {
        let owner = RemoteHandle::new(self, handle);
        let module = Module::new(RemoteModule::new(Arc::clone(&owner)));
        owner.publish(module.as_object().as_raw() as usize);
        module
    }

    /// The module that stands for the whole session.
    pub fn session_module(self: &Arc<Self>) -> Module {
        let cell = Arc::new(AtomicUsize::new(0));
        let module = Module::new(SessionModule::new(Arc::clone(self), Arc::clone(&cell)));
        let address = module.as_object().as_raw() as usize;
        cell.store(address, Ordering::Release);
        publish_session_module(address, self);
        module
    }
}

/// The module standing for a whole session.
pub struct SessionModule {
    core: Arc<SessionCore>,
    /// The address of the module object, set once it exists (for lookups by address).
    address: Arc<AtomicUsize>,
}

impl SessionModule {
    /// The module of session `core`; `address` receives the module object's address.
    fn new(core: Arc<SessionCore>, address: Arc<AtomicUsize>) -> SessionModule {
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

    fn time_evaluator(
        &self,
        _module: &Module,
        name: &str,
        device: Device,
        config: &TimerConfig,
        preprocess: &str,
    ) -> Result<Option<Function>> {
        remote_time_evaluator(&self.core, Any::none(), name, device, config, preprocess).map(Some)
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

    fn time_evaluator(
        &self,
        module: &Module,
        name: &str,
        device: Device,
        config: &TimerConfig,
        preprocess: &str,
    ) -> Result<Option<Function>> {
        let module_value = Any::from(module.as_object().clone());
        let core = self.handle.core();
        remote_time_evaluator(core, module_value, name, device, config, preprocess).map(Some)
    }
}

/// A time evaluator made by the remote (`runtime.RPCTimeEvaluator` there), so that the
/// function is timed next to the device it runs on; `module` is the remote module or None for
/// a global function of the remote. `device` is a device of this session (or one as the remote
/// names it).
fn remote_time_evaluator(
    core: &Arc<SessionCore>,
    module: Any,
    name: &str,
    device: Device,
    config: &TimerConfig,
    preprocess: &str,
) -> Result<Function> {
    let remote_device = if device.device_type() >= tvm_runtime::device::RPC_SESSION_DEVICE_TYPES {
        let (owner, remote) = SessionCore::of_device(device.0)?;
        if !Arc::ptr_eq(&owner, core) {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "device {device} belongs to another RPC session than the module timed on it"
            );
        }
        remote
    } else {
        device.0
    };
    let make = core
        .get_function("runtime.RPCTimeEvaluator")?
        .ok_or_else(|| {
            Error::new(
                ErrorKind::AttributeError,
                "the remote has no runtime.RPCTimeEvaluator",
            )
        })?;
    let int = |value: u32| Any::from(i64::from(value));
    let values = [
        module,
        Any::from(name),
        Any::from(i64::from(remote_device.device_type)),
        Any::from(i64::from(remote_device.device_id)),
        int(config.number),
        int(config.repeat),
        int(config.min_repeat_ms),
        int(config.limit_zero_time_iterations),
        int(config.cooldown_interval_ms),
        int(config.repeats_to_cooldown),
        Any::from(config.cache_flush_bytes as i64),
        Any::from(preprocess),
    ];
    let views: Vec<AnyView<'_>> = values.iter().map(AnyView::from).collect();
    make.call_packed(&views)?.cast()
}
