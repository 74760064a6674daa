//! JSON-graph serialization (`ffi.ToJSONGraph`, `ffi.FromJSONGraph` and their `...String`
//! forms), in the original runtime's format, so graphs written by either load in the other:
//!
//! ```json
//! {"root_index": 4, "nodes": [{"type": "int", "data": 1}, ...], "metadata": {...}}
//! ```
//!
//! Each distinct value (equal plain values and strings share a node, objects by identity) is one
//! node, written after the nodes it refers to. Node `type`s: `None` (no data), `bool`, `int`,
//! `float`, `ffi.String`, `ffi.Bytes` (base64), `DataType` (its text), `Device`
//! (`[type, id]`), `ffi.Shape` (dims), `ffi.BigInt` (decimal text), `ffi.Array`/`ffi.List`
//! (node indices), `ffi.Map`/`ffi.Dict` (flattened key and value indices), and any reflected
//! object type by its key, with a JSON object of its fields: integer, float and bool fields
//! inline, others as node indices. Objects are rebuilt through their type's creator (or
//! `__ffi_new__`) and field setters.

use std::collections::HashMap;

use crate::abi;
use crate::any::{Any, AnyView};
use crate::containers::hash::{any_equal, any_hash};
use crate::containers::map::MapRead;
use crate::error::{Error, ErrorKind, Result};
use crate::function::Function;
use crate::reflection::{self, FieldRef};
use crate::type_attr::TypeAttr;
use crate::{Array, DataType, Device, Dict, List, Map, Shape, types};

static FFI_NEW: TypeAttr = TypeAttr::new("__ffi_new__");

/// A value as a node-table key: equal plain values and strings are one key, objects by identity.
struct NodeKey(Any);

impl std::hash::Hash for NodeKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(any_hash(self.0.as_raw()));
    }
}

impl PartialEq for NodeKey {
    fn eq(&self, other: &Self) -> bool {
        any_equal(self.0.as_raw(), other.0.as_raw())
    }
}

impl Eq for NodeKey {}

/// The JSON graph of `value` as a value (a `Map`), with `metadata` (unless None).
pub fn to_json_graph(value: AnyView<'_>, metadata: AnyView<'_>) -> Result<Any> {
    let mut writer = GraphWriter {
        nodes: Vec::new(),
        index: HashMap::new(),
        active: Vec::new(),
    };
    let root = writer.node(value)?;
    let mut graph = Map::new();
    graph.insert("root_index", root as i64);
    graph.insert("nodes", Array::from_vec(writer.nodes));
    if !metadata.is_none() {
        graph.insert("metadata", metadata.to_owned());
    }
    Ok(graph.into())
}

/// The JSON-graph text of `value` (compact).
pub fn to_json_graph_string(value: AnyView<'_>, metadata: AnyView<'_>) -> Result<String> {
    let graph = to_json_graph(value, metadata)?;
    super::json::stringify(graph.as_view(), None)
}

/// The value of JSON-graph text.
pub fn from_json_graph_string(text: &str) -> Result<Any> {
    from_json_graph(super::json::parse(text)?.as_view())
}

fn invalid(what: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::ValueError, format!("invalid JSON graph: {what}"))
}

struct GraphWriter {
    nodes: Vec<Any>,
    index: HashMap<NodeKey, usize>,
    /// Objects being written (to refuse cycles instead of recursing forever).
    active: Vec<usize>,
}

fn node_of(type_key: &str, data: Option<Any>) -> Any {
    let mut node = Map::new();
    node.insert("type", type_key);
    if let Some(data) = data {
        node.insert("data", data);
    }
    node.into()
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(BASE64[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(text: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes().filter(|c| *c != b'=') {
        let v = BASE64
            .iter()
            .position(|b| *b == c)
            .ok_or_else(|| invalid(format!("bad base64 character {:?}", char::from(c))))?;
        acc = acc << 6 | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Ok(out)
}

impl GraphWriter {
    fn push(&mut self, key: Any, node: Any) -> usize {
        let index = self.nodes.len();
        self.nodes.push(node);
        self.index.insert(NodeKey(key), index);
        index
    }

    fn node(&mut self, value: AnyView<'_>) -> Result<usize> {
        let owned = value.to_owned();
        let key = NodeKey(owned);
        if let Some(&index) = self.index.get(&key) {
            return Ok(index);
        }
        let NodeKey(owned) = key;
        let t = value.type_index();
        let (type_key, data): (String, Option<Any>) = match t {
            abi::kTVMFFINone => ("None".into(), None),
            abi::kTVMFFIBool => ("bool".into(), Some(owned.clone())),
            abi::kTVMFFIInt => ("int".into(), Some(owned.clone())),
            abi::kTVMFFIFloat => ("float".into(), Some(owned.clone())),
            abi::kTVMFFISmallStr | abi::kTVMFFIStr | abi::kTVMFFIRawStr => (
                "ffi.String".into(),
                Some(Any::from(value.cast::<crate::String>()?)),
            ),
            abi::kTVMFFISmallBytes | abi::kTVMFFIBytes | abi::kTVMFFIByteArrayPtr => {
                let bytes = value.cast::<crate::Bytes>()?;
                (
                    "ffi.Bytes".into(),
                    Some(Any::from(base64_encode(bytes.as_bytes()))),
                )
            }
            abi::kTVMFFIDataType => (
                "DataType".into(),
                Some(Any::from(value.cast::<DataType>()?.to_string())),
            ),
            abi::kTVMFFIDevice => {
                let d = value.cast::<Device>()?.0;
                let pair = vec![
                    Any::from(d.device_type as i64),
                    Any::from(d.device_id as i64),
                ];
                ("Device".into(), Some(Array::from_vec(pair).into()))
            }
            abi::kTVMFFIShape => {
                let dims = value
                    .cast::<Shape>()?
                    .as_slice()
                    .iter()
                    .map(|d| Any::from(*d))
                    .collect();
                ("ffi.Shape".into(), Some(Array::from_vec(dims).into()))
            }
            abi::kTVMFFIBigInt => (
                "ffi.BigInt".into(),
                Some(Any::from(
                    crate::bigint_text::to_decimal(value).unwrap_or_default(),
                )),
            ),
            t if t >= abi::kTVMFFIStaticObjectBegin => return self.object_node(value, owned),
            _ => {
                return Err(Error::new(
                    ErrorKind::TypeError,
                    format!("`{}` does not support ToJSONGraph", value.type_key()),
                ));
            }
        };
        let node = node_of(&type_key, data);
        Ok(self.push(owned, node))
    }

    fn object_node(&mut self, value: AnyView<'_>, owned: Any) -> Result<usize> {
        let ptr = value.as_object_ptr().expect("object") as usize;
        if self.active.contains(&ptr) {
            return Err(Error::new(
                ErrorKind::ValueError,
                format!(
                    "cannot serialize a cyclic graph: a `{}` refers back to itself",
                    value.type_key()
                ),
            ));
        }
        if self.active.len() > 10_000 {
            return Err(Error::new(
                ErrorKind::ValueError,
                "graph nested too deeply to serialize",
            ));
        }
        self.active.push(ptr);
        let result = self.object_data(value);
        self.active.pop();
        let data = result?;
        let node = node_of(&value.type_key(), Some(data));
        Ok(self.push(owned, node))
    }

    fn indices(&mut self, items: impl Iterator<Item = Any>) -> Result<Any> {
        let indices = items
            .map(|item| self.node(item.as_view()).map(|i| Any::from(i as i64)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Array::from_vec(indices).into())
    }

    fn object_data(&mut self, value: AnyView<'_>) -> Result<Any> {
        let t = value.type_index();
        match t {
            abi::kTVMFFIArray => self.indices(value.cast::<Array>()?.iter().cloned()),
            abi::kTVMFFIList => self.indices(value.cast::<List>()?.to_vec().into_iter()),
            abi::kTVMFFIMap => self.indices(value.cast::<Map>()?.iter().flat_map(|(k, v)| [k, v])),
            abi::kTVMFFIDict => {
                self.indices(value.cast::<Dict>()?.iter().flat_map(|(k, v)| [k, v]))
            }
            _ if crate::enums::is_enum_type(t) => Ok(Any::from(
                crate::enums::entry_name(value).unwrap_or_default(),
            )),
            _ => {
                if !creatable(t) {
                    return Err(Error::new(
                        ErrorKind::TypeError,
                        format!("`{}` does not support ToJSONGraph", value.type_key()),
                    ));
                }
                let mut fields = Map::new();
                for field in serial_fields(t) {
                    let v = field.get(value)?;
                    let data = if inline_field(&field) && !v.is_object() {
                        v
                    } else {
                        Any::from(self.node(v.as_view())? as i64)
                    };
                    fields.insert(field.name(), data);
                }
                Ok(fields.into())
            }
        }
    }
}

/// Whether a field's values are written inline (integers, floats and bools).
fn inline_field(field: &FieldRef) -> bool {
    matches!(
        field.static_type_index(),
        abi::kTVMFFIInt | abi::kTVMFFIFloat | abi::kTVMFFIBool
    )
}

/// The fields written for a type (a field redeclared by a subtype once).
fn serial_fields(type_index: i32) -> Vec<FieldRef> {
    let mut fields: Vec<FieldRef> = Vec::new();
    for field in reflection::fields_of(type_index).filter(|f| f.is_readable()) {
        fields.retain(|f| f.name() != field.name());
        fields.push(field);
    }
    fields
}

/// Whether objects of a type can be rebuilt (a creator, or a `__ffi_new__` attribute).
fn creatable(type_index: i32) -> bool {
    let has_creator = types::type_info(type_index)
        // SAFETY: non-NULL metadata of a registered type lives for the process.
        .and_then(|info| unsafe { info.metadata.as_ref() })
        .is_some_and(|m| m.creator.is_some());
    has_creator || FFI_NEW.get(type_index).is_some()
}

/// A blank object of a type, to be filled through its field setters.
pub(crate) fn create_blank(type_index: i32) -> Result<Any> {
    let creator = types::type_info(type_index)
        // SAFETY: non-NULL metadata of a registered type lives for the process.
        .and_then(|info| unsafe { info.metadata.as_ref() })
        .and_then(|m| m.creator);
    if let Some(creator) = creator {
        let mut handle: abi::TVMFFIObjectHandle = std::ptr::null_mut();
        // SAFETY: the creator writes one new strong reference into `handle` on success.
        if unsafe { creator(&mut handle) } != 0 || handle.is_null() {
            return Err(Error::take_raised_or(
                ErrorKind::RuntimeError,
                format!("cannot create a `{}`", types::type_key_of(type_index)),
            ));
        }
        // SAFETY: the handle is a new object reference that moves into the value.
        let obj = unsafe { crate::ObjectRef::<crate::Object>::from_raw(handle.cast()) };
        return Ok(Any::from(obj));
    }
    if let Some(new) = FFI_NEW.get(type_index) {
        return new.cast::<Function>()?.call_packed(&[]);
    }
    Err(Error::new(
        ErrorKind::TypeError,
        format!(
            "`{}` cannot be created from reflection (no creator or __ffi_new__)",
            types::type_key_of(type_index)
        ),
    ))
}

/// The value of a JSON graph (as parsed JSON: a map with `root_index` and `nodes`).
pub fn from_json_graph(graph: AnyView<'_>) -> Result<Any> {
    let graph: Map = graph.cast().map_err(|_| {
        invalid(format!(
            "expected a JSON object, got `{}`",
            graph.type_key()
        ))
    })?;
    let root = graph
        .get("root_index")
        .ok_or_else(|| invalid("missing `root_index`"))?
        .cast::<i64>()
        .map_err(|_| invalid("`root_index` is not an integer"))?;
    let nodes: Array = graph
        .get("nodes")
        .ok_or_else(|| invalid("missing `nodes`"))?
        .cast()
        .map_err(|_| invalid("`nodes` is not a list"))?;
    let mut reader = GraphReader {
        done: vec![None; nodes.len()],
        active: vec![false; nodes.len()],
        nodes,
        depth: 0,
    };
    reader.value(root)
}

struct GraphReader {
    nodes: Array,
    done: Vec<Option<Any>>,
    active: Vec<bool>,
    depth: usize,
}

impl GraphReader {
    fn value(&mut self, index: i64) -> Result<Any> {
        let i = usize::try_from(index)
            .ok()
            .filter(|i| *i < self.nodes.len())
            .ok_or_else(|| {
                invalid(format!(
                    "node index {index} out of range (0..{})",
                    self.nodes.len()
                ))
            })?;
        if let Some(v) = &self.done[i] {
            return Ok(v.clone());
        }
        if self.active[i] || self.depth > 10_000 {
            return Err(invalid(format!("node {i} refers back to itself")));
        }
        self.active[i] = true;
        self.depth += 1;
        let result = self.decode(i);
        self.depth -= 1;
        self.active[i] = false;
        let value = result?;
        self.done[i] = Some(value.clone());
        Ok(value)
    }

    fn index_list(&mut self, data: Option<Any>, i: usize) -> Result<Vec<Any>> {
        let data: Array = data
            .ok_or_else(|| invalid(format!("node {i} has no `data`")))?
            .cast()
            .map_err(|_| invalid(format!("node {i}: `data` is not a list")))?;
        data.iter()
            .map(|x| {
                let index = x
                    .cast::<i64>()
                    .map_err(|_| invalid(format!("node {i}: bad node index")))?;
                self.value(index)
            })
            .collect()
    }

    fn decode(&mut self, i: usize) -> Result<Any> {
        let node: Map = self.nodes.as_slice()[i]
            .cast()
            .map_err(|_| invalid(format!("node {i} is not a JSON object")))?;
        let type_key = node
            .get("type")
            .and_then(|t| t.cast::<std::string::String>().ok())
            .ok_or_else(|| invalid(format!("node {i} has no string `type`")))?;
        let data = node.get("data");
        let need = |what: &str| invalid(format!("node {i} (`{type_key}`): expected {what}"));
        Ok(match type_key.as_str() {
            "None" => Any::none(),
            "bool" => Any::from(
                data.and_then(|d| d.cast::<bool>().ok())
                    .ok_or_else(|| need("a bool"))?,
            ),
            "int" => match data {
                Some(d) if d.type_index() == abi::kTVMFFIInt => d,
                _ => return Err(need("an integer")),
            },
            "float" => Any::from(
                data.and_then(|d| d.cast::<f64>().ok())
                    .ok_or_else(|| need("a number"))?,
            ),
            "ffi.String" => {
                let text = data
                    .and_then(|d| d.cast::<crate::String>().ok())
                    .ok_or_else(|| need("a string"))?;
                text.into()
            }
            "ffi.Bytes" => {
                let text = data
                    .and_then(|d| d.cast::<std::string::String>().ok())
                    .ok_or_else(|| need("base64 text"))?;
                crate::Bytes::from_bytes(&base64_decode(&text)?).into()
            }
            "DataType" => {
                let text = data
                    .and_then(|d| d.cast::<std::string::String>().ok())
                    .ok_or_else(|| need("dtype text"))?;
                Any::from(
                    text.parse::<DataType>()
                        .map_err(|e| invalid(format!("node {i}: {e}")))?,
                )
            }
            "Device" => {
                let pair: Array = data
                    .and_then(|d| d.cast().ok())
                    .ok_or_else(|| need("[type, id]"))?;
                let get = |k: usize| pair.get(k).and_then(|v| v.cast::<i64>().ok());
                match (pair.len(), get(0), get(1)) {
                    (2, Some(t), Some(id)) => Any::from(Device::new(t as i32, id as i32)),
                    _ => return Err(need("[type, id]")),
                }
            }
            "ffi.Shape" => {
                let dims: Array = data
                    .and_then(|d| d.cast().ok())
                    .ok_or_else(|| need("a list of dims"))?;
                let dims = dims
                    .iter()
                    .map(|d| d.cast::<i64>())
                    .collect::<Result<Vec<_>>>()
                    .map_err(|_| need("integer dims"))?;
                Shape::new(&dims).into()
            }
            "ffi.BigInt" => {
                let text = data
                    .and_then(|d| d.cast::<std::string::String>().ok())
                    .ok_or_else(|| need("decimal text"))?;
                crate::bigint_text::from_decimal(&text)?
            }
            "ffi.Array" => Array::from_vec(self.index_list(data, i)?).into(),
            "ffi.List" => self
                .index_list(data, i)?
                .into_iter()
                .collect::<List>()
                .into(),
            "ffi.Map" | "ffi.Dict" => {
                let items = self.index_list(data, i)?;
                if items.len() % 2 != 0 {
                    return Err(need("an even number of key and value indices"));
                }
                let pairs = items.chunks(2).map(|kv| (kv[0].clone(), kv[1].clone()));
                if type_key == "ffi.Map" {
                    let mut map = Map::new();
                    pairs.for_each(|(k, v)| {
                        map.insert(k, v);
                    });
                    map.into()
                } else {
                    let dict = Dict::new();
                    pairs.for_each(|(k, v)| {
                        dict.insert(k, v);
                    });
                    dict.into()
                }
            }
            key => self.object(i, key, data)?,
        })
    }

    fn object(&mut self, i: usize, type_key: &str, data: Option<Any>) -> Result<Any> {
        let type_index = types::type_key_to_index(type_key).map_err(|_| {
            Error::new(
                ErrorKind::KeyError,
                format!("JSON graph node {i} has type `{type_key}`, which is not registered"),
            )
        })?;
        if crate::enums::is_enum_type(type_index) {
            let name = data
                .and_then(|d| d.cast::<std::string::String>().ok())
                .ok_or_else(|| {
                    invalid(format!("node {i} (`{type_key}`): expected an entry name"))
                })?;
            return crate::enums::entry_by_name(type_key, &name);
        }
        let data: Map = data.and_then(|d| d.cast().ok()).ok_or_else(|| {
            invalid(format!(
                "node {i} (`{type_key}`): `data` is not a JSON object of fields"
            ))
        })?;
        let obj = create_blank(type_index)?;
        for field in serial_fields(type_index) {
            let value = match data.get(field.name()) {
                Some(v) if inline_field(&field) => v,
                Some(v) => {
                    let index = v.cast::<i64>().map_err(|_| {
                        invalid(format!(
                            "node {i}: field `{}` is not a node index",
                            field.name()
                        ))
                    })?;
                    self.value(index)?
                }
                None => match field.default_value() {
                    Some(default)
                        if field.flags() & abi::kTVMFFIFieldFlagBitMaskDefaultFromFactory != 0 =>
                    {
                        default.cast::<Function>()?.call_packed(&[])?
                    }
                    Some(default) => default.to_owned(),
                    None => {
                        return Err(invalid(format!(
                            "node {i} (`{type_key}`) lacks field `{}`",
                            field.name()
                        )));
                    }
                },
            };
            field.set(&obj, value.as_view())?;
        }
        Ok(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips() {
        for bytes in [&b""[..], b"a", b"ab", b"abc", b"abcd\x00\xff"] {
            let text = base64_encode(bytes);
            assert_eq!(base64_decode(&text).unwrap(), bytes);
        }
        assert_eq!(base64_encode(b"ab"), "YWI=");
    }
}
