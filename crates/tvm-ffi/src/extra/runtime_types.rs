//! Object types and enums defined at run time by a frontend (Python's `py_class` and `Enum`):
//! [`define_type`] lays out a new object type from its field specifications (offsets chosen
//! here, after the parent's fields), registers its fields with getters and setters, its size
//! and structural kind, and the allocation, copy and constructor attributes of
//! [`dataclass::register_layout_type`]; [`define_enum_type`] and [`add_enum_entry`] make enum
//! types whose entries share the layout of `ffi.Enum`, `ffi.IntEnum` or `ffi.StrEnum`.
//!
//! Everything is checked before the type key is allocated, so a rejected specification leaves
//! nothing behind in the type table.

use crate::abi::{self, TVMFFIAny, TVMFFIByteArray, TVMFFIFieldInfo, TVMFFITypeMetadata};
use crate::any::{Any, AnyView};
use crate::error::{Error, ErrorKind, Result};
use crate::extra::dataclass::{self, FieldStorage};
use crate::extra::enums::{EnumObj, EnumState, IntEnumObj, StrEnumObj};
use crate::function::Function;
use crate::object::{Object, ObjectCore, ObjectRef, alloc_object};
use crate::{reflection, types};

/// The field flags a frontend may set on a field of a type defined at run time.
pub const USER_FIELD_FLAGS: i64 = abi::kTVMFFIFieldFlagBitMaskWritable
    | abi::kTVMFFIFieldFlagBitMaskSEqHashIgnore
    | abi::kTVMFFIFieldFlagBitMaskSEqHashDef
    | abi::kTVMFFIFieldFlagBitMaskReprOff
    | abi::kTVMFFIFieldFlagBitMaskCompareOff
    | abi::kTVMFFIFieldFlagBitMaskHashOff
    | abi::kTVMFFIFieldFlagBitMaskInitOff
    | abi::kTVMFFIFieldFlagBitMaskKwOnly;

/// The default of a field: none, a value, or a function called for each new object.
#[derive(Clone, Default)]
pub enum FieldDefault {
    /// The field is required.
    #[default]
    Required,
    /// The field starts as this value.
    Value(Any),
    /// The field starts as what this function returns (called with no arguments).
    Factory(Function),
}

/// One field of a type defined at run time.
#[derive(Clone)]
pub struct FieldSpec {
    /// The field's name, unique in the type and its ancestors.
    pub name: String,
    /// The declared type index (`-1`: any value; an object index: that type or a subtype).
    pub static_type_index: i32,
    /// How the field is stored (consistent with `static_type_index`, see [`FieldStorage::of`]).
    pub storage: FieldStorage,
    /// Flags from [`USER_FIELD_FLAGS`].
    pub flags: i64,
    /// The default.
    pub default: FieldDefault,
}

/// A type to define: its key, its parent and its own fields.
#[derive(Clone)]
pub struct TypeSpec {
    /// The new, not yet registered type key.
    pub type_key: String,
    /// The parent: `ffi.Object` or a type defined by [`define_type`].
    pub parent_index: i32,
    /// The fields the type adds to its parent's.
    pub fields: Vec<FieldSpec>,
    /// The structural equality kind (`kTVMFFISEqHashKind*`).
    pub structural_kind: i32,
}

/// The size and alignment of a field stored as `storage`.
pub fn storage_layout(storage: FieldStorage) -> (usize, usize) {
    match storage {
        FieldStorage::Int | FieldStorage::Float | FieldStorage::OpaquePtr => (8, 8),
        FieldStorage::Bool => (1, 1),
        FieldStorage::DataType => (size_of::<abi::DLDataType>(), align_of::<abi::DLDataType>()),
        FieldStorage::Device => (size_of::<abi::DLDevice>(), align_of::<abi::DLDevice>()),
        FieldStorage::Any => (size_of::<TVMFFIAny>(), align_of::<TVMFFIAny>()),
        FieldStorage::Object => (size_of::<usize>(), align_of::<usize>()),
    }
}

/// The offsets of fields stored as `storages`, placed in order after `start` bytes, and the
/// total size (rounded up to 8 bytes).
pub fn layout_fields(start: usize, storages: &[FieldStorage]) -> (Vec<usize>, usize) {
    let mut end = start;
    let offsets = storages
        .iter()
        .map(|&storage| {
            let (size, align) = storage_layout(storage);
            let offset = end.next_multiple_of(align);
            end = offset + size;
            offset
        })
        .collect();
    (offsets, end.next_multiple_of(8))
}

fn value_error(message: String) -> Error {
    Error::new(ErrorKind::ValueError, message)
}

/// Whether a storage kind can hold values of `static_type_index`.
fn storage_fits(storage: FieldStorage, static_type_index: i32) -> bool {
    match FieldStorage::of(static_type_index) {
        // An `Any` slot holds every value, whatever the declared type.
        _ if storage == FieldStorage::Any => true,
        // Strings and bytes may be inline values, never in an object slot.
        Ok(FieldStorage::Object) => {
            storage == FieldStorage::Object
                && static_type_index != abi::kTVMFFIStr
                && static_type_index != abi::kTVMFFIBytes
        }
        Ok(expected) => expected == storage,
        Err(_) => false,
    }
}

/// Checks a specification against the type table: a `ValueError` for a key in use, a parent
/// that is not laid out at run time, a repeated or inherited field name, a field whose storage
/// does not fit its type, a flag outside [`USER_FIELD_FLAGS`] or an unknown structural kind.
fn check_spec(spec: &TypeSpec) -> Result<usize> {
    let key = &spec.type_key;
    if key.is_empty() {
        return Err(value_error("a type key must not be empty".into()));
    }
    if types::type_key_to_index(key).is_ok() {
        return Err(value_error(format!(
            "type key `{key}` is already registered"
        )));
    }
    let parent_size = types::total_size(spec.parent_index)
        .filter(|_| {
            spec.parent_index == abi::kTVMFFIObject
                || dataclass::type_attr(spec.parent_index, "__ffi_new__").is_some()
        })
        .ok_or_else(|| {
            value_error(format!(
                "the parent of `{key}` must be ffi.Object or a type defined at run time, got `{}`",
                types::type_key_of(spec.parent_index)
            ))
        })?;
    if !(abi::kTVMFFISEqHashKindUnsupported..=abi::kTVMFFISEqHashKindUniqueInstance)
        .contains(&spec.structural_kind)
    {
        return Err(value_error(format!(
            "unknown structural kind {} for `{key}`",
            spec.structural_kind
        )));
    }
    let inherited: Vec<&str> = reflection::fields_of(spec.parent_index)
        .map(|f| f.name())
        .collect();
    for (i, field) in spec.fields.iter().enumerate() {
        let name = &field.name;
        if name.is_empty() {
            return Err(value_error(format!("a field of `{key}` has an empty name")));
        }
        if inherited.contains(&name.as_str()) || spec.fields[..i].iter().any(|f| &f.name == name) {
            return Err(value_error(format!("`{key}` has field `{name}` twice")));
        }
        if !storage_fits(field.storage, field.static_type_index) {
            return Err(value_error(format!(
                "field `{name}` of `{key}`: storage {:?} cannot hold type index {}",
                field.storage, field.static_type_index
            )));
        }
        if field.flags & !USER_FIELD_FLAGS != 0 {
            return Err(value_error(format!(
                "field `{name}` of `{key}`: flags {:#x} are not settable",
                field.flags & !USER_FIELD_FLAGS
            )));
        }
    }
    Ok(parent_size)
}

/// Whether a boxed (`Any`) slot declared with `expected` may hold a value of `type_index`:
/// any value for `Any` and `None` declarations; otherwise the declared type or a subtype, with
/// a string or bytes declaration also taking its inline (small) form. `None` is only for
/// declarations that say so (`Optional[...]` fields are declared `Any`).
fn boxed_value_fits(expected: i32, type_index: i32) -> bool {
    match expected {
        abi::kTVMFFIAny | abi::kTVMFFINone => true,
        abi::kTVMFFIStr => matches!(type_index, abi::kTVMFFIStr | abi::kTVMFFISmallStr),
        abi::kTVMFFIBytes => matches!(type_index, abi::kTVMFFIBytes | abi::kTVMFFISmallBytes),
        _ => types::is_instance_of(type_index, expected),
    }
}

/// The `TypeError` of a value a typed field refuses, naming the field, the type and the value.
#[cold]
fn field_type_error(what: &str, expected: i32, value: AnyView<'_>) -> Error {
    let mut shown = format!("{value:?}");
    if shown.chars().count() > 60 {
        shown = shown.chars().take(57).chain("...".chars()).collect();
    }
    Error::new(
        ErrorKind::TypeError,
        format!(
            "{what} expects `{}`, got `{}` ({shown})",
            types::type_key_of(expected),
            value.type_key()
        ),
    )
}

/// The setter function of a field: checks that the value is of the declared type (object
/// slots also take None, as NULL), then stores it. Every write goes through it, private ones
/// (`_object_set_field`, the reflection setter) included.
fn make_setter(spec: &FieldSpec, type_key: &str) -> Function {
    let (storage, expected) = (spec.storage, spec.static_type_index);
    let what = format!("field `{}` of `{type_key}`", spec.name);
    dataclass::setter_function(what.clone(), move |field, value| {
        let refused = match storage {
            FieldStorage::Object => {
                expected != abi::kTVMFFIObject
                    && !value.is_none()
                    && !types::is_instance_of(value.type_index(), expected)
            }
            FieldStorage::Any => !boxed_value_fits(expected, value.type_index()),
            // Plain slots convert (or refuse) in `write_field`.
            _ => false,
        };
        if refused {
            return Err(field_type_error(&what, expected, value));
        }
        // SAFETY: the type table passes the address of this field, stored as `storage`, in a
        // live object of the type.
        unsafe { dataclass::write_field(field, storage, value.to_owned()) }
            .map_err(|e| Error::new(e.kind(), format!("{what}: {}", e.message())).with_cause(e))
    })
}

/// Registers one field record at `offset`.
fn register_field(type_index: i32, type_key: &str, spec: &FieldSpec, offset: usize) -> Result<()> {
    let (size, align) = storage_layout(spec.storage);
    let setter = Any::from(make_setter(spec, type_key));
    let (default, default_flags) = match &spec.default {
        FieldDefault::Required => (Any::none(), 0),
        FieldDefault::Value(value) => (value.clone(), abi::kTVMFFIFieldFlagBitMaskHasDefault),
        FieldDefault::Factory(factory) => (
            Any::from(factory.clone()),
            abi::kTVMFFIFieldFlagBitMaskHasDefault | abi::kTVMFFIFieldFlagBitMaskDefaultFromFactory,
        ),
    };
    let info = TVMFFIFieldInfo {
        name: TVMFFIByteArray::from_text(&spec.name),
        doc: TVMFFIByteArray::EMPTY,
        metadata: TVMFFIByteArray::EMPTY,
        flags: spec.flags | default_flags | abi::kTVMFFIFieldFlagBitMaskSetterIsFunctionObj,
        size: size as i64,
        alignment: align as i64,
        offset: offset as i64,
        getter: dataclass::field_getter(spec.storage),
        setter: setter
            .as_object_ptr()
            .map_or(std::ptr::null_mut(), |p| p.cast()),
        default_value_or_factory: *default.as_raw(),
        field_static_type_index: spec.static_type_index,
    };
    // SAFETY: the record and what it points at are valid for the call; the type table copies
    // the name and the default and retains the setter function.
    let rc = unsafe { abi::TVMFFITypeRegisterField(type_index, &info) };
    if rc != 0 {
        return Err(Error::take_raised_or(ErrorKind::RuntimeError, &spec.name));
    }
    Ok(())
}

/// Registers the size and structural kind of a type (no creator: objects come from its
/// `__ffi_new__`).
fn register_metadata(type_index: i32, total_size: usize, structural_kind: i32) -> Result<()> {
    let metadata = TVMFFITypeMetadata {
        doc: TVMFFIByteArray::EMPTY,
        creator: None,
        total_size: i32::try_from(total_size)
            .map_err(|_| value_error(format!("object size {total_size} is too large")))?,
        structural_eq_hash_kind: structural_kind,
    };
    // SAFETY: the record is valid for the call; the type table copies it.
    if unsafe { abi::TVMFFITypeRegisterMetadata(type_index, &metadata) } != 0 {
        return Err(Error::take_raised_or(ErrorKind::RuntimeError, "metadata"));
    }
    Ok(())
}

/// Defines a new object type from `spec` and returns its index together with the offset of
/// each of its fields: a `ValueError` (and nothing registered) if the specification is invalid
/// (see the module documentation).
pub fn define_type(spec: &TypeSpec) -> Result<(i32, Vec<usize>)> {
    let parent_size = check_spec(spec)?;
    let storages: Vec<FieldStorage> = spec.fields.iter().map(|f| f.storage).collect();
    let (offsets, total_size) = layout_fields(parent_size, &storages);
    let index = types::register_type(&spec.type_key, spec.parent_index, 0, true)?;
    for (field, &offset) in spec.fields.iter().zip(&offsets) {
        register_field(index, &spec.type_key, field, offset)?;
    }
    register_metadata(index, total_size, spec.structural_kind)?;
    dataclass::register_layout_type(index, total_size as i64)?;
    Ok((index, offsets))
}

/// The kind of an enum type: the type its entries share their layout with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnumKind {
    /// `ffi.Enum`: entries with an index and a name.
    Plain,
    /// `ffi.IntEnum`: entries with an integer value.
    Int,
    /// `ffi.StrEnum`: entries with a string value.
    Str,
}

impl EnumKind {
    /// The index of the parent type.
    pub fn parent_index(self) -> i32 {
        match self {
            EnumKind::Plain => EnumObj::type_index(),
            EnumKind::Int => IntEnumObj::type_index(),
            EnumKind::Str => StrEnumObj::type_index(),
        }
    }
}

/// Defines a new enum type `type_key` of `kind`, with no entries yet: a `ValueError` if the key
/// is registered.
pub fn define_enum_type(type_key: &str, kind: EnumKind) -> Result<i32> {
    if type_key.is_empty() {
        return Err(value_error("a type key must not be empty".into()));
    }
    if types::type_key_to_index(type_key).is_ok() {
        return Err(value_error(format!(
            "type key `{type_key}` is already registered"
        )));
    }
    let index = types::register_type(type_key, kind.parent_index(), 0, true)?;
    EnumState::of_or_create(index)?;
    Ok(index)
}

/// Allocates an object holding `value` as an object of `type_index`, a subtype of `T` with
/// `T`'s layout.
fn alloc_as<T: ObjectCore>(value: T, type_index: i32) -> Any {
    // SAFETY: `T` is an object type (repr(C), header first) and `type_index` a subtype that adds
    // no fields, so the object is a valid `T`; no extra bytes are requested.
    let ptr = unsafe { alloc_object(value, 0, type_index) };
    // SAFETY: a new object with one strong reference, moved into the reference.
    Any::from(unsafe { ObjectRef::<T>::from_raw(ptr.as_ptr().cast()) })
}

/// Adds entry `name` to enum type `type_index` (made by [`define_enum_type`] with `kind`) with
/// `value` (an int for `Int`, a string for `Str`, ignored for `Plain`). The entry's int index is
/// its position, or its value for `Int`; its str index is `name`, or its value for `Str` (the
/// runtime's `value` field of int and str enums reads those indices). Returns the entry, or a
/// `ValueError` for an index in use, a `TypeError` for a value of the wrong type.
pub fn add_enum_entry(
    type_index: i32,
    kind: EnumKind,
    name: &str,
    value: AnyView<'_>,
) -> Result<Any> {
    if !types::is_instance_of(type_index, kind.parent_index()) || type_index == kind.parent_index()
    {
        return Err(Error::new(
            ErrorKind::TypeError,
            format!(
                "`{}` is not an enum type of kind {kind:?}",
                types::type_key_of(type_index)
            ),
        ));
    }
    let state = EnumState::of_or_create(type_index)?;
    let position = state.entries().len() as i64;
    // The value of an int enum entry is its int index, that of a str enum entry its str index.
    let base = |int_index: i64, str_index: &str| EnumObj {
        base: Object::header(),
        _int_index: int_index,
        _str_index: crate::String::from(str_index),
    };
    let entry = match kind {
        EnumKind::Plain => alloc_as(base(position, name), type_index),
        EnumKind::Int => alloc_as(
            IntEnumObj {
                base: base(value.cast()?, name),
            },
            type_index,
        ),
        EnumKind::Str => {
            let value: std::string::String = value.cast()?;
            alloc_as(
                StrEnumObj {
                    base: base(position, &value),
                },
                type_index,
            )
        }
    };
    state.add(entry.clone())?;
    Ok(entry)
}
