//! Deep copy of value graphs (`ffi.DeepCopy`): containers and reflected objects are copied,
//! shared references stay shared and cycles stay cycles in the copy; immutable leaves (plain
//! values, strings, bytes, shapes, tensors) are shared. An object type is copied through its
//! `__ffi_shallow_copy__` attribute, or else built blank by its creator and filled through its
//! field setters; a type with neither (functions, modules) raises a `RuntimeError` naming it.

use std::collections::HashMap;

use crate::abi;
use crate::any::{Any, AnyView};
use crate::containers::map::MapRead;
use crate::error::{Error, ErrorKind, Result};
use crate::function::Function;
use crate::reflection::{self, FieldRef};
use crate::type_attr::TypeAttr;
use crate::{Array, Dict, List, Map, types};

static SHALLOW_COPY: TypeAttr = TypeAttr::new("__ffi_shallow_copy__");

/// A deep copy of `value`.
pub fn deep_copy(value: AnyView<'_>) -> Result<Any> {
    Copier {
        memo: HashMap::new(),
        depth: 0,
    }
    .copy(value)
}

struct Copier {
    /// Copies made so far, by the address of the original.
    memo: HashMap<usize, Any>,
    depth: usize,
}

impl Copier {
    fn copy(&mut self, value: AnyView<'_>) -> Result<Any> {
        let Some(ptr) = value.as_object_ptr() else {
            return Ok(value.to_owned());
        };
        let addr = ptr as usize;
        if let Some(copy) = self.memo.get(&addr) {
            return Ok(copy.clone());
        }
        self.depth += 1;
        if self.depth > 10_000 {
            return Err(Error::new(
                ErrorKind::ValueError,
                "value nested too deeply to copy",
            ));
        }
        crate::stack::check("deep copy")?;
        let result = self.copy_object(value, addr);
        self.depth -= 1;
        let copy = result?;
        self.memo.insert(addr, copy.clone());
        Ok(copy)
    }

    fn copy_object(&mut self, value: AnyView<'_>, addr: usize) -> Result<Any> {
        let t = value.type_index();
        Ok(match t {
            abi::kTVMFFIStr
            | abi::kTVMFFIBytes
            | abi::kTVMFFIShape
            | abi::kTVMFFITensor
            | abi::kTVMFFIBigInt => value.to_owned(),
            abi::kTVMFFIArray => {
                let items = value.cast::<Array>()?;
                let copies = items
                    .iter()
                    .map(|v| self.copy(v.as_view()))
                    .collect::<Result<_>>()?;
                Array::from_vec(copies).into()
            }
            abi::kTVMFFIList => {
                let list = List::new();
                self.memo.insert(addr, list.clone().into());
                for item in value.cast::<List>()?.to_vec() {
                    list.push(self.copy(item.as_view())?);
                }
                list.into()
            }
            abi::kTVMFFIMap => {
                let mut map = Map::new();
                for (k, v) in value.cast::<Map>()?.iter() {
                    let (k, v) = (self.copy(k.as_view())?, self.copy(v.as_view())?);
                    map.insert(k, v);
                }
                map.into()
            }
            abi::kTVMFFIDict => {
                let dict = Dict::new();
                self.memo.insert(addr, dict.clone().into());
                for (k, v) in value.cast::<Dict>()?.iter() {
                    let (k, v) = (self.copy(k.as_view())?, self.copy(v.as_view())?);
                    dict.insert(k, v);
                }
                dict.into()
            }
            _ => self.copy_reflected(value, addr)?,
        })
    }

    fn copy_reflected(&mut self, value: AnyView<'_>, addr: usize) -> Result<Any> {
        let t = value.type_index();
        if crate::enums::is_enum_type(t) {
            return Ok(value.to_owned());
        }
        let fields: Vec<FieldRef> = reflection::fields_of(t)
            .filter(|f| f.is_readable())
            .collect();
        let copy = if let Some(shallow) = SHALLOW_COPY.get(t) {
            shallow.cast::<Function>()?.call_packed(&[value])?
        } else {
            let blank = crate::serialization::graph::create_blank(t).map_err(|_| {
                Error::new(
                    ErrorKind::RuntimeError,
                    format!(
                        "Cannot deep copy object of type \"{}\" because it is not copy-constructible",
                        types::type_key_of(t)
                    ),
                )
            })?;
            for field in &fields {
                field.set(&blank, field.get(value)?.as_view())?;
            }
            blank
        };
        self.memo.insert(addr, copy.clone());
        for field in &fields {
            let v = field.get(&copy)?;
            if v.is_object() && field.is_settable() {
                let v = self.copy(v.as_view())?;
                field.set(&copy, v.as_view())?;
            }
        }
        Ok(copy)
    }
}
