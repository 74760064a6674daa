//! Safe lookup of type attribute columns (`__ffi_repr__`, `__s_equal__`, ...): a [`TypeAttr`]
//! names a column and finds the entry of a type in it.

use std::sync::OnceLock;

use crate::abi::{self, TVMFFIAny, TVMFFIByteArray, TVMFFITypeAttrColumn, kTVMFFINone};
use crate::any::{Any, AnyView};

/// A named type attribute column, looked up on first use (and again until it exists).
pub struct TypeAttr {
    name: &'static str,
    column: OnceLock<ColumnPtr>,
}

#[derive(Clone, Copy)]
struct ColumnPtr(*const TVMFFITypeAttrColumn);

// SAFETY: column structs live for the process and are only read through this pointer.
unsafe impl Send for ColumnPtr {}
// SAFETY: as above.
unsafe impl Sync for ColumnPtr {}

impl TypeAttr {
    /// The column called `name`.
    pub const fn new(name: &'static str) -> TypeAttr {
        TypeAttr {
            name,
            column: OnceLock::new(),
        }
    }

    fn column(&self) -> Option<&'static TVMFFITypeAttrColumn> {
        let ptr = match self.column.get() {
            Some(ptr) => ptr.0,
            None => {
                let key = TVMFFIByteArray::from_text(self.name);
                // SAFETY: `key` views the name for the call; the result is NULL or a column
                // that lives for the process.
                let ptr = unsafe { abi::TVMFFIGetTypeAttrColumn(&key) };
                if ptr.is_null() {
                    return None;
                }
                self.column.get_or_init(|| ColumnPtr(ptr)).0
            }
        };
        // SAFETY: a non-NULL column pointer stays valid for the process.
        unsafe { ptr.as_ref() }
    }

    /// The entry of `type_index` in the column (an owning copy), if it has a non-None one.
    pub fn get(&self, type_index: i32) -> Option<Any> {
        let entry = self.get_raw(type_index)?;
        // SAFETY: the entry is a valid value owned by the column; we take our own reference.
        Some(unsafe { AnyView::from_raw(entry) }.to_owned())
    }

    /// The entry of `type_index` as the column holds it (borrowed from the column, which keeps
    /// it for the process), if it has a non-None one.
    pub fn get_raw(&self, type_index: i32) -> Option<TVMFFIAny> {
        column_entry(self.column()?, type_index)
    }
}

/// The non-None entry of `type_index` in `column`, as the column holds it.
fn column_entry(column: &TVMFFITypeAttrColumn, type_index: i32) -> Option<TVMFFIAny> {
    let offset = i64::from(type_index) - i64::from(column.begin_index);
    if column.data.is_null() || offset < 0 || offset >= i64::from(column.size) {
        return None;
    }
    // SAFETY: `offset` is within the column's `size` initialized entries, which the column
    // keeps alive (entries are never replaced once set).
    let entry = unsafe { *column.data.add(offset as usize) };
    (entry.type_index != kTVMFFINone).then_some(entry)
}

/// The value of type attribute `name` for `type_index` (an owning copy), if the column exists
/// and has a non-None entry; for names known only at run time (a [`TypeAttr`] caches its
/// column).
pub fn type_attr_value(type_index: i32, name: &str) -> Option<Any> {
    let key = TVMFFIByteArray::from_text(name);
    // SAFETY: `key` views `name` for the call; the result is NULL or a process-lifetime column.
    let column = unsafe { abi::TVMFFIGetTypeAttrColumn(&key).as_ref() }?;
    let entry = column_entry(column, type_index)?;
    // SAFETY: the entry is a valid value owned by the column; we take our own reference.
    Some(unsafe { AnyView::from_raw(entry) }.to_owned())
}
