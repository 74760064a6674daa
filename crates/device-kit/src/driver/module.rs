//! Device modules: kernel code in one format (PTX, cubin, HSACO, ...), the metadata of its
//! kernels, and the code loaded on each device the first time one of its kernels runs there.
//!
//! The serialized form is TVM's `[format String][function map][code Bytes]`; on disk a module is
//! its code file (`k.ptx`) with the metadata next to it (`k.tvm_meta.json`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::kernel::{
    BinaryReader, BinaryWriter, FunctionInfo, function_map_from_json, read_function_map,
    write_function_map,
};
use tvm_ffi::{Any, AnyView, Bytes, Device, Error, ErrorKind, Function, Result};
use tvm_runtime::{Module, ModuleImpl};

use crate::driver::PerDevice;
use crate::driver::args::{KernelCall, KernelSignature, TensorPlacement};
use crate::driver::runtime::{GpuRuntime, RuntimeSource};
use crate::driver::shared_calls::{Kernel, LoadedCode};
use crate::driver::shared_ops::SharedOps;

/// What a backend does with device code; [`DeviceModule`] does the rest.
pub trait KernelBackend: RuntimeSource {
    /// The module kind ("cuda", "rocm").
    fn kind(&self) -> &'static str;

    /// Checks `format` and turns `code` into what [`KernelBackend::load`] takes (PTX gets its
    /// terminating NUL, source is compiled); an unknown format is an error naming it.
    fn prepare(&self, format: &str, code: Vec<u8>) -> Result<(String, Vec<u8>)>;

    /// Loads `code` on `device`.
    fn load(&self, device: Device, format: &str, code: &[u8]) -> Result<LoadedCode>;

    /// Where a tensor argument on `device` may live: on the runtime's devices, or reachable
    /// from them in its pinned host memory.
    #[inline]
    fn placement(&self, device: Device) -> TensorPlacement {
        let names = Self::Runtime::NAMES;
        match device.device_type() {
            t if t == names.device_type => TensorPlacement::OnDevice,
            t if t == names.host_device_type => TensorPlacement::Reachable,
            _ => TensorPlacement::Refused,
        }
    }

    /// The device that runs a call whose tensors are on `tensors_on` (`None` when no tensor
    /// argument says), made the calling thread's current device.
    #[inline]
    fn launch_device(&self, tensors_on: Option<Device>) -> Result<Device> {
        self.lazy().runtime()?.launch_device(tensors_on)
    }

    /// Launches `kernel` on `device`, which [`KernelBackend::launch_device`] made current, on
    /// the calling thread's current stream.
    fn launch(&self, device: Device, kernel: Kernel, call: &mut KernelCall<'_>) -> Result<()>;
}

struct ModuleState<B: KernelBackend> {
    backend: Arc<B>,
    format: String,
    functions: BTreeMap<String, FunctionInfo>,
    code: Vec<u8>,
    loaded: PerDevice<LoadedCode>,
}

impl<B: KernelBackend> Drop for ModuleState<B> {
    fn drop(&mut self) {
        // Loaded code implies an opened runtime; a failed unload is ignored (the device may
        // be gone).
        let Ok(runtime) = self.backend.runtime() else {
            return;
        };
        for (id, code) in self.loaded.drain() {
            runtime.unload(Device::new(B::Runtime::NAMES.device_type, id), code);
        }
    }
}

impl<B: KernelBackend> ModuleState<B> {
    fn loaded_on(&self, device: Device) -> Result<LoadedCode> {
        self.loaded.get_or_try_init(device.device_id(), || {
            self.backend.load(device, &self.format, &self.code)
        })
    }
}

/// A device module of backend `B`.
pub struct DeviceModule<B: KernelBackend> {
    state: Arc<ModuleState<B>>,
}

impl<B: KernelBackend> DeviceModule<B> {
    /// A module of `code` in `format` with the kernels `functions` describes. Nothing is loaded
    /// on a device yet.
    pub fn new(
        backend: Arc<B>,
        format: &str,
        functions: BTreeMap<String, FunctionInfo>,
        code: Vec<u8>,
    ) -> Result<DeviceModule<B>> {
        let (format, code) = backend.prepare(format, code)?;
        Ok(DeviceModule {
            state: Arc::new(ModuleState {
                backend,
                format,
                functions,
                code,
                loaded: PerDevice::default(),
            }),
        })
    }

    /// A module from its serialized form.
    pub fn from_bytes(backend: Arc<B>, bytes: &[u8]) -> Result<DeviceModule<B>> {
        let what = format!("{} module", backend.kind());
        let mut reader = BinaryReader::new(bytes, &what);
        let format = reader.string()?;
        let functions = read_function_map(&mut reader)?;
        let code = reader.byte_string()?.to_vec();
        reader.finish()?;
        DeviceModule::new(backend, &format, functions, code)
    }

    /// A module from a code file and the metadata file next to it (`k.ptx` and
    /// `k.tvm_meta.json`); `format` is the code's format (the file's extension).
    pub fn from_file(backend: Arc<B>, path: &Path, format: &str) -> Result<DeviceModule<B>> {
        let code = read_file(path)?;
        let meta_path = path.with_extension("tvm_meta.json");
        let meta = String::from_utf8(read_file(&meta_path)?).map_err(|_| {
            Error::new(
                ErrorKind::ValueError,
                format!("{} is not UTF-8", meta_path.display()),
            )
        })?;
        let functions = function_map_from_json(&meta).map_err(|e| {
            Error::new(
                e.kind(),
                format!("{}: {}", meta_path.display(), e.message()),
            )
        })?;
        DeviceModule::new(backend, format, functions, code)
    }

    /// The format of the code as loaded ("ptx", "hsaco").
    pub fn format(&self) -> &str {
        &self.state.format
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|err| match err.kind() {
        std::io::ErrorKind::NotFound => Error::new(
            "FileNotFoundError",
            format!("No such file or directory: '{}'", path.display()),
        ),
        _ => Error::new(
            "OSError",
            format!("cannot read '{}': {err}", path.display()),
        ),
    })
}

/// The serialized form of a module: `[format][function map][code]`.
pub fn serialize(format: &str, functions: &BTreeMap<String, FunctionInfo>, code: &[u8]) -> Vec<u8> {
    let mut writer = BinaryWriter::new();
    writer.string(format);
    write_function_map(&mut writer, functions);
    writer.byte_string(code);
    writer.into_bytes()
}

impl<B: KernelBackend> ModuleImpl for DeviceModule<B> {
    fn kind(&self) -> &str {
        self.state.backend.kind()
    }

    fn get_function(&self, _module: &Module, name: &str) -> Result<Option<Function>> {
        let Some(info) = self.state.functions.get(name) else {
            return Ok(None);
        };
        let signature = KernelSignature::new(info)?;
        let state = Arc::clone(&self.state);
        let kernels = PerDevice::<Kernel>::default();
        // The code-side name: the map's key names the function, the metadata the entry point.
        let entry = info.name.clone();
        Ok(Some(Function::from_packed(
            move |args: &[AnyView<'_>]| -> Result<Any> {
                let backend = &state.backend;
                signature.read_call(
                    args,
                    |d| backend.placement(d),
                    |call| {
                        let device = backend.launch_device(call.device)?;
                        // The kernel's handle on each device, made at its first launch there.
                        // Read first on its own: the closure that makes it is then only built
                        // on that first launch (launches are hot).
                        let id = device.device_id();
                        let kernel = match kernels.get(id) {
                            Some(kernel) => kernel,
                            None => kernels.get_or_try_init(id, || {
                                let code = state.loaded_on(device)?;
                                backend.runtime()?.kernel(device, code, &entry)
                            })?,
                        };
                        backend.launch(device, kernel, call)
                    },
                )?;
                Ok(Any::none())
            },
        )))
    }
}

/// Registers the loaders of backend `B`'s modules: `ffi.Module.load_from_bytes.<kind>` (the
/// serialized form, as embedded in compiled libraries) and `ffi.Module.load_from_file.<ext>` for
/// each code file extension in `extensions`. A name already taken keeps its function.
pub fn register_loaders<B: KernelBackend>(backend: Arc<B>, extensions: &[&str]) {
    register_bytes_loader(Arc::clone(&backend), backend.kind());
    for extension in extensions {
        let from_file = Arc::clone(&backend);
        let name = format!("ffi.Module.load_from_file.{extension}");
        let loader = Function::from_typed(&name, move |path: String, format: String| {
            DeviceModule::from_file(Arc::clone(&from_file), Path::new(&path), &format)
                .map(Module::new)
        });
        let _ = loader.register_global(&name, false);
    }
}

/// Registers `ffi.Module.load_from_bytes.<key>`, the loader of backend `B`'s serialized
/// modules under the type key `key` (a module kind, or another name the same form is saved
/// under). A name already taken keeps its function.
pub fn register_bytes_loader<B: KernelBackend>(backend: Arc<B>, key: &str) {
    let name = format!("ffi.Module.load_from_bytes.{key}");
    let loader = Function::from_typed(&name, move |bytes: Bytes| {
        DeviceModule::from_bytes(Arc::clone(&backend), bytes.as_bytes()).map(Module::new)
    });
    let _ = loader.register_global(&name, false);
}
