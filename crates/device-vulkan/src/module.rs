//! Modules of kind `vulkan`: SPIR-V shaders and the metadata of their kernels.
//!
//! Serialized form (little-endian; strings and byte strings are a u64 length and the bytes, a
//! sequence or map a u64 count and its items): `[fmt "vulkan"][fmap][smap]`, where `fmap` maps
//! names to `FunctionInfo` (name, `arg_types` as 4-byte `DLDataType`s, `launch_param_tags`,
//! `arg_extra_tags` as i32) and `smap` maps names to a shader (u32 flag, u64 word count, the
//! words). From files: `k.spv` (one SPIR-V module whose entry points are the kernels) with
//! `k.tvm_meta.json` (`{"func_info": {name: {"name", "arg_types", "launch_param_tags"}}}`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tvm_ffi::{DataType, Function};
use tvm_runtime::{Module, ModuleImpl};

use crate::api::VulkanDeviceApi;
use crate::error::{VkResult, VulkanError};
use crate::launch::{FunctionInfo, Kernel, kernel_function};
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
            if shader.flag & FLAG_USE_UBO != 0 {
                return Err(VulkanError::invalid(format!(
                    "kernel `{name}`: scalars in a uniform buffer (shader flag {}) are not \
                     supported; pass them as push constants",
                    shader.flag
                )));
            }
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
            let kernel = Kernel::new(api.clone(), info, Arc::clone(words), entry)?;
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

/// Reads the serialized form.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> VkResult<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.bytes.len());
        let end = end.ok_or_else(|| {
            VulkanError::invalid(format!(
                "vulkan module bytes are truncated while reading {what} (at byte {})",
                self.pos
            ))
        })?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn u32(&mut self, what: &str) -> VkResult<u32> {
        Ok(u32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self, what: &str) -> VkResult<u64> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }

    /// A count of items of `item_bytes` bytes each (at least 1), checked against what is left.
    fn count(&mut self, item_bytes: usize, what: &str) -> VkResult<usize> {
        let n = self.u64(what)?;
        let left = (self.bytes.len() - self.pos) / item_bytes.max(1);
        usize::try_from(n)
            .ok()
            .filter(|n| *n <= left)
            .ok_or_else(|| {
                VulkanError::invalid(format!(
                    "vulkan module bytes are truncated: {what} claims {n} items, more than the \
                 bytes left hold"
                ))
            })
    }

    fn string(&mut self, what: &str) -> VkResult<String> {
        let n = self.count(1, what)?;
        let bytes = self.take(n, what)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| VulkanError::invalid(format!("vulkan module bytes: {what} is not UTF-8")))
    }

    fn function_info(&mut self) -> VkResult<FunctionInfo> {
        let name = self.string("a function name")?;
        let n = self.count(4, "argument types")?;
        let arg_types = (0..n)
            .map(|_| {
                let b = self.take(4, "an argument type")?;
                Ok(DataType::new(b[0], b[1], u16::from_le_bytes([b[2], b[3]])))
            })
            .collect::<VkResult<_>>()?;
        let n = self.count(8, "launch parameter tags")?;
        let launch_param_tags = (0..n)
            .map(|_| self.string("a launch parameter tag"))
            .collect::<VkResult<_>>()?;
        let n = self.count(4, "argument tags")?;
        let arg_extra_tags = (0..n)
            .map(|_| self.u32("an argument tag").map(|t| t as i32))
            .collect::<VkResult<_>>()?;
        Ok(FunctionInfo {
            name,
            arg_types,
            launch_param_tags,
            arg_extra_tags,
        })
    }

    fn shader(&mut self) -> VkResult<SpirvShader> {
        let flag = self.u32("a shader flag")?;
        let n = self.count(4, "shader words")?;
        let words = words_of(self.take(n * 4, "shader words")?, "a shader")?;
        Ok(SpirvShader { flag, words })
    }
}

/// Loads the serialized form of a `vulkan` module (what `ffi.Module.load_from_bytes.vulkan`
/// receives).
pub fn module_from_bytes(api: Arc<VulkanDeviceApi>, bytes: &[u8]) -> tvm_ffi::Result<Module> {
    let mut r = Reader { bytes, pos: 0 };
    let fmt = r.string("the format")?;
    if fmt != "vulkan" {
        return Err(VulkanError::invalid(format!(
            "vulkan module bytes have format '{fmt}', expected 'vulkan'"
        ))
        .into());
    }
    let n = r.count(8, "the function map")?;
    let mut fmap = BTreeMap::new();
    for _ in 0..n {
        let key = r.string("a function name")?;
        fmap.insert(key, r.function_info()?);
    }
    let n = r.count(8, "the shader map")?;
    let mut smap = HashMap::new();
    for _ in 0..n {
        let key = r.string("a shader name")?;
        smap.insert(key, r.shader()?);
    }
    let module = VulkanModule::new(api, fmap, |name| {
        smap.get(name).ok_or_else(|| {
            VulkanError::invalid(format!("kernel `{name}` has metadata but no shader"))
        })
    })?;
    Ok(Module::new(module))
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

/// The serialized form of a module of `kernels` (each with its metadata and shader), as a
/// compiled library embeds it.
pub fn module_to_bytes(kernels: &[(FunctionInfo, SpirvShader)]) -> Vec<u8> {
    let mut out = Vec::new();
    put_str(&mut out, "vulkan");
    out.extend((kernels.len() as u64).to_le_bytes());
    for (info, _) in kernels {
        put_str(&mut out, &info.name);
        put_str(&mut out, &info.name);
        out.extend((info.arg_types.len() as u64).to_le_bytes());
        for t in &info.arg_types {
            out.extend([t.code(), t.bits()]);
            out.extend(t.lanes().to_le_bytes());
        }
        out.extend((info.launch_param_tags.len() as u64).to_le_bytes());
        for tag in &info.launch_param_tags {
            put_str(&mut out, tag);
        }
        out.extend((info.arg_extra_tags.len() as u64).to_le_bytes());
        for tag in &info.arg_extra_tags {
            out.extend(tag.to_le_bytes());
        }
    }
    out.extend((kernels.len() as u64).to_le_bytes());
    for (info, shader) in kernels {
        put_str(&mut out, &info.name);
        out.extend(shader.flag.to_le_bytes());
        out.extend((shader.words.len() as u64).to_le_bytes());
        for w in &shader.words {
            out.extend(w.to_le_bytes());
        }
    }
    out
}

impl FunctionInfo {
    /// The metadata in its JSON form (`arg_types` as dtype strings; the legacy key
    /// `thread_axis_tags` is accepted for `launch_param_tags`).
    pub fn from_json(value: &serde_json::Value) -> Result<FunctionInfo, VulkanError> {
        let bad = |what: &str| VulkanError::invalid(format!("function metadata: {what}"));
        let strings = |key: &str| -> VkResult<Vec<String>> {
            match value.get(key) {
                None => Ok(Vec::new()),
                Some(v) => v
                    .as_array()
                    .and_then(|a| a.iter().map(|s| s.as_str().map(str::to_owned)).collect())
                    .ok_or_else(|| bad(&format!("'{key}' must be a list of strings"))),
            }
        };
        let name = value
            .get("name")
            .and_then(|n| n.as_str())
            .ok_or_else(|| bad("'name' must be a string"))?
            .to_owned();
        let arg_types = strings("arg_types")?
            .iter()
            .map(|t| {
                t.parse::<DataType>()
                    .map_err(|e| bad(&format!("argument type '{t}' of `{name}`: {e}")))
            })
            .collect::<VkResult<_>>()?;
        let mut launch_param_tags = strings("launch_param_tags")?;
        if value.get("launch_param_tags").is_none() {
            launch_param_tags = strings("thread_axis_tags")?;
        }
        let arg_extra_tags = match value.get("arg_extra_tags") {
            None => Vec::new(),
            Some(v) => v
                .as_array()
                .and_then(|a| {
                    a.iter()
                        .map(|t| t.as_i64().and_then(|t| i32::try_from(t).ok()))
                        .collect()
                })
                .ok_or_else(|| bad("'arg_extra_tags' must be a list of ints"))?,
        };
        Ok(FunctionInfo {
            name,
            arg_types,
            launch_param_tags,
            arg_extra_tags,
        })
    }
}

/// The metadata file of a kernel file: `k.spv` → `k.tvm_meta.json`.
fn meta_path(path: &Path) -> PathBuf {
    path.with_extension("tvm_meta.json")
}

/// Loads a `.spv` file and its `.tvm_meta.json`: every function of the metadata is an entry
/// point of the one shader.
pub fn load_spv_file(api: Arc<VulkanDeviceApi>, path: &Path) -> tvm_ffi::Result<Module> {
    let read = |p: &Path| {
        std::fs::read(p).map_err(|e| {
            let kind = if e.kind() == std::io::ErrorKind::NotFound {
                "FileNotFoundError"
            } else {
                "OSError"
            };
            tvm_ffi::Error::new(kind, format!("cannot read '{}': {e}", p.display()))
        })
    };
    let words = words_of(&read(path)?, &format!("'{}'", path.display()))?;
    let meta = meta_path(path);
    let text = read(&meta)?;
    let json: serde_json::Value = serde_json::from_slice(&text).map_err(|e| {
        VulkanError::invalid(format!("'{}' is not valid JSON: {e}", meta.display()))
    })?;
    let infos = json
        .get("func_info")
        .and_then(|f| f.as_object())
        .ok_or_else(|| {
            VulkanError::invalid(format!(
                "'{}' has no \"func_info\" object of kernel metadata",
                meta.display()
            ))
        })?;
    let fmap = infos
        .iter()
        .map(|(k, v)| Ok((k.clone(), FunctionInfo::from_json(v)?)))
        .collect::<VkResult<BTreeMap<_, _>>>()?;
    let shader = SpirvShader { flag: 0, words };
    Ok(Module::new(VulkanModule::new(api, fmap, |_| Ok(&shader))?))
}
