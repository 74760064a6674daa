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
        crate::stack::enter_level(self.depth + 1, "the value to copy")?;
        self.depth += 1;
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
                // The copy exists (holding the original items) before its items are copied, so
                // that items referring back to the array refer to the copy; then each item is
                // replaced by its copy.
                let items = value.cast::<Array>()?.as_slice().to_vec();
                let array = Array::from_vec(items.clone());
                self.memo.insert(addr, array.clone().into());
                for (i, item) in items.iter().enumerate() {
                    let copy = self.copy(item.as_view())?;
                    // SAFETY: the array was made above and is reachable only through the memo
                    // and the copies being built, none of which reads its items before the copy
                    // is done; no borrow of its items is alive.
                    drop(unsafe { array.as_object().replace_unique(i, copy) });
                }
                array.into()
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
                // As for arrays: the (empty) copy exists before the entries are copied.
                let map = Map::new();
                self.memo.insert(addr, map.clone().into());
                let mut entries = Vec::new();
                for (k, v) in value.cast::<Map>()?.iter() {
                    entries.push((self.copy(k.as_view())?, self.copy(v.as_view())?));
                }
                for (k, v) in entries {
                    // SAFETY: the map was made above and is reachable only through the memo and
                    // the copies being built, none of which reads it before the copy is done.
                    unsafe { map.insert_unshared(k, v) };
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
        if crate::extra::enums::is_enum_type(t) {
            return Ok(value.to_owned());
        }
        let fields: Vec<FieldRef> = reflection::fields_of(t)
            .filter(|f| f.is_readable())
            .collect();
        let copy = if let Some(shallow) = SHALLOW_COPY.get(t) {
            shallow.cast::<Function>()?.call_packed(&[value])?
        } else {
            let blank = crate::extra::serialization::graph::create_blank(t).map_err(|_| {
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
