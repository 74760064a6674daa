//! Enums (`ffi.Enum`, `ffi.IntEnum`, `ffi.StrEnum`): each entry of an enum type is one object,
//! a singleton with an integer index (its position) and a name. The entries of a type live in
//! an `ffi.EnumState` stored as the type's `__ffi_enum__` attribute: `entries` in order,
//! `indexes` from both the int index and the name to the entry, and `attrs`, per attribute name,
//! a value for each entry. Entries print as `type.key.Name`, serialize by name and deserialize
//! to the same singleton, and are never copied.

use crate::any::{Any, AnyView};
use crate::containers::map::MapRead;
use crate::error::{Error, ErrorKind, Result};
use crate::object::{Object, ObjectCore, ObjectRef};
use crate::type_attr::TypeAttr;
use crate::{Dict, List, define_object, reflection, types};

define_object! {
    /// The entries of one enum type (its `__ffi_enum__` attribute).
    pub struct EnumStateObj : "ffi.EnumState" extends Object {
        /// The entries in index order.
        pub entries: List,
        /// Entry by int index and by name.
        pub indexes: Dict,
        /// Per attribute name, a dict from entry to value.
        pub attrs: Dict,
    }
}

define_object! {
    /// An enum entry: its index among the entries of its type and its name.
    pub struct EnumObj : "ffi.Enum" extends Object {
        /// The position among the entries.
        pub _int_index: i64,
        /// The name.
        pub _str_index: crate::String,
    }
}

define_object! {
    /// An enum entry whose value is its integer index (reflected as the read-only field `value`,
    /// an alias of `_int_index`).
    pub struct IntEnumObj : "ffi.IntEnum" extends EnumObj {}
}

define_object! {
    /// An enum entry whose value is its name (reflected as the read-only field `value`, an
    /// alias of `_str_index`).
    pub struct StrEnumObj : "ffi.StrEnum" extends EnumObj {}
}

static ENUM_ATTR: TypeAttr = TypeAttr::new("__ffi_enum__");

/// Whether objects of `type_index` are enum entries.
pub fn is_enum_type(type_index: i32) -> bool {
    type_index >= crate::abi::kTVMFFIDynObjectBegin
        && types::is_instance_of(type_index, EnumObj::type_index())
}

/// The entries of an enum type (shared, mutable as entries are added).
#[derive(Clone)]
pub struct EnumState(ObjectRef<EnumStateObj>);

impl EnumState {
    /// An empty state.
    pub fn new() -> EnumState {
        EnumState(ObjectRef::new(EnumStateObj {
            base: Object::header(),
            entries: List::new(),
            indexes: Dict::new(),
            attrs: Dict::new(),
        }))
    }

    /// The state of enum type `type_index`, if it has one.
    pub fn of(type_index: i32) -> Option<EnumState> {
        ENUM_ATTR
            .get(type_index)
            .and_then(|v| v.cast::<ObjectRef<EnumStateObj>>().ok())
            .map(EnumState)
    }

    /// The state of enum type `type_index`, created (and registered as its `__ffi_enum__`) if
    /// it has none.
    pub fn of_or_create(type_index: i32) -> Result<EnumState> {
        if let Some(state) = EnumState::of(type_index) {
            return Ok(state);
        }
        let state = EnumState::new();
        let registered =
            reflection::register_type_attr(type_index, "__ffi_enum__", &Any::from(state.0.clone()));
        // Another thread may have registered first (then this registration fails): use
        // whichever state the table holds.
        match EnumState::of(type_index) {
            Some(held) => Ok(held),
            None => registered.map(|()| state),
        }
    }

    /// The entries in index order.
    pub fn entries(&self) -> Vec<Any> {
        self.0.entries.to_vec()
    }

    /// Adds `entry` (an object whose type derives from `ffi.Enum`, with its index set to the
    /// current number of entries): a `ValueError` if its name or index is taken.
    pub fn add(&self, entry: Any) -> Result<()> {
        let obj = entry.as_object::<EnumObj>().ok_or_else(|| {
            Error::new(
                ErrorKind::TypeError,
                format!(
                    "an enum entry must derive from ffi.Enum, got `{}`",
                    entry.type_key()
                ),
            )
        })?;
        let (index, name) = (obj._int_index, obj._str_index.clone());
        if self.0.indexes.contains_key(&Any::from(index))
            || self.0.indexes.contains_key(&Any::from(name.clone()))
        {
            return Err(Error::new(
                ErrorKind::ValueError,
                format!(
                    "enum entry {index} `{}` is already defined",
                    name.to_string_lossy()
                ),
            ));
        }
        self.0.entries.push(entry.clone());
        self.0.indexes.insert(index, entry.clone());
        self.0.indexes.insert(name, entry);
        Ok(())
    }

    /// The entry with int index or name `key`: a `KeyError` naming the key and the range.
    pub fn get(&self, type_key: &str, key: AnyView<'_>) -> Result<Any> {
        self.0.indexes.get(&key).ok_or_else(|| {
            // Keys are ints and names; anything else shows its type and address.
            let shown = format!("{key:?}");
            Error::new(
                ErrorKind::KeyError,
                format!(
                    "enum `{type_key}` has no entry {shown} (it has {} entries, indices 0 to {})",
                    self.0.entries.len(),
                    self.0.entries.len() as i64 - 1
                ),
            )
        })
    }

    /// Sets attribute `name` of `entry` to `value`.
    pub fn set_attr(&self, name: &str, entry: Any, value: Any) -> Result<()> {
        let column = match self.0.attrs.get(name) {
            Some(column) => column.cast::<Dict>()?,
            None => {
                let column = Dict::new();
                self.0.attrs.insert(name, column.clone());
                column
            }
        };
        column.insert(entry, value);
        Ok(())
    }

    /// The state's object.
    pub fn as_object(&self) -> &ObjectRef<EnumStateObj> {
        &self.0
    }
}

impl Default for EnumState {
    fn default() -> Self {
        EnumState::new()
    }
}

/// The name of an enum entry (`None` if `value` is not one).
pub fn entry_name(value: AnyView<'_>) -> Option<String> {
    if !is_enum_type(value.type_index()) {
        return None;
    }
    value
        .as_object::<EnumObj>()
        .map(|e| e._str_index.to_string_lossy().into_owned())
}

/// The int index of an entry of an int enum (`None` if `value` is not one).
pub fn int_index_of(value: AnyView<'_>) -> Option<i64> {
    let t = value.type_index();
    if !is_enum_type(t) || !types::is_instance_of(t, IntEnumObj::type_index()) {
        return None;
    }
    value.as_object::<EnumObj>().map(|e| e._int_index)
}

/// The entry of enum type `type_key` named `name`; a `KeyError` if the type has no such entry
/// (or no entries).
pub fn entry_by_name(type_key: &str, name: &str) -> Result<Any> {
    entry_by_key(type_key, Any::from(name))
}

/// The entry of enum type `type_key` with int index `index`; a `KeyError` if it has none.
pub fn entry_by_index(type_key: &str, index: i64) -> Result<Any> {
    entry_by_key(type_key, Any::from(index))
}

fn entry_by_key(type_key: &str, key: Any) -> Result<Any> {
    let index = types::type_key_to_index(type_key)?;
    let state = EnumState::of(index).ok_or_else(|| {
        Error::new(
            ErrorKind::KeyError,
            format!("enum `{type_key}` has no entries"),
        )
    })?;
    state.get(type_key, key.as_view())
}

/// Registers the enum types (with the `value` aliases of int and str enums, left out of
/// `__init__` and of structural comparison) and the `__ffi_init__` of `ffi.EnumState`.
pub(crate) fn register() -> Result<()> {
    let alias = |doc| reflection::FieldOptions {
        flags: crate::abi::kTVMFFIFieldFlagBitMaskInitOff
            | crate::abi::kTVMFFIFieldFlagBitMaskSEqHashIgnore,
        doc,
    };
    reflection::register_field_with::<i64>(
        IntEnumObj::type_index(),
        "value",
        std::mem::offset_of!(EnumObj, _int_index),
        alias("Canonical integer index."),
    )?;
    reflection::register_field_with::<crate::String>(
        StrEnumObj::type_index(),
        "value",
        std::mem::offset_of!(EnumObj, _str_index),
        alias("Canonical string index."),
    )?;
    let index = EnumStateObj::type_index();
    reflection::register_typed_method(index, "__ffi_init__", || EnumState::new().0, true)?;
    // The column exists from start-up, as apache-tvm-ffi's headers assume.
    reflection::register_type_attr(0, "__ffi_enum__", &Any::none())
}
