//! Glue of `tvm.ffi.dataclasses`: object types and enums defined from Python, through
//! `tvm_ffi::extra::runtime_types`, and the field writes of their generated `__init__` and
//! `__setattr__`.

use pyo3::exceptions::{PyAttributeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use tvm_ffi::extra::dataclass::{self, FieldStorage, create_empty};
use tvm_ffi::extra::enums::EnumState;
use tvm_ffi::extra::runtime_types::{self, EnumKind, FieldDefault, FieldSpec, TypeSpec};
use tvm_ffi::{Any, Function, reflection};

use crate::convert::{any_to_py, function_of, py_to_any};
use crate::errors::raise_error;
use crate::objects::PyObjectRef;

/// One field as `tvm.ffi.dataclasses` describes it: `(name, static type index, boxed, flags,
/// default kind, default)`; `boxed` stores the value as a 16-byte `Any` whatever its type, the
/// default kind is 0 (required), 1 (a value) or 2 (a factory called with no arguments).
type PyFieldSpec<'py> = (String, i32, bool, i64, u8, Bound<'py, PyAny>);

fn field_spec(py: Python<'_>, spec: PyFieldSpec<'_>) -> PyResult<FieldSpec> {
    let (name, static_type_index, boxed, flags, default_kind, default) = spec;
    let storage = if boxed {
        FieldStorage::Any
    } else {
        FieldStorage::of(static_type_index).map_err(|e| raise_error(py, e))?
    };
    let default = match default_kind {
        0 => FieldDefault::Required,
        1 => FieldDefault::Value(py_to_any(&default)?),
        2 => FieldDefault::Factory(function_of(&default)?),
        other => {
            return Err(PyValueError::new_err(format!(
                "field '{name}': unknown default kind {other}"
            )));
        }
    };
    Ok(FieldSpec {
        name,
        static_type_index,
        storage,
        flags,
        default,
    })
}

/// Defines object type `type_key` under `parent_index` with `fields`; returns its index and
/// each field's offset. A `ValueError` (nothing registered) for an invalid definition.
#[pyfunction]
pub(crate) fn _define_object_type(
    py: Python<'_>,
    type_key: String,
    parent_index: i32,
    fields: Vec<PyFieldSpec<'_>>,
    structural_kind: i32,
) -> PyResult<(i32, Vec<usize>)> {
    let fields = fields
        .into_iter()
        .map(|spec| field_spec(py, spec))
        .collect::<PyResult<Vec<_>>>()?;
    let spec = TypeSpec {
        type_key,
        parent_index,
        fields,
        structural_kind,
    };
    runtime_types::define_type(&spec).map_err(|e| raise_error(py, e))
}

/// Binds `obj` (made by `__new__`) to a new object of `type_index` whose fields, in reflection
/// order (ancestors' first), are set from `values`; a `TypeError` naming the field whose value
/// the field's setter rejects.
#[pyfunction]
pub(crate) fn _init_object(
    py: Python<'_>,
    obj: &Bound<'_, PyObjectRef>,
    type_index: i32,
    values: Vec<Bound<'_, PyAny>>,
) -> PyResult<()> {
    let fields: Vec<_> = reflection::fields_of(type_index).collect();
    if fields.len() != values.len() {
        return Err(PyTypeError::new_err(format!(
            "{} has {} field(s), got {} value(s)",
            tvm_ffi::types::type_key_of(type_index),
            fields.len(),
            values.len()
        )));
    }
    let new: Any = create_empty(type_index)
        .map_err(|e| raise_error(py, e))?
        .into();
    for (field, value) in fields.iter().zip(&values) {
        let value = py_to_any(value)?;
        field
            .set(new.as_view(), value.as_view())
            .map_err(|e| raise_error(py, e))?;
    }
    obj.get().bind(new)
}

/// Sets field `name` of `obj` to `value` through the field's setter; an `AttributeError` for
/// a field that is not writable (frozen, or defined read-only in native code), unless
/// `initializing` (the object's `__post_init__` is running).
#[pyfunction]
#[pyo3(signature = (obj, name, value, initializing = false))]
pub(crate) fn _object_set_field(
    py: Python<'_>,
    obj: &Bound<'_, PyObjectRef>,
    name: &str,
    value: &Bound<'_, PyAny>,
    initializing: bool,
) -> PyResult<()> {
    let this = obj.get().any();
    let field = reflection::fields_of(this.type_index())
        .find(|f| f.name() == name)
        .ok_or_else(|| {
            PyAttributeError::new_err(format!(
                "'{}' object has no field '{name}'",
                this.type_key()
            ))
        })?;
    if !initializing && field.flags() & tvm_ffi::abi::kTVMFFIFieldFlagBitMaskWritable == 0 {
        return Err(PyAttributeError::new_err(format!(
            "field '{name}' of {} is read-only",
            this.type_key()
        )));
    }
    let value = py_to_any(value)?;
    field
        .set(this.as_view(), value.as_view())
        .map_err(|e| raise_error(py, e))
}

fn enum_kind(kind: &str) -> PyResult<EnumKind> {
    match kind {
        "enum" => Ok(EnumKind::Plain),
        "int" => Ok(EnumKind::Int),
        "str" => Ok(EnumKind::Str),
        other => Err(PyValueError::new_err(format!(
            "unknown enum kind '{other}' (expected 'enum', 'int' or 'str')"
        ))),
    }
}

/// Defines enum type `type_key` of kind `"enum"`, `"int"` or `"str"`; returns its index.
#[pyfunction]
pub(crate) fn _define_enum_type(py: Python<'_>, type_key: &str, kind: &str) -> PyResult<i32> {
    runtime_types::define_enum_type(type_key, enum_kind(kind)?).map_err(|e| raise_error(py, e))
}

/// Adds entry `name` with `value` to enum type `type_index` of `kind`, with attributes
/// `attrs` (recorded in the type's enum state, where native code finds them); returns the
/// entry.
#[pyfunction]
pub(crate) fn _add_enum_entry(
    py: Python<'_>,
    type_index: i32,
    kind: &str,
    name: &str,
    value: &Bound<'_, PyAny>,
    attrs: Vec<(String, Bound<'_, PyAny>)>,
) -> PyResult<Py<PyAny>> {
    let value = py_to_any(value)?;
    let entry = runtime_types::add_enum_entry(type_index, enum_kind(kind)?, name, value.as_view())
        .map_err(|e| raise_error(py, e))?;
    let state = EnumState::of(type_index)
        .ok_or_else(|| PyValueError::new_err("the enum type lost its entries"))?;
    for (attr, attr_value) in attrs {
        state
            .set_attr(&attr, entry.clone(), py_to_any(&attr_value)?)
            .map_err(|e| raise_error(py, e))?;
    }
    any_to_py(py, entry)
}

/// A shallow copy of `obj` (fields shared) through its type's `__ffi_shallow_copy__`; a
/// `TypeError` for a type without one.
#[pyfunction]
pub(crate) fn _shallow_copy(py: Python<'_>, obj: &Bound<'_, PyObjectRef>) -> PyResult<Py<PyAny>> {
    let this = obj.get().any();
    let copy: Function = dataclass::type_attr(this.type_index(), "__ffi_shallow_copy__")
        .and_then(|attr| attr.cast().ok())
        .ok_or_else(|| {
            PyTypeError::new_err(format!("'{}' objects cannot be copied", this.type_key()))
        })?;
    let value = copy
        .call_packed(&[this.as_view()])
        .map_err(|e| raise_error(py, e))?;
    any_to_py(py, value)
}
