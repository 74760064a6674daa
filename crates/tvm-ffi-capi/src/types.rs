//! The type table: type keys and indices, ancestors, reflection records (fields, methods,
//! metadata) and type attribute columns.
//!
//! Entries are never freed, so the `TVMFFITypeInfo` pointers handed out stay valid for the
//! process. Unlike apache-tvm-ffi, no failure here terminates the process: unknown
//! indices and conflicting registrations return an error.

use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::{OnceLock, RwLock};

use tvm_ffi::any::{Any, AnyView};
use tvm_ffi::boundary::{ffi_boundary, ffi_boundary_result, ffi_status};
use tvm_ffi::error::{Error, ErrorKind, Result};
use tvm_ffi_sys::{
    self, TVMFFIAny, TVMFFIByteArray, TVMFFIFieldInfo, TVMFFIMethodInfo, TVMFFITypeAttrColumn,
    TVMFFITypeInfo, TVMFFITypeMetadata, kTVMFFIDynObjectBegin,
};

use crate::args::{bytes_arg, non_null, out_arg, text_arg};

/// One registered type. `info` is first, so a pointer to the entry is a pointer to the info.
#[repr(C)]
struct TypeEntry {
    info: TVMFFITypeInfo,
    ancestors: Vec<*const TVMFFITypeInfo>,
    num_slots: i32,
    allocated_slots: i32,
    can_overflow: bool,
    fields: Vec<TVMFFIFieldInfo>,
    methods: Vec<TVMFFIMethodInfo>,
    metadata: Option<Box<TVMFFITypeMetadata>>,
    /// Copies of every string and value the records point at, kept for the process lifetime.
    retained_text: Vec<Box<[u8]>>,
    retained_values: Vec<Any>,
}

impl TypeEntry {
    fn retain_text(&mut self, bytes: &[u8]) -> TVMFFIByteArray {
        let mut buf = Vec::with_capacity(bytes.len() + 1);
        buf.extend_from_slice(bytes);
        buf.push(0);
        let buf = buf.into_boxed_slice();
        let array = TVMFFIByteArray::from_bytes(&buf[..bytes.len()]);
        self.retained_text.push(buf);
        array
    }

    fn key(&self) -> &str {
        // SAFETY: the key was copied from UTF-8 text at registration and is retained.
        unsafe { self.info.type_key.to_str() }.unwrap_or("<non-UTF-8 type key>")
    }
}

/// A column of per-type attribute values, with the stable C view first.
#[repr(C)]
struct Column {
    view: TVMFFITypeAttrColumn,
    values: Vec<Any>,
}

#[derive(Default)]
struct Tables {
    by_index: Vec<*mut TypeEntry>,
    by_key: HashMap<String, i32>,
    next_dynamic: i32,
    columns: HashMap<String, *mut Column>,
}

/// The process-wide type table.
pub(crate) struct TypeTable {
    tables: RwLock<Tables>,
}

// SAFETY: the raw pointers refer to leaked entries that live for the process; all access to the
// maps goes through the lock.
unsafe impl Send for TypeTable {}
// SAFETY: as above.
unsafe impl Sync for TypeTable {}

/// Keys of the on-stack value types, indices 0..=13.
const POD_KEYS: [&str; 14] = [
    "None",
    "int",
    "bool",
    "float",
    "void*",
    "DataType",
    "Device",
    "DLTensor*",
    "const char*",
    "TVMFFIByteArray*",
    "ObjectRValueRef",
    "ffi.SmallStr",
    "ffi.SmallBytes",
    "ffi.Unchanged",
];

/// Keys of the static object types, indices 65..=78 (children of `ffi.Object`, 64).
const STATIC_OBJECT_KEYS: [&str; 14] = [
    "ffi.String",
    "ffi.Bytes",
    "ffi.Error",
    "ffi.Function",
    "ffi.Shape",
    "ffi.Tensor",
    "ffi.Array",
    "ffi.Map",
    "ffi.Module",
    "ffi.OpaquePyObject",
    "ffi.List",
    "ffi.Dict",
    "ffi.VisitInterrupt",
    "ffi.BigInt",
];

/// Attribute columns created at start-up, so that code caching column pointers finds them (the
/// original's headers assume every one of these exists once the library is loaded).
const PRESET_COLUMNS: [&str; 18] = [
    "__any_hash__",
    "__any_equal__",
    "__ffi_repr__",
    "__ffi_init__",
    "__ffi_new__",
    "__ffi_convert__",
    "__ffi_shallow_copy__",
    "__ffi_hash__",
    "__ffi_eq__",
    "__ffi_compare__",
    "__s_hash__",
    "__s_equal__",
    "__data_to_json__",
    "__data_from_json__",
    "__ffi_enum__",
    "__s_visit__",
    "__s_mutate__",
    "__s_maybe_inplace_mutate__",
];

/// Object sizes the table starts with (`TVMFFITypeMetadata::total_size`, no creator): the
/// bare header of `ffi.Object`, and `ffi.BigInt`'s header plus its word count (its words
/// follow inline, so that is the size of the fixed part).
const PRESET_SIZES: [(i32, i32); 2] = [
    (tvm_ffi_sys::kTVMFFIObject, 24),
    (tvm_ffi_sys::kTVMFFIBigInt, 32),
];

/// `std::hash<std::string_view>` of libstdc++ on 64-bit targets (MurmurHash64A variant with
/// seed 0xc70f6907), which apache-tvm-ffi stores as `type_key_hash`.
pub(crate) fn libstdcxx_hash_bytes(bytes: &[u8]) -> u64 {
    const MUL: u64 = (0xc6a4_a793_u64 << 32) + 0x5bd1_e995;
    const SEED: u64 = 0xc70f_6907;
    let shift_mix = |v: u64| v ^ (v >> 47);
    let mut hash = SEED ^ (bytes.len() as u64).wrapping_mul(MUL);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
        hash ^= shift_mix(word.wrapping_mul(MUL)).wrapping_mul(MUL);
        hash = hash.wrapping_mul(MUL);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let word = tail
            .iter()
            .rev()
            .fold(0u64, |acc, b| (acc << 8) + u64::from(*b));
        hash ^= word;
        hash = hash.wrapping_mul(MUL);
    }
    hash = shift_mix(hash).wrapping_mul(MUL);
    shift_mix(hash)
}

impl TypeTable {
    /// The table, created with the built-in types on first use.
    pub(crate) fn global() -> &'static TypeTable {
        static TABLE: OnceLock<TypeTable> = OnceLock::new();
        TABLE.get_or_init(|| {
            let table = TypeTable {
                tables: RwLock::new(Tables::default()),
            };
            {
                let mut t = table.write();
                t.next_dynamic = kTVMFFIDynObjectBegin;
                for (index, key) in POD_KEYS.iter().enumerate() {
                    t.insert(key, index as i32, None, 0, false);
                }
                t.insert("ffi.Object", tvm_ffi_sys::kTVMFFIObject, None, 0, true);
                for (offset, key) in STATIC_OBJECT_KEYS.iter().enumerate() {
                    let index = tvm_ffi_sys::kTVMFFIStr + offset as i32;
                    t.insert(key, index, Some(tvm_ffi_sys::kTVMFFIObject), 0, false);
                }
                for name in PRESET_COLUMNS {
                    t.column(name);
                }
                for (index, total_size) in PRESET_SIZES {
                    let entry = t.entry(index).expect("a preset type");
                    let record = Box::new(TVMFFITypeMetadata {
                        doc: TVMFFIByteArray::EMPTY,
                        creator: None,
                        total_size,
                        structural_eq_hash_kind: tvm_ffi_sys::kTVMFFISEqHashKindUnsupported,
                    });
                    entry.info.metadata = &*record;
                    entry.metadata = Some(record);
                }
            }
            table
        })
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Tables> {
        self.tables.write().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Tables> {
        self.tables.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The info of a registered index.
    pub(crate) fn info(&self, index: i32) -> Option<*const TVMFFITypeInfo> {
        let t = self.read();
        let entry = *t.by_index.get(usize::try_from(index).ok()?)?;
        (!entry.is_null()).then_some(entry as *const TVMFFITypeInfo)
    }

    /// The index of a registered key.
    pub(crate) fn index_of(&self, key: &str) -> Option<i32> {
        self.read().by_key.get(key).copied()
    }

    /// All registered keys, in index order.
    pub(crate) fn keys(&self) -> Vec<String> {
        let t = self.read();
        t.by_index
            .iter()
            .filter(|e| !e.is_null())
            // SAFETY: non-NULL entries are leaked and live for the process.
            .map(|e| unsafe { (**e).key() }.to_owned())
            .collect()
    }
}

impl Tables {
    /// The raw pointer of a registered entry.
    fn entry_ptr(&self, index: i32) -> Option<*mut TypeEntry> {
        let entry = *self.by_index.get(usize::try_from(index).ok()?)?;
        (!entry.is_null()).then_some(entry)
    }

    /// A registered entry, borrowed for one operation under the write lock.
    fn entry(&self, index: i32) -> Option<&'static mut TypeEntry> {
        // SAFETY: non-NULL entries are leaked; mutation happens under the write lock.
        self.entry_ptr(index).map(|entry| unsafe { &mut *entry })
    }

    /// Adds an entry at `index` (which must be free) under `parent`.
    ///
    /// Pointers into entries (the table, ancestor lists, infos handed to C) all derive from the
    /// raw pointer of the leaked box, never from a `&mut`, so later borrows do not invalidate
    /// them.
    fn insert(
        &mut self,
        key: &str,
        index: i32,
        parent: Option<i32>,
        num_slots: i32,
        can_overflow: bool,
    ) {
        let mut ancestors = Vec::new();
        if let Some(parent) = parent.and_then(|p| self.entry_ptr(p)) {
            // SAFETY: entries are leaked and only touched under the write lock held here.
            unsafe {
                ancestors.extend_from_slice(&(*parent).ancestors);
                ancestors.push(std::ptr::addr_of!((*parent).info));
            }
        }
        let ptr = Box::into_raw(Box::new(TypeEntry {
            info: TVMFFITypeInfo {
                type_index: index,
                type_depth: ancestors.len() as i32,
                type_key: TVMFFIByteArray::EMPTY,
                type_ancestors: std::ptr::null(),
                type_key_hash: libstdcxx_hash_bytes(key.as_bytes()),
                num_fields: 0,
                num_methods: 0,
                fields: std::ptr::null(),
                methods: std::ptr::null(),
                metadata: std::ptr::null(),
            },
            ancestors,
            num_slots,
            allocated_slots: 1,
            can_overflow,
            fields: Vec::new(),
            methods: Vec::new(),
            metadata: None,
            retained_text: Vec::new(),
            retained_values: Vec::new(),
        }));
        // SAFETY: the entry is new and not shared yet; it is never freed.
        let entry = unsafe { &mut *ptr };
        entry.info.type_key = entry.retain_text(key.as_bytes());
        entry.info.type_ancestors = entry.ancestors.as_ptr();
        let slot = index as usize;
        if self.by_index.len() <= slot {
            self.by_index.resize(slot + 1, std::ptr::null_mut());
        }
        self.by_index[slot] = ptr;
        self.by_key.insert(key.to_owned(), index);
    }

    fn column(&mut self, name: &str) -> *mut Column {
        *self.columns.entry(name.to_owned()).or_insert_with(|| {
            Box::leak(Box::new(Column {
                view: TVMFFITypeAttrColumn {
                    data: std::ptr::null(),
                    size: 0,
                    begin_index: 0,
                },
                values: Vec::new(),
            }))
        })
    }

    fn get_or_alloc(
        &mut self,
        key: &str,
        static_index: i32,
        depth: i32,
        num_child_slots: i32,
        can_overflow: bool,
        parent_index: i32,
    ) -> Result<i32> {
        if let Some(index) = self.by_key.get(key) {
            return Ok(*index);
        }
        if parent_index == -2 {
            return Ok(-2);
        }
        if num_child_slots < 0 {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "type `{key}`: negative child slot count"
            );
        }
        let parent = self.entry(parent_index).ok_or_else(|| {
            Error::new(
                ErrorKind::KeyError,
                format!("type `{key}`: unknown parent type index {parent_index}"),
            )
        })?;
        if depth != parent.info.type_depth + 1 {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "type `{key}`: depth {depth} does not follow parent `{}` at depth {}",
                parent.key(),
                parent.info.type_depth
            );
        }
        let index = if static_index >= 0 {
            if static_index >= kTVMFFIDynObjectBegin {
                tvm_ffi::bail!(
                    ErrorKind::ValueError,
                    "type `{key}`: static index {static_index} is outside the static range \
                     0..{kTVMFFIDynObjectBegin}"
                );
            }
            if self.entry(static_index).is_some() {
                tvm_ffi::bail!(
                    ErrorKind::ValueError,
                    "type `{key}`: conflicting static index {static_index}"
                );
            }
            static_index
        } else {
            // In i64: a slot count near i32::MAX must not wrap around into a used index.
            let need = i64::from(num_child_slots) + 1;
            if i64::from(parent.allocated_slots) + need <= i64::from(parent.num_slots) {
                let index = parent.info.type_index + parent.allocated_slots;
                parent.allocated_slots += need as i32;
                index
            } else if parent.can_overflow {
                let index = self.next_dynamic;
                let end = i64::from(index) + need;
                if end > i64::from(MAX_TYPE_INDEX) {
                    tvm_ffi::bail!(
                        ErrorKind::ValueError,
                        "type `{key}`: num_child_slots {num_child_slots} does not fit in the type \
                         index space ({} indices left of {MAX_TYPE_INDEX})",
                        i64::from(MAX_TYPE_INDEX) - i64::from(index) - 1
                    );
                }
                self.next_dynamic = end as i32;
                index
            } else {
                tvm_ffi::bail!(
                    ErrorKind::RuntimeError,
                    "type `{key}`: parent `{}` reached its maximum number of subclasses",
                    parent.key()
                );
            }
        };
        let can_overflow = can_overflow && parent.can_overflow;
        self.insert(
            key,
            index,
            Some(parent_index),
            num_child_slots + 1,
            can_overflow,
        );
        Ok(index)
    }
}

/// One past the largest type index: the table is indexed densely, so the index space is kept to
/// what a process can hold (about a million types).
const MAX_TYPE_INDEX: i32 = 1 << 20;

fn unknown_index(index: i32) -> Error {
    Error::new(ErrorKind::KeyError, format!("unknown type index {index}"))
}

/// Looks up the index of a type key; an unknown key is a `KeyError` naming it.
///
/// # Safety
/// `type_key` is a valid byte array; `out` is valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFITypeKeyToIndex(
    type_key: *const TVMFFIByteArray,
    out: *mut i32,
) -> c_int {
    ffi_status("TVMFFITypeKeyToIndex", || {
        // SAFETY: per the contract.
        let (key, out) = unsafe { (bytes_arg(type_key, "type_key")?, out_arg(out, "out")?) };
        // The core's own types (such as the testing types) register with its functions.
        crate::global_registry();
        let missing = || {
            let key = String::from_utf8_lossy(key);
            Error::new(ErrorKind::KeyError, format!("Cannot find type `{key}`"))
        };
        // A key that is not UTF-8 names no type.
        let key = std::str::from_utf8(key).map_err(|_| missing())?;
        *out = TypeTable::global().index_of(key).ok_or_else(missing)?;
        Ok(())
    })
}

/// Returns the index of `type_key`, registering it first if needed (see the header for the
/// argument rules). Returns -1 with an error raised on failure.
///
/// # Safety
/// `type_key` is a valid byte array.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFITypeGetOrAllocIndex(
    type_key: *const TVMFFIByteArray,
    static_type_index: i32,
    type_depth: i32,
    num_child_slots: i32,
    child_slots_can_overflow: i32,
    parent_type_index: i32,
) -> i32 {
    ffi_boundary_result("TVMFFITypeGetOrAllocIndex", || {
        // SAFETY: per the contract.
        let key = unsafe { text_arg(type_key, "type_key")? };
        TypeTable::global().write().get_or_alloc(
            key,
            static_type_index,
            type_depth,
            num_child_slots,
            child_slots_can_overflow != 0,
            parent_type_index,
        )
    })
}

/// The info of a type index; NULL with a `KeyError` raised for an unknown index.
#[unsafe(no_mangle)]
pub extern "C" fn TVMFFIGetTypeInfo(type_index: i32) -> *const TVMFFITypeInfo {
    ffi_boundary_result("TVMFFIGetTypeInfo", || {
        TypeTable::global()
            .info(type_index)
            .ok_or_else(|| unknown_index(type_index))
    })
}

/// Runs `body` on the entry of `type_index` under the write lock, as the export `name`.
fn with_entry(
    name: &'static str,
    type_index: i32,
    body: impl FnOnce(&mut TypeEntry) -> Result<()>,
) -> c_int {
    ffi_status(name, || {
        let t = TypeTable::global().write();
        let entry = t
            .entry(type_index)
            .ok_or_else(|| unknown_index(type_index))?;
        body(entry)
    })
}

/// Registers a reflected field of a type (strings and the default value are copied).
///
/// # Safety
/// `info` is a valid field record.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFITypeRegisterField(
    type_index: i32,
    info: *const TVMFFIFieldInfo,
) -> c_int {
    with_entry("TVMFFITypeRegisterField", type_index, |entry| {
        // SAFETY: per the contract.
        let info = unsafe { non_null(info, "field info")? };
        // SAFETY: the record's arrays are valid for the call.
        let name = unsafe { text_arg(&info.name, "field name")? };
        let duplicate = entry.fields.iter().any(|f| {
            // SAFETY: retained field names.
            (unsafe { f.name.as_bytes() }) == name.as_bytes()
        });
        if duplicate {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "type `{}` already has a field named `{name}`",
                entry.key()
            );
        }
        // SAFETY: as above.
        let (doc, metadata) = unsafe {
            (
                crate::args::bytes_arg(&info.doc, "doc")?,
                crate::args::bytes_arg(&info.metadata, "metadata")?,
            )
        };
        // SAFETY: the default value is a valid value for the call.
        let default = unsafe { AnyView::from_raw(info.default_value_or_factory) }.try_to_owned()?;
        let mut record = TVMFFIFieldInfo {
            name: entry.retain_text(name.as_bytes()),
            doc: entry.retain_text(doc),
            metadata: entry.retain_text(metadata),
            default_value_or_factory: *default.as_raw(),
            ..*info
        };
        if info.flags & tvm_ffi_sys::kTVMFFIFieldFlagBitMaskSetterIsFunctionObj != 0
            && !info.setter.is_null()
        {
            // SAFETY: a function-object setter is a live object lent for the call.
            let setter = unsafe { AnyView::from_raw(function_view(info.setter)) }.to_owned();
            record.setter = info.setter;
            entry.retained_values.push(setter);
        }
        entry.retained_values.push(default);
        entry.fields.push(record);
        entry.info.fields = entry.fields.as_ptr();
        entry.info.num_fields = entry.fields.len() as i32;
        Ok(())
    })
}

fn function_view(handle: *mut std::ffi::c_void) -> TVMFFIAny {
    TVMFFIAny {
        type_index: tvm_ffi_sys::kTVMFFIFunction,
        small_str_len: 0,
        payload: tvm_ffi_sys::TVMFFIAnyPayload { v_ptr: handle },
    }
}

/// Registers a reflected method of a type (strings copied, the method retained).
///
/// # Safety
/// `info` is a valid method record.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFITypeRegisterMethod(
    type_index: i32,
    info: *const TVMFFIMethodInfo,
) -> c_int {
    with_entry("TVMFFITypeRegisterMethod", type_index, |entry| {
        // SAFETY: per the contract.
        let info = unsafe { non_null(info, "method info")? };
        // SAFETY: the record's arrays and value are valid for the call.
        let (name, doc, metadata, method) = unsafe {
            (
                text_arg(&info.name, "method name")?,
                crate::args::bytes_arg(&info.doc, "doc")?,
                crate::args::bytes_arg(&info.metadata, "metadata")?,
                AnyView::from_raw(info.method).try_to_owned()?,
            )
        };
        let record = TVMFFIMethodInfo {
            name: entry.retain_text(name.as_bytes()),
            doc: entry.retain_text(doc),
            metadata: entry.retain_text(metadata),
            flags: info.flags,
            method: *method.as_raw(),
        };
        entry.retained_values.push(method);
        entry.methods.push(record);
        entry.info.methods = entry.methods.as_ptr();
        entry.info.num_methods = entry.methods.len() as i32;
        Ok(())
    })
}

/// Registers the metadata of a type, once.
///
/// # Safety
/// `metadata` is a valid record.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFITypeRegisterMetadata(
    type_index: i32,
    metadata: *const TVMFFITypeMetadata,
) -> c_int {
    with_entry("TVMFFITypeRegisterMetadata", type_index, |entry| {
        // SAFETY: per the contract.
        let metadata = unsafe { non_null(metadata, "metadata")? };
        if entry.metadata.is_some() {
            tvm_ffi::bail!(
                ErrorKind::RuntimeError,
                "Overriding the metadata of type `{}` is not allowed",
                entry.key()
            );
        }
        // SAFETY: the doc array is valid for the call.
        let doc = unsafe { crate::args::bytes_arg(&metadata.doc, "doc")? };
        let record = Box::new(TVMFFITypeMetadata {
            doc: entry.retain_text(doc),
            creator: metadata.creator,
            total_size: metadata.total_size,
            structural_eq_hash_kind: metadata.structural_eq_hash_kind,
        });
        entry.info.metadata = &*record;
        entry.metadata = Some(record);
        Ok(())
    })
}

/// Sets attribute `name` of a type (`type_index` 0 only makes sure the column exists).
///
/// # Safety
/// `name` and `value` are valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFITypeRegisterAttr(
    type_index: i32,
    name: *const TVMFFIByteArray,
    value: *const TVMFFIAny,
) -> c_int {
    ffi_status("TVMFFITypeRegisterAttr", || {
        // SAFETY: per the contract.
        let (name, value) =
            unsafe { (text_arg(name, "attr_name")?, non_null(value, "attr_value")?) };
        // SAFETY: the value is valid for the call.
        let value = unsafe { AnyView::from_raw(*value) }.try_to_owned()?;
        let mut t = TypeTable::global().write();
        let column = t.column(name);
        if type_index == tvm_ffi_sys::kTVMFFINone {
            return Ok(());
        }
        if t.entry(type_index).is_none() {
            return Err(unknown_index(type_index));
        }
        // SAFETY: columns are leaked and only mutated under the write lock.
        let column = unsafe { &mut *column };
        let slot = type_index as usize;
        if column.values.len() <= slot {
            column.values.resize_with(slot + 1, Any::none);
        }
        if !column.values[slot].is_none() && !value.is_none() {
            tvm_ffi::bail!(
                ErrorKind::RuntimeError,
                "type attribute `{name}` of type index {type_index} is already registered"
            );
        }
        column.values[slot] = value;
        column.view.data = column.values.as_ptr().cast();
        column.view.size = column.values.len() as i32;
        Ok(())
    })
}

/// The column of attribute `name`, or NULL if it was never created.
///
/// # Safety
/// `name` is a valid byte array.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TVMFFIGetTypeAttrColumn(
    name: *const TVMFFIByteArray,
) -> *const TVMFFITypeAttrColumn {
    ffi_boundary("TVMFFIGetTypeAttrColumn", || {
        // SAFETY: per the contract.
        let Ok(name) = (unsafe { text_arg(name, "attr_name") }) else {
            return std::ptr::null();
        };
        let t = TypeTable::global().read();
        t.columns
            .get(name)
            .map_or(std::ptr::null(), |c| *c as *const TVMFFITypeAttrColumn)
    })
}

#[cfg(test)]
mod tests {
    use super::libstdcxx_hash_bytes;

    #[test]
    fn type_key_hash_matches_libstdcxx() {
        assert_eq!(libstdcxx_hash_bytes(b"probe.Child"), 3831563746337544434);
    }
}
