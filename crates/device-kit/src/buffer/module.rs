//! [`ShaderModule`]: the module of a buffer-handle backend, built from a shader map (each
//! kernel's metadata and the shader that holds it): every kernel is checked to be a compute
//! entry point of its shader, each shader is parsed once however many kernels it holds.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tvm_ffi::{Any, AnyView, Function};
use tvm_runtime::{Module, ModuleImpl};

use super::{BackendError, BackendFailure, BackendResult};
use crate::kernel::FunctionInfo;

/// A kernel of a shader module, launched with packed arguments.
pub trait ShaderKernel: Send + Sync + 'static {
    /// The module kind (`vulkan`, `webgpu`): `ffi.Module.load_from_bytes.<kind>`.
    const MODULE_KIND: &'static str;
    /// The extension of kernel files (`spv`, `wgsl`): `ffi.Module.load_from_file.<extension>`.
    const FILE_EXTENSION: &'static str;

    /// Launches the kernel with packed arguments (those of the launch convention).
    fn launch(&self, args: &[AnyView<'_>]) -> tvm_ffi::Result<()>;
}

/// A loaded module: its kernels by name.
pub struct ShaderModule<K> {
    kernels: BTreeMap<String, Arc<K>>,
}

impl<K: ShaderKernel> ShaderModule<K> {
    /// The module of the kernels in `fmap`. `shader_of` gives a kernel's shader (`S`, shared
    /// by the kernels it holds: shaders are told apart by address), `entry_points` lists a
    /// shader's compute entry points by name (`what` names the shader in errors), and `make`
    /// builds a kernel from its metadata, its shader and its entry point.
    pub fn build<F, S, E>(
        fmap: BTreeMap<String, FunctionInfo>,
        shader_of: impl Fn(&str) -> BackendResult<S, F>,
        entry_points: impl Fn(&S, &str) -> BackendResult<HashMap<String, E>, F>,
        address: impl Fn(&S) -> *const u8,
        mut make: impl FnMut(FunctionInfo, &S, E) -> BackendResult<K, F>,
    ) -> BackendResult<ShaderModule<K>, F>
    where
        F: BackendFailure,
        E: Clone,
    {
        let mut kernels = BTreeMap::new();
        let mut parsed: HashMap<*const u8, HashMap<String, E>> = HashMap::new();
        for (name, info) in fmap {
            if info.name != name {
                return Err(BackendError::invalid(format!(
                    "the metadata of kernel `{name}` names it `{}`",
                    info.name
                )));
            }
            let shader = shader_of(&name)?;
            let entries = match parsed.entry(address(&shader)) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => e.insert(entry_points(
                    &shader,
                    &format!("the shader of kernel `{name}`"),
                )?),
            };
            let entry = entries.get(&name).cloned().ok_or_else(|| {
                let mut present: Vec<&String> = entries.keys().collect();
                present.sort();
                BackendError::invalid(format!(
                    "kernel `{name}` is not a compute entry point of its shader (entry points: \
                     {present:?}): the metadata does not match the shader"
                ))
            })?;
            let kernel = make(info, &shader, entry)?;
            kernels.insert(name, Arc::new(kernel));
        }
        Ok(ShaderModule { kernels })
    }

    /// The names of the module's kernels, sorted.
    pub fn kernel_names(&self) -> Vec<String> {
        self.kernels.keys().cloned().collect()
    }

    /// Kernel `name`.
    pub fn kernel(&self, name: &str) -> Option<&Arc<K>> {
        self.kernels.get(name)
    }
}

impl<K: ShaderKernel> ModuleImpl for ShaderModule<K> {
    fn kind(&self) -> &str {
        K::MODULE_KIND
    }

    fn get_function(&self, _module: &Module, name: &str) -> tvm_ffi::Result<Option<Function>> {
        Ok(self.kernels.get(name).cloned().map(kernel_function))
    }
}

/// The packed function of a kernel: launches it and returns None.
pub fn kernel_function<K: ShaderKernel>(kernel: Arc<K>) -> Function {
    Function::from_packed(move |args| {
        kernel.launch(args)?;
        Ok(Any::default())
    })
}
