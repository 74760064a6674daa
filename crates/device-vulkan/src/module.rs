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

use device_kit::kernel::{BinaryReader, FunctionInfo, KernelCodeMap, read_kernel_file};
use tvm_ffi::Function;
use tvm_runtime::{Module, ModuleImpl};

use crate::api::VulkanDeviceApi;
use crate::error::{VkResult, VulkanError};
use crate::launch::{Kernel, ScalarPassing, kernel_function};
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
pub struct VulkanModule {
    kernels: HashMap<String, Arc<Kernel>>,
}

impl VulkanModule {
    /// A module of the kernels in `fmap`, each with the shader `shader_of` gives it. Every kernel
    /// must be a compute entry point of its shader and follow the launch convention.
    fn new<'a>(
        api: Arc<VulkanDeviceApi>,
        fmap: BTreeMap<String, FunctionInfo>,
        shader_of: impl Fn(&str) -> VkResult<&'a SpirvShader>,
    ) -> VkResult<VulkanModule> {
        let mut kernels = HashMap::new();
        let mut parsed: HashMap<*const SpirvShader, (Arc<Vec<u32>>, HashMap<_, _>)> =
            HashMap::new();
        for (name, info) in fmap {
            let shader = shader_of(&name)?;
            let (words, entries) = match parsed.entry(std::ptr::from_ref(shader)) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let entries =
                        compute_entry_points(&shader.words, &format!("the shader of `{name}`"))?;
                    e.insert((Arc::new(shader.words.clone()), entries))
                }
            };
            let entry = entries.get(&name).cloned().ok_or_else(|| {
                let mut present: Vec<&String> = entries.keys().collect();
                present.sort();
                VulkanError::invalid(format!(
                    "kernel `{name}` is not a compute entry point of its shader (entry points: \
                     {present:?}): the metadata does not match the shader"
                ))
            })?;
            if info.name != name {
                return Err(VulkanError::invalid(format!(
                    "the metadata of kernel `{name}` names it `{}`",
                    info.name
                )));
            }
            let scalars = if shader.flag & FLAG_USE_UBO != 0 {
                ScalarPassing::UniformBuffer
            } else {
                ScalarPassing::PushConstants
            };
            let kernel = Kernel::new(api.clone(), info, Arc::clone(words), entry, scalars)?;
            kernels.insert(name, Arc::new(kernel));
        }
        Ok(VulkanModule { kernels })
    }

    /// The names of the module's kernels, sorted.
    pub fn kernel_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.kernels.keys().cloned().collect();
        names.sort();
        names
    }
}

impl ModuleImpl for VulkanModule {
    fn kind(&self) -> &str {
        "vulkan"
    }

    fn get_function(&self, _module: &Module, name: &str) -> tvm_ffi::Result<Option<Function>> {
        Ok(self.kernels.get(name).cloned().map(kernel_function))
    }
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
pub fn module_from_bytes(api: Arc<VulkanDeviceApi>, bytes: &[u8]) -> tvm_ffi::Result<Module> {
    let map = KernelCodeMap::read(bytes, "vulkan", 12, read_shader)?;
    let module = VulkanModule::new(api, map.functions, |name| {
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
pub fn load_spv_file(api: Arc<VulkanDeviceApi>, path: &Path) -> tvm_ffi::Result<Module> {
    let (code, fmap) = read_kernel_file(path)?;
    let words = words_of(&code, &format!("'{}'", path.display()))?;
    let shader = SpirvShader { flag: 0, words };
    Ok(Module::new(VulkanModule::new(api, fmap, |_| Ok(&shader))?))
}
