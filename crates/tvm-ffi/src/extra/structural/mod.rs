//! Structural equality and hashing of value graphs over reflected fields
//! (`ffi.StructuralEqual`, `ffi.StructuralHash`, `ffi.GetFirstStructuralMismatch`,
//! `ffi.StructuralKey`), and structural traversal ([`visit`]) and rewriting ([`mutate`]).
//!
//! Values compare by content: plain values by value (floats bitwise, with NaN equal to NaN),
//! strings and bytes by their bytes, sequences item by item, maps and dicts entry by entry in
//! any order (keys found by identity, or through the variable mapping), shapes by their
//! dimensions, tensors by dtype, shape, device and (unless `skip_tensor_content`) bytes, and
//! objects by type and by their fields according to the type's `structural_eq_hash_kind`:
//!
//! * tree nodes (and const tree nodes, which are equal to themselves at once) field by field,
//!   skipping fields flagged `SEqHashIgnore`;
//! * DAG nodes likewise, and a node on one side must always pair with the same node on the
//!   other;
//! * free variables are equal when paired: a pairing is made where a field flagged as a
//!   definition (`SEqHashDef`) is compared, or anywhere with `map_free_vars`; otherwise only
//!   the same variable is equal to itself;
//! * unique instances only to themselves;
//! * types without metadata (functions, modules, ...) or kind `Unsupported` raise a
//!   `TypeError`.
//!
//! A type's `__s_equal__`/`__s_hash__` attributes replace the field walk. Hashes are consistent
//! with equality and, for values without free variables, stable across processes.

mod equal;
mod hash;
mod key;
pub mod mutate;
mod snapshots;
pub mod visit;
pub mod visit_error;

pub use equal::{first_structural_mismatch, structural_equal};
pub use hash::structural_hash;
pub use key::{StructuralKey, StructuralKeyObj};

use crate::abi;
use crate::any::AnyView;
use crate::error::{Error, ErrorKind, Result};
use crate::function::Function;
use crate::reflection::{self, FieldRef};
use crate::types;

/// Registers the structural types (`ffi.StructuralKey`, the traversal and rewriting engines,
/// `ffi.VisitInterrupt`) with their hooks.
pub(crate) fn register_types() -> Result<()> {
    key::register()?;
    visit::register()?;
    mutate::register()
}

/// How the objects of a type take part in structural equality and hashing
/// (`TVMFFISEqHashKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SEqHashKind {
    /// Not supported: comparing raises a `TypeError`.
    Unsupported,
    /// Compared field by field.
    TreeNode,
    /// A variable, equal when paired with the other side's.
    FreeVar,
    /// Field by field, and paired one to one with the other side's node.
    DagNode,
    /// Field by field, equal to itself at once.
    ConstTreeNode,
    /// Equal only to itself.
    UniqueInstance,
}

/// Checks the stack and the nesting limit for a structural walk now at level `depth`: the
/// stack is read every 8 levels only, as each level takes far less than the stack's reserve.
#[inline(always)]
pub(crate) fn enter_level(depth: usize) -> Result<()> {
    const WHAT: &str = "the structure";
    if depth > crate::stack::MAX_NESTING {
        return Err(crate::stack::too_deep(WHAT));
    }
    if depth.is_multiple_of(8) {
        crate::stack::ensure_room(WHAT)?;
    }
    Ok(())
}

/// Whether the object `value` holds may be met more than once in one walk: it has more than one
/// strong reference. An object with a single one is reached only through its one parent slot,
/// so a walk that remembers every object with more (the parents included) meets each object
/// once per distinct parent, and shared sub-graphs cost time linear in their distinct nodes.
#[inline]
pub fn may_be_shared(value: AnyView<'_>) -> bool {
    value
        .as_object::<crate::object::Object>()
        .is_some_and(|object| object.strong_count() > 1)
}

/// The structural kind of the objects of `type_index`, or the `TypeError` apache-tvm-ffi raises.
pub(crate) fn kind_of(type_index: i32) -> Result<SEqHashKind> {
    let info = types::type_info(type_index);
    // SAFETY: a non-NULL metadata pointer of a registered type lives for the process.
    let metadata = info.and_then(|info| unsafe { info.metadata.as_ref() });
    let Some(metadata) = metadata else {
        return Err(Error::new(
            ErrorKind::TypeError,
            format!(
                "Type metadata is not set for type `{}`, so StructuralHash is not supported for \
                 this type",
                types::type_key_of(type_index)
            ),
        ));
    };
    Ok(match metadata.structural_eq_hash_kind {
        abi::kTVMFFISEqHashKindTreeNode => SEqHashKind::TreeNode,
        abi::kTVMFFISEqHashKindFreeVar => SEqHashKind::FreeVar,
        abi::kTVMFFISEqHashKindDAGNode => SEqHashKind::DagNode,
        abi::kTVMFFISEqHashKindConstTreeNode => SEqHashKind::ConstTreeNode,
        abi::kTVMFFISEqHashKindUniqueInstance => SEqHashKind::UniqueInstance,
        _ => {
            return Err(Error::new(
                ErrorKind::TypeError,
                format!(
                    "_type_s_eq_hash_kind is not set for type `{}`, so StructuralHash is not \
                     supported for this type",
                    types::type_key_of(type_index)
                ),
            ));
        }
    })
}

/// A field as structural comparison sees it.
#[derive(Clone, Copy)]
pub(crate) struct SField {
    pub(crate) field: FieldRef,
    /// Whether the field starts a definition region.
    pub(crate) defines: bool,
}

/// The per-type facts a structural walk needs, looked up once per type and walk.
pub(crate) struct TypeFacts {
    pub(crate) kind: SEqHashKind,
    pub(crate) fields: Vec<SField>,
    pub(crate) type_key_hash: u64,
    pub(crate) s_equal: Option<Function>,
    pub(crate) s_hash: Option<Function>,
}

static S_EQUAL: crate::type_attr::TypeAttr = crate::type_attr::TypeAttr::new("__s_equal__");
static S_HASH: crate::type_attr::TypeAttr = crate::type_attr::TypeAttr::new("__s_hash__");

/// Caches [`TypeFacts`] by type index for one walk.
#[derive(Default)]
pub(crate) struct FactCache {
    facts: std::collections::HashMap<i32, std::rc::Rc<TypeFacts>>,
}

impl FactCache {
    pub(crate) fn get(&mut self, type_index: i32) -> Result<std::rc::Rc<TypeFacts>> {
        if let Some(facts) = self.facts.get(&type_index) {
            return Ok(facts.clone());
        }
        let kind = kind_of(type_index)?;
        let def_mask =
            abi::kTVMFFIFieldFlagBitMaskSEqHashDef | abi::kTVMFFIFieldFlagBitMaskSEqHashDefSimple;
        let fields = reflection::fields_of(type_index)
            .filter(|f| f.flags() & abi::kTVMFFIFieldFlagBitMaskSEqHashIgnore == 0)
            .filter(|f| f.is_readable())
            .map(|field| SField {
                field,
                defines: field.flags() & def_mask != 0,
            })
            .collect();
        let type_key_hash = types::type_info(type_index).map_or(0, |i| i.type_key_hash);
        let facts = std::rc::Rc::new(TypeFacts {
            kind,
            fields,
            type_key_hash,
            s_equal: S_EQUAL.get(type_index).and_then(|f| f.cast().ok()),
            s_hash: S_HASH.get(type_index).and_then(|f| f.cast().ok()),
        });
        self.facts.insert(type_index, facts.clone());
        Ok(facts)
    }
}

/// The common index of the small and heap forms of strings and of bytes.
pub(crate) fn canonical_index(type_index: i32) -> i32 {
    match type_index {
        abi::kTVMFFISmallStr | abi::kTVMFFIRawStr => abi::kTVMFFIStr,
        abi::kTVMFFISmallBytes | abi::kTVMFFIByteArrayPtr => abi::kTVMFFIBytes,
        t => t,
    }
}

/// A fast, process-independent hash of a byte string (8-byte words folded with a multiply-rotate
/// mixer; the length is mixed in, so a zero tail differs from no tail).
pub(crate) fn fast_hash_bytes(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
        h = (h ^ word).wrapping_mul(K).rotate_left(31);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        // The tail as a little-endian word padded with zeros: from the last 8 bytes (one load)
        // shifted down past the bytes already folded, or from a zero-padded copy of a string
        // shorter than a word.
        let word = match bytes.last_chunk::<8>() {
            Some(last) => u64::from_le_bytes(*last) >> (8 * (8 - rest.len())),
            None => {
                let mut word = [0u8; 8];
                word[..rest.len()].copy_from_slice(rest);
                u64::from_le_bytes(word)
            }
        };
        h = (h ^ word).wrapping_mul(K).rotate_left(31);
    }
    h ^ (h >> 29)
}

/// The content of a string or bytes value, borrowed from it.
#[inline]
pub(crate) fn content<'a>(value: &'a AnyView<'_>) -> Option<&'a [u8]> {
    let raw = value.as_raw();
    if matches!(raw.type_index, abi::kTVMFFIStr | abi::kTVMFFIBytes) {
        // SAFETY: a valid value with these indices holds a live bytes object, which the view
        // keeps alive while borrowed.
        return Some(unsafe { (*raw.payload.v_obj.cast::<crate::string::BytesObj>()).as_bytes() });
    }
    crate::string::bytes_of_view(value)
}

/// The bytes of a tensor's elements, for content comparison and hashing: only for contiguous
/// tensors in host memory (`None` otherwise).
pub(crate) fn tensor_bytes(tensor: &crate::Tensor) -> Option<&[u8]> {
    let device = tensor.device().0;
    let host = matches!(device.device_type, 1 | 3 | 13); // CPU, CUDA host, ROCm host
    if !host || !tensor.is_contiguous() {
        return None;
    }
    let dtype = tensor.dtype();
    let bits = usize::from(dtype.bits()) * usize::from(dtype.lanes());
    let len = usize::try_from(tensor.numel()).ok()? * bits.div_ceil(8);
    if len == 0 {
        return Some(&[]);
    }
    // SAFETY: a contiguous host tensor holds `numel` elements of its dtype from `data_ptr`,
    // alive and unchanged while the tensor is borrowed.
    Some(unsafe { std::slice::from_raw_parts(tensor.data_ptr().cast::<u8>(), len) })
}

#[cfg(test)]
mod tests {
    /// `fast_hash_bytes` folding every tail zero-padded, as the one-load tail must reproduce.
    fn padded_tail_hash(bytes: &[u8]) -> u64 {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut h = (bytes.len() as u64).wrapping_mul(K);
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            h = (h ^ u64::from_le_bytes(word))
                .wrapping_mul(K)
                .rotate_left(31);
        }
        h ^ (h >> 29)
    }

    #[test]
    fn the_tail_word_is_the_zero_padded_tail() {
        let text: Vec<u8> = (0u8..41)
            .map(|i| i.wrapping_mul(37).wrapping_add(11))
            .collect();
        for len in 0..=text.len() {
            assert_eq!(
                super::fast_hash_bytes(&text[..len]),
                padded_tail_hash(&text[..len]),
                "length {len}"
            );
        }
    }
}
