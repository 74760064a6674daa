//! Device modules whose kernels each carry their own code (Vulkan's SPIR-V shaders, WebGPU's
//! WGSL sources): their serialized form, and the global functions that load them.
//!
//! Serialized form: `[fmt][fmap][u64 count]([name][code])*`, where `fmap` maps kernel names to
//! their [`FunctionInfo`] and each code entry is written by the backend.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use tvm_ffi::{Bytes, Error, ErrorKind, Function, Result};

use super::{BinaryReader, BinaryWriter, FunctionInfo, read_function_map, write_function_map};
use tvm_runtime::Module;

/// The metadata and the code of each kernel of a serialized module.
pub struct KernelCodeMap<C> {
    /// Kernel names to their metadata.
    pub functions: BTreeMap<String, FunctionInfo>,
    /// Kernel names to their code.
    pub code: HashMap<String, C>,
}

impl<C> KernelCodeMap<C> {
    /// Reads the serialized form of a module of format `format` (refusing any other), each code
    /// entry with `read_code`; at least `min_code_bytes` bytes per entry bound the count.
    pub fn read(
        bytes: &[u8],
        format: &str,
        min_code_bytes: usize,
        mut read_code: impl FnMut(&mut BinaryReader<'_>) -> Result<C>,
    ) -> Result<KernelCodeMap<C>> {
        let what = format!("{format} module");
        let mut reader = BinaryReader::new(bytes, &what);
        let found = reader.string()?;
        if found != format {
            return Err(Error::new(
                ErrorKind::ValueError,
                format!("{format} module bytes have format '{found}', expected '{format}'"),
            ));
        }
        let functions = read_function_map(&mut reader)?;
        let count = reader.count(8 + min_code_bytes)?;
        let mut code = HashMap::with_capacity(count);
        for _ in 0..count {
            let name = reader.string()?;
            code.insert(name, read_code(&mut reader)?);
        }
        reader.finish()?;
        Ok(KernelCodeMap { functions, code })
    }

    /// The serialized form of a module of format `format` with `kernels` (each with its
    /// metadata and code), each code entry written by `write_code`.
    pub fn write(
        format: &str,
        kernels: &[(FunctionInfo, C)],
        mut write_code: impl FnMut(&mut BinaryWriter, &C),
    ) -> Vec<u8> {
        let mut writer = BinaryWriter::new();
        writer.string(format);
        let functions: BTreeMap<String, FunctionInfo> = kernels
            .iter()
            .map(|(info, _)| (info.name.clone(), info.clone()))
            .collect();
        write_function_map(&mut writer, &functions);
        writer.u64(kernels.len() as u64);
        for (info, code) in kernels {
            writer.string(&info.name);
            write_code(&mut writer, code);
        }
        writer.into_bytes()
    }
}

/// Registers the loaders of a backend's modules: `ffi.Module.load_from_bytes.<kind>` (the
/// serialized form, as compiled libraries embed it) and `ffi.Module.load_from_file.<extension>`
/// (a code file with its `.tvm_meta.json`). A name already taken keeps its function.
pub fn register_module_loaders(
    kind: &str,
    extension: &str,
    from_bytes: impl Fn(&[u8]) -> Result<Module> + Send + Sync + 'static,
    from_file: impl Fn(&Path) -> Result<Module> + Send + Sync + 'static,
) {
    let name = format!("ffi.Module.load_from_bytes.{kind}");
    let loader = Function::from_typed(&name, move |bytes: Bytes| from_bytes(bytes.as_bytes()));
    let _ = loader.register_global(&name, false);
    let name = format!("ffi.Module.load_from_file.{extension}");
    let loader = Function::from_typed(&name, move |path: String, _format: String| {
        from_file(Path::new(&path))
    });
    let _ = loader.register_global(&name, false);
}
