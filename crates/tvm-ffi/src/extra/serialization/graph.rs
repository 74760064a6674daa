//! JSON-graph serialization (`ffi.ToJSONGraph`, `ffi.FromJSONGraph` and their `...String`
//! forms), in apache-tvm-ffi's format, so graphs written by either load in the other:
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
//! `__ffi_new__`) and field setters. A type with a `__data_to_json__` attribute writes what that
//! function returns as its node's `data` instead of its fields, and is read back by its
//! `__data_from_json__` attribute (Apache TVM's operators are written by name this way, so
//! a graph read back refers to the registered operator, not to a copy of it).

use std::borrow::Cow;
use std::collections::HashMap;

use super::json::Json;
use crate::abi;
use crate::any::{Any, AnyView};
use crate::containers::array::ArrayObj;
use crate::containers::hash::{any_equal, any_hash};
use crate::containers::map::MapRead;
use crate::error::{Error, ErrorKind, Result};
use crate::function::Function;
use crate::reflection::{self, FieldRef};
use crate::type_attr::TypeAttr;
use crate::{Array, DataType, Device, Dict, List, Map, Shape, types};

static FFI_NEW: TypeAttr = TypeAttr::new("__ffi_new__");
static DATA_TO_JSON: TypeAttr = TypeAttr::new("__data_to_json__");
static DATA_FROM_JSON: TypeAttr = TypeAttr::new("__data_from_json__");

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
    Ok(graph_tree(value, metadata)?.to_any())
}

/// The JSON-graph text of `value` (compact).
pub fn to_json_graph_string(value: AnyView<'_>, metadata: AnyView<'_>) -> Result<String> {
    graph_tree(value, metadata)?.write(None)
}

/// The JSON graph of `value` as a [`Json`] tree.
fn graph_tree(value: AnyView<'_>, metadata: AnyView<'_>) -> Result<Json<'static>> {
    let mut writer = GraphWriter {
        nodes: Vec::new(),
        index: HashMap::new(),
        active: Vec::new(),
    };
    let root = writer.node(value)?;
    let mut graph = vec![
        (Cow::Borrowed("root_index"), Json::Int(root as i64)),
        (Cow::Borrowed("nodes"), Json::Array(writer.nodes)),
    ];
    if !metadata.is_none() {
        graph.push((Cow::Borrowed("metadata"), Json::from_any(metadata)?));
    }
    Ok(Json::Object(graph))
}

/// The value of JSON-graph text.
pub fn from_json_graph_string(text: &str) -> Result<Any> {
    decode_graph(&super::json::parse_tree(text)?)
}

fn invalid(what: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::ValueError, format!("invalid JSON graph: {what}"))
}

struct GraphWriter {
    nodes: Vec<Json<'static>>,
    index: HashMap<NodeKey, usize>,
    /// Objects being written (to refuse cycles instead of recursing forever).
    active: Vec<usize>,
}

fn node_of(type_key: Cow<'static, str>, data: Option<Json<'static>>) -> Json<'static> {
    let mut node = Vec::with_capacity(2);
    node.push((Cow::Borrowed("type"), Json::Str(type_key)));
    if let Some(data) = data {
        node.push((Cow::Borrowed("data"), data));
    }
    Json::Object(node)
}

fn text_of(value: &AnyView<'_>) -> Result<Json<'static>> {
    let bytes = crate::string::bytes_of_view(value).unwrap_or_default();
    Ok(Json::Str(Cow::Owned(super::json::owned_text(bytes)?)))
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(bytes: &[u8]) -> Result<String> {
    let size = bytes.len().div_ceil(3) * 4;
    let mut out = String::new();
    out.try_reserve_exact(size).map_err(|_| {
        Error::new(
            ErrorKind::MemoryError,
            format!(
                "cannot allocate the {size} bytes of base64 text of a bytes value of {} bytes",
                bytes.len()
            ),
        )
    })?;
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
    Ok(out)
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
    fn push(&mut self, key: Any, node: Json<'static>) -> usize {
        let index = self.nodes.len();
        self.nodes.push(node);
        self.index.insert(NodeKey(key), index);
        index
    }

    fn node(&mut self, value: AnyView<'_>) -> Result<usize> {
        let key = NodeKey(value.to_owned());
        if let Some(&index) = self.index.get(&key) {
            return Ok(index);
        }
        let NodeKey(owned) = key;
        let t = value.type_index();
        let (type_key, data): (&'static str, Option<Json<'static>>) = match t {
            abi::kTVMFFINone => ("None", None),
            abi::kTVMFFIBool => ("bool", Some(Json::Bool(value.cast()?))),
            abi::kTVMFFIInt => ("int", Some(Json::Int(value.cast()?))),
            abi::kTVMFFIFloat => ("float", Some(Json::Float(value.cast()?))),
            abi::kTVMFFISmallStr | abi::kTVMFFIStr | abi::kTVMFFIRawStr => {
                ("ffi.String", Some(text_of(&value)?))
            }
            abi::kTVMFFISmallBytes | abi::kTVMFFIBytes | abi::kTVMFFIByteArrayPtr => {
                let bytes = crate::string::bytes_of_view(&value).unwrap_or_default();
                (
                    "ffi.Bytes",
                    Some(Json::Str(Cow::Owned(base64_encode(bytes)?))),
                )
            }
            abi::kTVMFFIDataType => (
                "DataType",
                Some(Json::Str(Cow::Owned(value.cast::<DataType>()?.to_string()))),
            ),
            abi::kTVMFFIDevice => {
                let d = value.cast::<Device>()?.0;
                let pair = vec![
                    Json::Int(d.device_type.into()),
                    Json::Int(d.device_id.into()),
                ];
                ("Device", Some(Json::Array(pair)))
            }
            abi::kTVMFFIShape => {
                let shape = value.cast::<Shape>()?;
                let dims = shape.as_slice().iter().map(|d| Json::Int(*d)).collect();
                ("ffi.Shape", Some(Json::Array(dims)))
            }
            abi::kTVMFFIBigInt => (
                "ffi.BigInt",
                Some(Json::Str(Cow::Owned(
                    crate::extra::bigint_text::to_decimal(value).unwrap_or_default(),
                ))),
            ),
            t if t >= abi::kTVMFFIStaticObjectBegin => return self.object_node(value, owned),
            _ => {
                return Err(Error::new(
                    ErrorKind::TypeError,
                    format!("`{}` does not support ToJSONGraph", value.type_key()),
                ));
            }
        };
        let node = node_of(Cow::Borrowed(type_key), data);
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
        crate::stack::enter_level(self.active.len() + 1, "the graph to serialize")?;
        self.active.push(ptr);
        let result = self.object_data(value);
        self.active.pop();
        let data = result?;
        let node = node_of(Cow::Owned(value.type_key()), Some(data));
        Ok(self.push(owned, node))
    }

    fn indices<'a>(&mut self, items: impl Iterator<Item = AnyView<'a>>) -> Result<Json<'static>> {
        let indices = items
            .map(|item| self.node(item).map(|i| Json::Int(i as i64)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Json::Array(indices))
    }

    fn object_data(&mut self, value: AnyView<'_>) -> Result<Json<'static>> {
        let t = value.type_index();
        match t {
            abi::kTVMFFIArray => {
                let array = value.as_object::<ArrayObj>().expect("an array");
                self.indices(array.as_slice().iter().map(Any::as_view))
            }
            abi::kTVMFFIList => {
                let items = value.cast::<List>()?.to_vec();
                self.indices(items.iter().map(Any::as_view))
            }
            abi::kTVMFFIMap | abi::kTVMFFIDict => {
                let entries: Vec<(Any, Any)> = if t == abi::kTVMFFIMap {
                    value.cast::<Map>()?.iter().collect()
                } else {
                    value.cast::<Dict>()?.iter().collect()
                };
                self.indices(entries.iter().flat_map(|(k, v)| [k.as_view(), v.as_view()]))
            }
            // An entry is its canonical index: the int index of an int enum, else the name.
            _ if crate::extra::enums::is_enum_type(t) => {
                Ok(match crate::extra::enums::int_index_of(value) {
                    Some(index) => Json::Int(index),
                    None => Json::Str(Cow::Owned(
                        crate::extra::enums::entry_name(value).unwrap_or_default(),
                    )),
                })
            }
            _ if DATA_TO_JSON.get(t).is_some() => {
                let hook = DATA_TO_JSON.get(t).expect("checked").cast::<Function>()?;
                let data = hook.call_packed(&[value])?;
                Json::from_any(data.as_view())
            }
            _ => {
                if !creatable(t) {
                    return Err(Error::new(
                        ErrorKind::TypeError,
                        format!("`{}` does not support ToJSONGraph", value.type_key()),
                    ));
                }
                let mut fields = Vec::new();
                for field in serial_fields(t) {
                    let v = field.get(value)?;
                    let data = match v.type_index() {
                        abi::kTVMFFIInt if inline_field(&field) => Json::Int(v.cast()?),
                        abi::kTVMFFIFloat if inline_field(&field) => Json::Float(v.cast()?),
                        abi::kTVMFFIBool if inline_field(&field) => Json::Bool(v.cast()?),
                        _ => Json::Int(self.node(v.as_view())? as i64),
                    };
                    fields.push((Cow::Borrowed(field.name()), data));
                }
                Ok(Json::Object(fields))
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

/// The value of a JSON graph given as a value (a map with `root_index` and `nodes`, as
/// [`to_json_graph`] makes).
pub fn from_json_graph(graph: AnyView<'_>) -> Result<Any> {
    decode_graph(&Json::from_any(graph)?)
}

fn decode_graph(graph: &Json<'_>) -> Result<Any> {
    if !matches!(graph, Json::Object(_)) {
        return Err(invalid("expected a JSON object"));
    }
    let root = match graph.get("root_index") {
        Some(Json::Int(i)) => *i,
        Some(_) => return Err(invalid("`root_index` is not an integer")),
        None => return Err(invalid("missing `root_index`")),
    };
    let nodes = match graph.get("nodes") {
        Some(Json::Array(nodes)) => nodes,
        Some(_) => return Err(invalid("`nodes` is not a list")),
        None => return Err(invalid("missing `nodes`")),
    };
    let mut reader = GraphReader {
        nodes,
        done: vec![None; nodes.len()],
        active: vec![false; nodes.len()],
        depth: 0,
    };
    reader.value(root)
}

struct GraphReader<'a> {
    nodes: &'a [Json<'a>],
    done: Vec<Option<Any>>,
    active: Vec<bool>,
    depth: usize,
}

impl GraphReader<'_> {
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
        if self.active[i] {
            return Err(invalid(format!("node {i} refers back to itself")));
        }
        // An acyclic graph can still nest deeper than a walk may go.
        crate::stack::enter_level(self.depth + 1, "the JSON graph")?;
        self.active[i] = true;
        self.depth += 1;
        let result = self.decode(i);
        self.depth -= 1;
        self.active[i] = false;
        let value = result?;
        self.done[i] = Some(value.clone());
        Ok(value)
    }

    fn index_list(&mut self, data: Option<&Json<'_>>, i: usize) -> Result<Vec<Any>> {
        let Some(Json::Array(items)) = data else {
            return Err(invalid(format!(
                "node {i}: `data` is not a list of node indices"
            )));
        };
        items
            .iter()
            .map(|x| match x {
                Json::Int(index) => self.value(*index),
                _ => Err(invalid(format!("node {i}: bad node index"))),
            })
            .collect()
    }

    fn decode(&mut self, i: usize) -> Result<Any> {
        let node = &self.nodes[i];
        let Some(Json::Str(type_key)) = node.get("type") else {
            return Err(invalid(format!("node {i} has no string `type`")));
        };
        let data = node.get("data");
        let need = |what: &str| invalid(format!("node {i} (`{type_key}`): expected {what}"));
        let text = || match data {
            Some(Json::Str(s)) => Ok(s.as_ref()),
            _ => Err(need("a string")),
        };
        Ok(match type_key.as_ref() {
            "None" => Any::none(),
            "bool" => match data {
                Some(Json::Bool(b)) => Any::from(*b),
                _ => return Err(need("a bool")),
            },
            "int" => match data {
                Some(Json::Int(v)) => Any::from(*v),
                _ => return Err(need("an integer")),
            },
            "float" => match data {
                Some(Json::Float(v)) => Any::from(*v),
                Some(Json::Int(v)) => Any::from(*v as f64),
                _ => return Err(need("a number")),
            },
            "ffi.String" => Any::from(text()?),
            "ffi.Bytes" => crate::Bytes::from_bytes(&base64_decode(text()?)?).into(),
            "DataType" => Any::from(
                text()?
                    .parse::<DataType>()
                    .map_err(|e| invalid(format!("node {i}: {e}")))?,
            ),
            "Device" => match data {
                Some(Json::Array(pair)) => match pair.as_slice() {
                    [Json::Int(t), Json::Int(id)] => {
                        let part = |what: &str, v: i64| {
                            i32::try_from(v).map_err(|_| {
                                invalid(format!(
                                    "node {i} (`Device`): device {what} {v} is out of range \
                                     for a 32-bit integer"
                                ))
                            })
                        };
                        Any::from(Device::new(part("type", *t)?, part("id", *id)?))
                    }
                    _ => return Err(need("[type, id]")),
                },
                _ => return Err(need("[type, id]")),
            },
            "ffi.Shape" => match data {
                Some(Json::Array(dims)) => {
                    let dims = dims
                        .iter()
                        .map(|d| match d {
                            Json::Int(d) => Ok(*d),
                            _ => Err(need("integer dims")),
                        })
                        .collect::<Result<Vec<_>>>()?;
                    Shape::new(&dims).into()
                }
                _ => return Err(need("a list of dims")),
            },
            "ffi.BigInt" => crate::extra::bigint_text::from_decimal(text()?)?,
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
                let mut pairs = items.into_iter();
                if type_key == "ffi.Map" {
                    let mut map = Map::new();
                    while let (Some(k), Some(v)) = (pairs.next(), pairs.next()) {
                        map.insert(k, v);
                    }
                    map.into()
                } else {
                    let dict = Dict::new();
                    while let (Some(k), Some(v)) = (pairs.next(), pairs.next()) {
                        dict.insert(k, v);
                    }
                    dict.into()
                }
            }
            key => self.object(i, key, data)?,
        })
    }

    fn object(&mut self, i: usize, type_key: &str, data: Option<&Json<'_>>) -> Result<Any> {
        let type_index = types::type_key_to_index(type_key).map_err(|_| {
            Error::new(
                ErrorKind::KeyError,
                format!("JSON graph node {i} has type `{type_key}`, which is not registered"),
            )
        })?;
        if crate::extra::enums::is_enum_type(type_index) {
            return match data {
                Some(Json::Str(name)) => crate::extra::enums::entry_by_name(type_key, name),
                Some(Json::Int(index)) => crate::extra::enums::entry_by_index(type_key, *index),
                _ => Err(invalid(format!(
                    "node {i} (`{type_key}`): expected an entry name or int index"
                ))),
            };
        }
        if let Some(hook) = DATA_FROM_JSON.get(type_index) {
            let data = data.map_or_else(Any::none, Json::to_any);
            return hook.cast::<Function>()?.call_packed(&[data.as_view()]);
        }
        let Some(data @ Json::Object(_)) = data else {
            return Err(invalid(format!(
                "node {i} (`{type_key}`): `data` is not a JSON object of fields"
            )));
        };
        let obj = create_blank(type_index)?;
        for field in serial_fields(type_index) {
            let value = match data.get(field.name()) {
                Some(v) if inline_field(&field) => match v {
                    Json::Int(x) => Any::from(*x),
                    Json::Float(x) => Any::from(*x),
                    Json::Bool(x) => Any::from(*x),
                    _ => {
                        return Err(invalid(format!(
                            "node {i}: field `{}` is not a plain number or bool",
                            field.name()
                        )));
                    }
                },
                Some(Json::Int(index)) => self.value(*index)?,
                Some(_) => {
                    return Err(invalid(format!(
                        "node {i}: field `{}` is not a node index",
                        field.name()
                    )));
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
            let text = base64_encode(bytes).unwrap();
            assert_eq!(base64_decode(&text).unwrap(), bytes);
        }
        assert_eq!(base64_encode(b"ab").unwrap(), "YWI=");
    }

    fn read(nodes: &str, root: usize) -> Result<Any> {
        from_json_graph_string(&format!(r#"{{"root_index": {root}, "nodes": [{nodes}]}}"#))
    }

    #[test]
    fn a_device_out_of_the_32_bit_range_is_refused() {
        let device = |pair: &str| read(&format!(r#"{{"type": "Device", "data": {pair}}}"#), 0);
        let dev = device("[2, 3]").unwrap().cast::<Device>().unwrap();
        assert_eq!((dev.0.device_type, dev.0.device_id), (2, 3));
        for (pair, what) in [
            ("[4294967297, 0]", "device type 4294967297"),
            ("[1, -2147483649]", "device id -2147483649"),
        ] {
            let err = device(pair).unwrap_err();
            assert_eq!(err.kind(), "ValueError");
            assert!(err.message().contains(what), "{err}");
            assert!(err.message().contains("out of range"), "{err}");
        }
    }

    #[test]
    fn a_deep_acyclic_graph_is_nested_too_deeply_not_cyclic() {
        // Node i is an array holding node i + 1; the last holds an int.
        let depth = crate::stack::MAX_NESTING + 1;
        let mut nodes: Vec<std::string::String> = (0..depth)
            .map(|i| format!(r#"{{"type": "ffi.Array", "data": [{}]}}"#, i + 1))
            .collect();
        nodes.push(r#"{"type": "int", "data": 1}"#.into());
        let text = nodes.join(",");
        let err = std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(move || read(&text, 0).unwrap_err())
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(err.kind(), "ValueError");
        assert!(err.message().contains("nested too deeply"), "{err}");
        assert!(!err.message().contains("refers back"), "{err}");
    }
}
