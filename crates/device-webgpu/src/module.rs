//! Modules of kind `webgpu`: WGSL shaders and the metadata of their kernels.
//!
//! Serialized form (the runtime's binary container, [`device_kit::kernel::BinaryReader`]):
//! `[fmt "webgpu"][fmap][smap]`, where `fmap` maps names to their `FunctionInfo` and `smap`
//! maps each kernel's name to its WGSL source (a u64 count, then name and source strings). From
//! files: `k.wgsl` (one shader whose compute entry points are the kernels) with
//! `k.tvm_meta.json` (`{"func_info": {name: {"name", "arg_types", "launch_param_tags"}}}`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use device_kit::buffer::ShaderModule;
use device_kit::kernel::{FunctionInfo, KernelCodeMap, read_kernel_file};
use tvm_runtime::Module;

use crate::backend::WebGpuBackend;
use crate::error::{WebGpuError, WgResult};
use crate::launch::WebGpuKernel;
use crate::wgsl::compute_entry_points;

/// A loaded `webgpu` module: its kernels, checked against their shaders.
pub type WebGpuModule = ShaderModule<WebGpuKernel>;

/// The module of the kernels in `fmap`, each with the WGSL source `source_of` gives it. Every
/// kernel must be a compute entry point of its shader and follow the launch convention.
fn build_module(
    backend: Arc<WebGpuBackend>,
    fmap: BTreeMap<String, FunctionInfo>,
    source_of: impl Fn(&str) -> WgResult<Arc<str>>,
) -> WgResult<WebGpuModule> {
    ShaderModule::build(
        fmap,
        source_of,
        |source, what| compute_entry_points(source, what),
        |source| Arc::as_ptr(source).cast(),
        |info, source, entry| WebGpuKernel::new(backend.clone(), info, Arc::clone(source), entry),
    )
}

/// Loads the serialized form of a `webgpu` module (what `ffi.Module.load_from_bytes.webgpu`
/// receives).
pub fn module_from_bytes(backend: Arc<WebGpuBackend>, bytes: &[u8]) -> tvm_ffi::Result<Module> {
    let map = KernelCodeMap::read(bytes, "webgpu", 8, |reader| {
        Ok(Arc::<str>::from(reader.string()?))
    })?;
    let module = build_module(backend, map.functions, |name| {
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
pub fn load_wgsl_file(backend: Arc<WebGpuBackend>, path: &Path) -> tvm_ffi::Result<Module> {
    let (code, fmap) = read_kernel_file(path)?;
    let source: Arc<str> = Arc::from(String::from_utf8(code).map_err(|_| {
        WebGpuError::invalid(format!("'{}' is not UTF-8 WGSL text", path.display()))
    })?);
    Ok(Module::new(build_module(backend, fmap, |_| {
        Ok(Arc::clone(&source))
    })?))
}
