//! `ffi.StructuralKey`: a value with its structural hash computed once, usable as a map key
//! (its `__any_hash__`/`__any_equal__` hooks compare structurally).

use crate::any::{Any, AnyView};
use crate::containers::hash::{AnyHashHooks, register_hooks};
use crate::error::Result;
use crate::object::{Object, ObjectCore, ObjectRef};
use crate::{define_object, reflection};

define_object! {
    /// A value and its structural hash.
    pub struct StructuralKeyObj : "ffi.StructuralKey" extends Object {
        /// The value.
        pub key: Any,
        /// Its structural hash (default policy: free variables unmapped, tensor content
        /// compared), as a signed 64-bit integer.
        pub hash_i64: i64,
    }
}

/// A structural key (shared, immutable).
#[derive(Clone)]
pub struct StructuralKey(ObjectRef<StructuralKeyObj>);

impl StructuralKey {
    /// The key of `value` (its structural hash is computed now).
    pub fn new(value: Any) -> Result<StructuralKey> {
        let hash = super::structural_hash(value.as_view(), false, false)? as i64;
        Ok(StructuralKey(ObjectRef::new(StructuralKeyObj {
            base: Object::header(),
            key: value,
            hash_i64: hash,
        })))
    }

    /// The value.
    pub fn key(&self) -> &Any {
        &self.0.key
    }

    /// The structural hash.
    pub fn hash(&self) -> i64 {
        self.0.hash_i64
    }

    /// Whether both keys hold structurally equal values.
    pub fn key_equal(&self, other: &StructuralKey) -> Result<bool> {
        if self.0.ptr_eq(&other.0) {
            return Ok(true);
        }
        if self.hash() != other.hash() {
            return Ok(false);
        }
        super::structural_equal(self.key().as_view(), other.key().as_view(), false, false)
    }
}

impl From<StructuralKey> for Any {
    fn from(key: StructuralKey) -> Any {
        Any::from(key.0)
    }
}

impl crate::any::TryFromAnyView for StructuralKey {
    const TYPE_NAME: &'static str = "ffi.StructuralKey";
    fn try_from_view(view: &AnyView<'_>) -> Option<Self> {
        ObjectRef::<StructuralKeyObj>::try_from_view(view).map(StructuralKey)
    }
}

struct KeyHooks;

impl AnyHashHooks for KeyHooks {
    fn hash(value: AnyView<'_>) -> i64 {
        value
            .as_object::<StructuralKeyObj>()
            .map_or(0, |k| k.hash_i64)
    }

    fn equal(a: AnyView<'_>, b: AnyView<'_>) -> bool {
        match (a.cast::<StructuralKey>(), b.cast::<StructuralKey>()) {
            (Ok(a), Ok(b)) => a.key_equal(&b).unwrap_or(false),
            _ => false,
        }
    }
}

/// Registers the map hooks and the `__ffi_init__` method of the type.
pub(crate) fn register() -> Result<()> {
    let index = StructuralKeyObj::type_index();
    register_hooks::<KeyHooks>(index)?;
    let init = reflection::register_typed_method(index, "__ffi_init__", StructuralKey::new, true)?;
    reflection::register_type_attr(index, "__ffi_init__", &Any::from(init))
}
