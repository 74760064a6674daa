//! The one registration shape of every backend crate: `register()` registers the backend read
//! from the environment (`<Backend>::from_env()`), `register_backend(backend)` a given one,
//! `registered_backend()` returns it. The first registration wins and its outcome is kept:
//! later calls return it and register nothing.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use tvm_ffi::{Any, Array, Function, Result};
use tvm_runtime::Module;

use crate::buffer::{BufferBackend, BufferDeviceApi, ShaderKernel};
use crate::driver::device_api::{GpuDeviceApi, GpuHostDeviceApi};
use crate::driver::runtime::{GpuRuntime, RuntimeSource};
use crate::kernel::register_module_loaders;

/// Installs driver-API backend `backend`: its device API for its devices and for its pinned
/// host memory devices (the backend's module loaders are its own).
pub fn install_driver_backend<B: RuntimeSource>(backend: &Arc<B>) -> Result<()> {
    let names = B::Runtime::NAMES;
    let api = Arc::new(GpuDeviceApi::new(Arc::clone(backend)));
    tvm_runtime::device::register_device_api(names.device_type, api)?;
    let host_api = Arc::new(GpuHostDeviceApi::new(Arc::clone(backend)));
    tvm_runtime::device::register_device_api(names.host_device_type, host_api)
}

/// The backend a crate registered, and the outcome of registering it.
pub struct BackendSlot<B> {
    slot: OnceLock<(Arc<B>, Result<()>)>,
}

impl<B> Default for BackendSlot<B> {
    fn default() -> Self {
        BackendSlot::new()
    }
}

impl<B> BackendSlot<B> {
    /// An empty slot (for a `static`).
    pub const fn new() -> BackendSlot<B> {
        BackendSlot {
            slot: OnceLock::new(),
        }
    }

    /// Registers the backend `make` gives with `install`, the first time; returns the
    /// registered backend, or the error installing it met.
    pub fn register(
        &self,
        make: impl FnOnce() -> Arc<B>,
        install: impl FnOnce(&Arc<B>) -> Result<()>,
    ) -> Result<Arc<B>> {
        let (backend, outcome) = self.slot.get_or_init(|| {
            let backend = make();
            let outcome = install(&backend);
            (backend, outcome)
        });
        outcome.clone().map(|()| Arc::clone(backend))
    }

    /// The registered backend, once one was.
    pub fn get(&self) -> Option<Arc<B>> {
        self.slot.get().map(|(backend, _)| Arc::clone(backend))
    }
}

/// Registers global function `f` as `name`; a name taken by someone else keeps their function.
pub fn register_global(name: &str, f: Function) {
    let _ = f.register_global(name, false);
}

/// Loads a module of a buffer-handle backend `B`: from its serialized form (what
/// `ffi.Module.load_from_bytes.<kind>` receives), or from a kernel file and its
/// `.tvm_meta.json`.
pub type ModuleLoader<B, Source> = fn(Arc<B>, &Source) -> Result<Module>;

/// Installs buffer-handle backend `backend`: its device API for its device type, the loaders of
/// its modules (of kernel type `K`, whose module kind and file extension name them), and
/// `runtime.<device name>.device_names`.
pub fn install_buffer_backend<B: BufferBackend, K: ShaderKernel>(
    backend: &Arc<B>,
    from_bytes: ModuleLoader<B, [u8]>,
    from_file: ModuleLoader<B, Path>,
) -> Result<()> {
    use crate::buffer::BackendFailure;
    let api = Arc::new(BufferDeviceApi::new(Arc::clone(backend)));
    let outcome = tvm_runtime::device::register_device_api(B::DEVICE_TYPE, api);
    let (bytes_backend, file_backend) = (Arc::clone(backend), Arc::clone(backend));
    register_module_loaders(
        K::MODULE_KIND,
        K::FILE_EXTENSION,
        move |bytes| from_bytes(Arc::clone(&bytes_backend), bytes),
        move |path| from_file(Arc::clone(&file_backend), path),
    );
    let name = format!("runtime.{}.device_names", B::Failure::DEVICE_NAME);
    let listed = Arc::clone(backend);
    register_global(
        &name,
        Function::from_typed(&name, move || {
            let names = listed.device_names()?;
            Ok::<_, tvm_ffi::Error>(names.into_iter().map(Any::from).collect::<Array>())
        }),
    );
    outcome
}

/// The registration functions of a backend crate, in one shape for all: `register()` (the
/// backend `<$backend>::from_env()` makes), `register_backend(backend)` and
/// `registered_backend()`, over one [`BackendSlot`]; `$install` registers a backend with the
/// runtime (`fn(&Arc<$backend>) -> Result<()>`), `$title` names it in the docs.
#[macro_export]
macro_rules! backend_registration {
    ($backend:ty, $install:path, $title:literal) => {
        static BACKEND: $crate::registration::BackendSlot<$backend> =
            $crate::registration::BackendSlot::new();

        #[doc = concat!(
            "Registers the ", $title, " backend read from the environment (`from_env`); ",
            "returns the registered backend (the first one, when called again). Loads nothing: ",
            "the vendor library is opened on the first use of a device."
        )]
        pub fn register() -> ::tvm_ffi::Result<::std::sync::Arc<$backend>> {
            BACKEND.register(|| ::std::sync::Arc::new(<$backend>::from_env()), $install)
        }

        /// `register()` with `backend` in place of the one from the environment.
        pub fn register_backend(
            backend: ::std::sync::Arc<$backend>,
        ) -> ::tvm_ffi::Result<::std::sync::Arc<$backend>> {
            BACKEND.register(|| backend, $install)
        }

        /// The registered backend, once `register()` or `register_backend()` ran.
        pub fn registered_backend() -> Option<::std::sync::Arc<$backend>> {
            BACKEND.get()
        }
    };
}
