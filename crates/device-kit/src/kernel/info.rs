//! The metadata of a device kernel (TVM's `runtime.FunctionInfo`): its name, the types of its
//! arguments, the launch parameter tags that follow them, and extra tags of the arguments. Read
//! from the JSON of a kernel file's metadata (`k.tvm_meta.json`) or from the binary form inside
//! a serialized module.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use tvm_ffi::{DataType, Error, ErrorKind, Result};

use super::binary::{BinaryReader, BinaryWriter};

/// What an argument's extra tag says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgExtraTag {
    /// A plain argument.
    None,
    /// A CUDA tensor map (passed by address).
    TensorMap,
}

impl ArgExtraTag {
    fn from_code(code: i64) -> Option<ArgExtraTag> {
        match code {
            0 => Some(ArgExtraTag::None),
            1 => Some(ArgExtraTag::TensorMap),
            _ => None,
        }
    }

    fn code(self) -> i32 {
        match self {
            ArgExtraTag::None => 0,
            ArgExtraTag::TensorMap => 1,
        }
    }
}

/// The metadata of one kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionInfo {
    /// The kernel's name (its entry point in the device code).
    pub name: String,
    /// The types of its arguments, `handle` for tensors and pointers.
    pub arg_types: Vec<DataType>,
    /// The launch parameters that follow the arguments (`blockIdx.x`, `threadIdx.x`, ...).
    pub launch_param_tags: Vec<String>,
    /// One tag per argument, or none at all.
    pub arg_extra_tags: Vec<ArgExtraTag>,
}

fn metadata_error(message: String) -> Error {
    Error::new(ErrorKind::ValueError, message)
}

fn parse_dtype(kernel: &str, text: &str) -> Result<DataType> {
    tvm_ffi::dtype::parse_dtype(text)
        .map(DataType)
        .map_err(|why| {
            metadata_error(format!(
                "kernel `{kernel}`: bad argument type {text:?}: {why}"
            ))
        })
}

impl FunctionInfo {
    /// The metadata of kernel `name` from its JSON object (`{"name", "arg_types",
    /// "launch_param_tags", "arg_extra_tags"}`; `thread_axis_tags` is the older name of the tags).
    pub fn from_json(name: &str, value: &Value) -> Result<FunctionInfo> {
        let object = value.as_object().ok_or_else(|| {
            metadata_error(format!(
                "kernel `{name}`: metadata is not an object: {value}"
            ))
        })?;
        let strings = |key: &str| -> Result<Vec<String>> {
            match object.get(key) {
                None => Ok(Vec::new()),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|item| {
                        item.as_str().map(str::to_owned).ok_or_else(|| {
                            metadata_error(format!(
                                "kernel `{name}`: {key} holds {item}, not a string"
                            ))
                        })
                    })
                    .collect(),
                Some(other) => Err(metadata_error(format!(
                    "kernel `{name}`: {key} must be a list of strings, got {other}"
                ))),
            }
        };
        if let Some(recorded) = object.get("name").and_then(Value::as_str)
            && recorded != name
        {
            return Err(metadata_error(format!(
                "kernel `{name}`: its metadata names it `{recorded}`"
            )));
        }
        let arg_types = strings("arg_types")?
            .iter()
            .map(|text| parse_dtype(name, text))
            .collect::<Result<Vec<_>>>()?;
        let mut launch_param_tags = strings("launch_param_tags")?;
        if launch_param_tags.is_empty() {
            launch_param_tags = strings("thread_axis_tags")?;
        }
        let arg_extra_tags = match object.get("arg_extra_tags") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_i64().and_then(ArgExtraTag::from_code).ok_or_else(|| {
                        metadata_error(format!(
                            "kernel `{name}`: arg_extra_tags holds {item} (0: none, 1: tensor map)"
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()?,
            Some(other) => {
                return Err(metadata_error(format!(
                    "kernel `{name}`: arg_extra_tags must be a list, got {other}"
                )));
            }
        };
        let info = FunctionInfo {
            name: name.to_owned(),
            arg_types,
            launch_param_tags,
            arg_extra_tags,
        };
        info.check()?;
        Ok(info)
    }

    fn check(&self) -> Result<()> {
        let (tags, args) = (self.arg_extra_tags.len(), self.arg_types.len());
        if tags != 0 && tags != args {
            return Err(metadata_error(format!(
                "kernel `{}`: {tags} arg_extra_tags for {args} arguments",
                self.name
            )));
        }
        Ok(())
    }

    /// Reads the binary form (name, argument types, tags, extra tags).
    pub fn read(reader: &mut BinaryReader<'_>) -> Result<FunctionInfo> {
        let name = reader.string()?;
        let count = reader.count(4)?;
        let arg_types = (0..count)
            .map(|_| reader.dtype())
            .collect::<Result<Vec<_>>>()?;
        let launch_param_tags = reader.strings()?;
        let count = reader.count(4)?;
        let arg_extra_tags = (0..count)
            .map(|_| {
                let code = reader.i32()?;
                ArgExtraTag::from_code(i64::from(code)).ok_or_else(|| {
                    metadata_error(format!(
                        "kernel `{name}`: unknown argument extra tag {code}"
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let info = FunctionInfo {
            name,
            arg_types,
            launch_param_tags,
            arg_extra_tags,
        };
        info.check()?;
        Ok(info)
    }

    /// Writes the binary form [`FunctionInfo::read`] reads.
    pub fn write(&self, writer: &mut BinaryWriter) {
        writer.string(&self.name);
        writer.u64(self.arg_types.len() as u64);
        for dtype in &self.arg_types {
            writer.dtype(*dtype);
        }
        writer.strings(&self.launch_param_tags);
        writer.u64(self.arg_extra_tags.len() as u64);
        for tag in &self.arg_extra_tags {
            writer.i32(tag.code());
        }
    }
}

/// The kernels of a metadata file: `{"func_info": {name: metadata, ...}}`, other keys ignored.
pub fn function_map_from_json(text: &str) -> Result<BTreeMap<String, FunctionInfo>> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| metadata_error(format!("kernel metadata is not JSON: {e}")))?;
    let kernels = value
        .get("func_info")
        .and_then(Value::as_object)
        .ok_or_else(|| metadata_error("kernel metadata has no \"func_info\" object".into()))?;
    kernels
        .iter()
        .map(|(name, info)| Ok((name.clone(), FunctionInfo::from_json(name, info)?)))
        .collect()
}

/// Reads a map of kernel names to their metadata (binary form).
pub fn read_function_map(reader: &mut BinaryReader<'_>) -> Result<BTreeMap<String, FunctionInfo>> {
    let count = reader.count(16)?;
    let mut map = BTreeMap::new();
    for _ in 0..count {
        let key = reader.string()?;
        let info = FunctionInfo::read(reader)?;
        map.insert(key, info);
    }
    Ok(map)
}

/// Writes a map of kernel names to their metadata (binary form).
pub fn write_function_map(writer: &mut BinaryWriter, map: &BTreeMap<String, FunctionInfo>) {
    writer.u64(map.len() as u64);
    for (name, info) in map {
        writer.string(name);
        info.write(writer);
    }
}

/// A kernel file and its metadata: the bytes of `path` (`k.spv`, `k.wgsl`, ...) and the kernels
/// of its sibling `k.tvm_meta.json`. A missing file is a `FileNotFoundError` naming it; metadata
/// that is not valid is a `ValueError` naming the metadata file.
pub fn read_kernel_file(path: &Path) -> Result<(Vec<u8>, BTreeMap<String, FunctionInfo>)> {
    let read = |p: &Path| {
        std::fs::read(p).map_err(|e| {
            let kind = if e.kind() == std::io::ErrorKind::NotFound {
                "FileNotFoundError"
            } else {
                "OSError"
            };
            Error::new(kind, format!("cannot read '{}': {e}", p.display()))
        })
    };
    let code = read(path)?;
    let meta = path.with_extension("tvm_meta.json");
    let text = String::from_utf8(read(&meta)?)
        .map_err(|_| metadata_error(format!("'{}' is not UTF-8 text", meta.display())))?;
    let fmap = function_map_from_json(&text)
        .map_err(|e| Error::new(e.kind(), format!("'{}': {}", meta.display(), e.message())))?;
    Ok((code, fmap))
}
