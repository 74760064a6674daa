//! Modules of kind `vulkan`: SPIR-V shaders and the metadata of their kernels.
//!
//! Serialized form (the runtime's binary container, [`device_kit::kernel::BinaryReader`]):
//! `[fmt "vulkan"][fmap][smap]`, where `fmap` maps names to their `FunctionInfo` and `smap` maps
//! names to a shader (u32 flag, u64 word count, the words). From files: `k.spv` (one SPIR-V
//! module whose entry points are the kernels) with `k.tvm_meta.json` (`{"func_info": {name:
//! {"name", "arg_types", "launch_param_tags"}}}`).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use device_kit::buffer::ShaderModule;
use device_kit::kernel::{BinaryReader, FunctionInfo, KernelCodeMap, read_kernel_file};
use tvm_runtime::Module;

use crate::backend::VulkanBackend;
use crate::error::{VkResult, VulkanError};
use crate::launch::{ScalarPassing, VulkanKernel};
use crate::spirv::{compute_entry_points, words_of};

/// Flag bit of a shader that takes its scalars in a uniform buffer (not supported here).
const FLAG_USE_UBO: u32 = 1;

/// One SPIR-V shader as the serialized form holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpirvShader {
    /// Bit 0: scalars in a uniform buffer instead of push constants.
    pub flag: u32,
    /// The SPIR-V words.
    pub words: Vec<u32>,
}

/// A loaded `vulkan` module: its kernels, checked against their shaders.
pub type VulkanModule = ShaderModule<VulkanKernel>;

/// The module of the kernels in `fmap`, each with the shader `shader_of` gives it. Every kernel
/// must be a compute entry point of its shader and follow the launch convention.
fn build_module<'a>(
    backend: Arc<VulkanBackend>,
    fmap: BTreeMap<String, FunctionInfo>,
    shader_of: impl Fn(&str) -> VkResult<&'a SpirvShader>,
) -> VkResult<VulkanModule> {
    let mut words: HashMap<*const SpirvShader, Arc<Vec<u32>>> = HashMap::new();
    ShaderModule::build(
        fmap,
        shader_of,
        |shader, what| compute_entry_points(&shader.words, what),
        |shader| std::ptr::from_ref(*shader).cast(),
        |info, shader, entry| {
            let words = words
                .entry(std::ptr::from_ref(*shader))
                .or_insert_with(|| Arc::new(shader.words.clone()));
            let scalars = if shader.flag & FLAG_USE_UBO != 0 {
                ScalarPassing::UniformBuffer
            } else {
                ScalarPassing::PushConstants
            };
            VulkanKernel::new(backend.clone(), info, Arc::clone(words), entry, scalars)
        },
    )
}

/// Reads one shader of the serialized form.
fn read_shader(reader: &mut BinaryReader<'_>) -> tvm_ffi::Result<SpirvShader> {
    let flag = reader.u32()?;
    let count = reader.count(4)?;
    let words = words_of(reader.bytes(count * 4)?, "a shader")?;
    Ok(SpirvShader { flag, words })
}

/// Loads the serialized form of a `vulkan` module (what `ffi.Module.load_from_bytes.vulkan`
/// receives).
pub fn module_from_bytes(backend: Arc<VulkanBackend>, bytes: &[u8]) -> tvm_ffi::Result<Module> {
    let map = KernelCodeMap::read(bytes, "vulkan", 12, read_shader)?;
    let module = build_module(backend, map.functions, |name| {
        map.code.get(name).ok_or_else(|| {
            VulkanError::invalid(format!("kernel `{name}` has metadata but no shader"))
        })
    })?;
    Ok(Module::new(module))
}

/// The serialized form of a module of `kernels` (each with its metadata and shader), as a
/// compiled library embeds it.
pub fn module_to_bytes(kernels: &[(FunctionInfo, SpirvShader)]) -> Vec<u8> {
    KernelCodeMap::write("vulkan", kernels, |writer, shader| {
        writer.u32(shader.flag);
        writer.u64(shader.words.len() as u64);
        for word in &shader.words {
            writer.u32(*word);
        }
    })
}

/// Loads a `.spv` file and its `.tvm_meta.json`: every function of the metadata is an entry
/// point of the one shader.
pub fn load_spv_file(backend: Arc<VulkanBackend>, path: &Path) -> tvm_ffi::Result<Module> {
    let (code, fmap) = read_kernel_file(path)?;
    let words = words_of(&code, &format!("'{}'", path.display()))?;
    let shader = SpirvShader { flag: 0, words };
    Ok(Module::new(build_module(backend, fmap, |_| Ok(&shader))?))
}
