//! WGSL checked and described on the host with naga (the compiler wgpu itself uses): a shader
//! that does not parse or validate is refused with naga's message when its module loads, and
//! each compute entry point tells its work-group size and the bindings of group 0 it uses.

use std::collections::{BTreeMap, HashMap};

use wgpu::naga;

use crate::error::{WebGpuError, WgResult};

/// What a binding of group 0 is, as the shader declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BindingKind {
    /// `var<storage, read>` or `var<storage, read_write>`.
    Storage {
        /// Whether the shader only reads it.
        read_only: bool,
    },
    /// `var<uniform>`.
    Uniform,
    /// A texture, sampler or anything else a kernel of this runtime cannot take.
    Other,
}

/// A compute entry point of a shader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EntryPoint {
    /// `@workgroup_size(x, y, z)`.
    pub(crate) workgroup_size: [u32; 3],
    /// The bindings of group 0 it uses, by number.
    pub(crate) bindings: BTreeMap<u32, BindingKind>,
    /// A group other than 0 it uses, if any.
    pub(crate) other_group: Option<u32>,
}

/// The compute entry points of WGSL `source`, by name; `what` names the shader in errors. A
/// shader that does not parse or validate is a `ValueError` with naga's report.
pub(crate) fn compute_entry_points(
    source: &str,
    what: &str,
) -> WgResult<HashMap<String, EntryPoint>> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| {
        WebGpuError::invalid(format!(
            "{what} does not compile as WGSL:\n{}",
            e.emit_to_string(source)
        ))
    })?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| {
        WebGpuError::invalid(format!(
            "{what} is not valid WGSL:\n{}",
            e.emit_to_string(source)
        ))
    })?;
    let mut entries = HashMap::new();
    for (index, entry) in module.entry_points.iter().enumerate() {
        if entry.stage != naga::ShaderStage::Compute {
            continue;
        }
        let uses = info.get_entry_point(index);
        let mut bindings = BTreeMap::new();
        let mut other_group = None;
        for (handle, variable) in module.global_variables.iter() {
            let Some(binding) = &variable.binding else {
                continue;
            };
            if uses[handle].is_empty() {
                continue;
            }
            if binding.group != 0 {
                other_group.get_or_insert(binding.group);
                continue;
            }
            let kind = match variable.space {
                naga::AddressSpace::Storage { access } => BindingKind::Storage {
                    read_only: !access.contains(naga::StorageAccess::STORE),
                },
                naga::AddressSpace::Uniform => BindingKind::Uniform,
                _ => BindingKind::Other,
            };
            bindings.insert(binding.binding, kind);
        }
        entries.insert(
            entry.name.clone(),
            EntryPoint {
                workgroup_size: entry.workgroup_size,
                bindings,
                other_group,
            },
        );
    }
    Ok(entries)
}
