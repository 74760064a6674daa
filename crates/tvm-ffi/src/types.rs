//! Client side of the type table: type keys, subtyping checks and index allocation, all through
//! the C functions `TVMFFITypeKeyToIndex`, `TVMFFIGetTypeInfo` and `TVMFFITypeGetOrAllocIndex`.

use crate::abi::{self, TVMFFIByteArray, TVMFFITypeInfo};
use crate::error::{Error, ErrorKind};

/// The type information the runtime holds for `type_index`, if the index is registered.
pub fn type_info(type_index: i32) -> Option<&'static TVMFFITypeInfo> {
    // SAFETY: the function accepts any index; entries live for the whole process.
    let info = unsafe { abi::TVMFFIGetTypeInfo(type_index) };
    if info.is_null() {
        // An unknown index leaves an error in the thread's slot; it is not ours to report.
        drop(Error::take_raised());
        None
    } else {
        // SAFETY: non-NULL results point at entries that are never freed.
        Some(unsafe { &*info })
    }
}

/// The type key of a registered index, or `"<unregistered type N>"`.
pub fn type_key_of(type_index: i32) -> String {
    match type_info(type_index) {
        // SAFETY: the key bytes live as long as the entry.
        Some(info) => unsafe { bytes_of(&info.type_key) }.to_owned(),
        None => format!("<unregistered type {type_index}>"),
    }
}

/// Reads the UTF-8 text of a byte array owned by the runtime.
///
/// # Safety
/// `array` points at `size` readable bytes that outlive the returned reference.
pub(crate) unsafe fn bytes_of(array: &abi::TVMFFIByteArray) -> &str {
    // SAFETY: guaranteed by the caller.
    unsafe { array.to_str() }.unwrap_or("<non-UTF-8 type key>")
}

/// The index registered for `type_key`; a `KeyError` naming the key if there is none.
pub fn type_key_to_index(type_key: &str) -> Result<i32, Error> {
    let key = TVMFFIByteArray::from_text(type_key);
    let mut index = 0;
    // SAFETY: both pointers are valid for the call.
    let rc = unsafe { abi::TVMFFITypeKeyToIndex(&key, &mut index) };
    if rc == 0 {
        Ok(index)
    } else {
        Err(Error::take_raised_or(ErrorKind::KeyError, type_key))
    }
}

/// Registers `type_key` as a dynamic subtype of `parent_index` (or returns its existing index).
pub fn register_type(
    type_key: &str,
    parent_index: i32,
    num_child_slots: i32,
    child_slots_can_overflow: bool,
) -> Result<i32, Error> {
    let parent = type_info(parent_index).ok_or_else(|| {
        Error::new(
            ErrorKind::KeyError,
            format!("unknown parent type index {parent_index}"),
        )
    })?;
    let key = TVMFFIByteArray::from_text(type_key);
    // SAFETY: the key outlives the call; other arguments are plain integers.
    let index = unsafe {
        abi::TVMFFITypeGetOrAllocIndex(
            &key,
            -1,
            parent.type_depth + 1,
            num_child_slots,
            i32::from(child_slots_can_overflow),
            parent_index,
        )
    };
    if index < 0 {
        Err(Error::take_raised_or(ErrorKind::RuntimeError, type_key))
    } else {
        Ok(index)
    }
}

/// Whether objects of runtime type `sub` may be viewed as type `target`.
#[inline]
pub fn is_instance_of(sub: i32, target: i32) -> bool {
    // The exact type inline; a subtype (registered after its ancestors: a larger index) by its
    // ancestor table, out of line.
    sub == target || (sub > target && is_strict_subtype(sub, target))
}

/// Whether `sub` (> `target`) has `target` among its ancestors.
#[inline(never)]
fn is_strict_subtype(sub: i32, target: i32) -> bool {
    let (Some(sub_info), Some(target_info)) = (type_info(sub), type_info(target)) else {
        return false;
    };
    let depth = target_info.type_depth;
    if sub_info.type_depth <= depth {
        return false;
    }
    // SAFETY: `type_ancestors` holds `type_depth` valid entries.
    let ancestor = unsafe { *sub_info.type_ancestors.add(depth as usize) };
    // SAFETY: ancestors are registered entries, never freed.
    !ancestor.is_null() && unsafe { (*ancestor).type_index } == target
}

/// The size in bytes of objects of `type_index` (header included): the size its metadata
/// records, the header's for `ffi.Object`, `None` for an unknown index or a type without a
/// recorded size.
pub fn total_size(type_index: i32) -> Option<usize> {
    if type_index == abi::kTVMFFIObject {
        return Some(size_of::<abi::TVMFFIObject>());
    }
    // SAFETY: metadata, when present, lives in the type table for the process.
    let metadata = unsafe { type_info(type_index)?.metadata.as_ref() }?;
    usize::try_from(metadata.total_size)
        .ok()
        .filter(|&size| size > 0)
}
