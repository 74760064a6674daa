//! Modules of kind `webgpu`: WGSL shaders and the metadata of their kernels.
//!
//! Serialized form (the runtime's binary container, [`device_kit::kernel::BinaryReader`]):
//! `[fmt "webgpu"][fmap][smap]`, where `fmap` maps names to their `FunctionInfo` and `smap`
//! maps each kernel's name to its WGSL source (a u64 count, then name and source strings). From
//! files: `k.wgsl` (one shader whose compute entry points are the kernels) with
//! `k.tvm_meta.json` (`{"func_info": {name: {"name", "arg_types", "launch_param_tags"}}}`).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use device_kit::kernel::{FunctionInfo, KernelCodeMap, read_kernel_file};
use tvm_ffi::Function;
use tvm_runtime::{Module, ModuleImpl};

use crate::api::WebGpuDeviceApi;
use crate::error::{WebGpuError, WgResult};
use crate::launch::{Kernel, kernel_function};
use crate::wgsl::compute_entry_points;

/// A loaded `webgpu` module: its kernels, checked against their shaders.
pub struct WebGpuModule {
    kernels: HashMap<String, Arc<Kernel>>,
    sources: BTreeMap<String, Arc<str>>,
}

impl WebGpuModule {
    /// A module of the kernels in `fmap`, each with the WGSL source `source_of` gives it. Every
    /// kernel must be a compute entry point of its shader and follow the launch convention.
    fn new(
        api: Arc<WebGpuDeviceApi>,
        fmap: BTreeMap<String, FunctionInfo>,
        source_of: impl Fn(&str) -> WgResult<Arc<str>>,
    ) -> WgResult<WebGpuModule> {
        let mut kernels = HashMap::new();
        let mut sources = BTreeMap::new();
        let mut described: HashMap<*const str, HashMap<_, _>> = HashMap::new();
        for (name, info) in fmap {
            if info.name != name {
                return Err(WebGpuError::invalid(format!(
                    "the metadata of kernel `{name}` names it `{}`",
                    info.name
                )));
            }
            let source = source_of(&name)?;
            let entries = match described.entry(Arc::as_ptr(&source)) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => e.insert(compute_entry_points(
                    &source,
                    &format!("the shader of kernel `{name}`"),
                )?),
            };
            let entry = entries.get(&name).cloned().ok_or_else(|| {
                let mut present: Vec<&String> = entries.keys().collect();
                present.sort();
                WebGpuError::invalid(format!(
                    "kernel `{name}` is not a compute entry point of its shader (entry points: \
                     {present:?}): the metadata does not match the shader"
                ))
            })?;
            let kernel = Kernel::new(api.clone(), info, Arc::clone(&source), entry)?;
            kernels.insert(name.clone(), Arc::new(kernel));
            sources.insert(name, source);
        }
        Ok(WebGpuModule { kernels, sources })
    }

    /// The names of the module's kernels, sorted.
    pub fn kernel_names(&self) -> Vec<String> {
        self.sources.keys().cloned().collect()
    }

    /// The WGSL source of kernel `name`.
    pub fn source(&self, name: &str) -> Option<&str> {
        self.sources.get(name).map(|s| &**s)
    }
}

impl ModuleImpl for WebGpuModule {
    fn kind(&self) -> &str {
        "webgpu"
    }

    fn get_function(&self, _module: &Module, name: &str) -> tvm_ffi::Result<Option<Function>> {
        Ok(self.kernels.get(name).cloned().map(kernel_function))
    }
}

/// Loads the serialized form of a `webgpu` module (what `ffi.Module.load_from_bytes.webgpu`
/// receives).
pub fn module_from_bytes(api: Arc<WebGpuDeviceApi>, bytes: &[u8]) -> tvm_ffi::Result<Module> {
    let map = KernelCodeMap::read(bytes, "webgpu", 8, |reader| {
        Ok(Arc::<str>::from(reader.string()?))
    })?;
    let module = WebGpuModule::new(api, map.functions, |name| {
        map.code.get(name).cloned().ok_or_else(|| {
            WebGpuError::invalid(format!("kernel `{name}` has metadata but no WGSL source"))
        })
    })?;
    Ok(Module::new(module))
}

/// The serialized form of a module of `kernels` (each with its metadata and WGSL source), as a
/// compiled library embeds it.
pub fn module_to_bytes(kernels: &[(FunctionInfo, String)]) -> Vec<u8> {
    KernelCodeMap::write("webgpu", kernels, |writer, source| writer.string(source))
}

/// Loads a `.wgsl` file and its `.tvm_meta.json`: every function of the metadata is a compute
/// entry point of the one shader.
pub fn load_wgsl_file(api: Arc<WebGpuDeviceApi>, path: &Path) -> tvm_ffi::Result<Module> {
    let (code, fmap) = read_kernel_file(path)?;
    let source: Arc<str> = Arc::from(String::from_utf8(code).map_err(|_| {
        WebGpuError::invalid(format!("'{}' is not UTF-8 WGSL text", path.display()))
    })?);
    Ok(Module::new(WebGpuModule::new(api, fmap, |_| {
        Ok(Arc::clone(&source))
    })?))
}
