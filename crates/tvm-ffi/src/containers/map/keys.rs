//! Lookup keys: [`MapKey`] turns anything convertible into `Any`, an `AnyView` or a `str` into
//! a [`KeyArg`] whose raw value the table hashes and compares.

use crate::abi::TVMFFIAny;
use crate::any::{Any, AnyView};

/// A lookup key: borrowed or converted.
pub enum KeyArg<'a> {
    /// A borrowed value.
    View(AnyView<'a>),
    /// A value converted for the lookup.
    Owned(Any),
}

impl KeyArg<'_> {
    /// The key's raw value.
    pub(super) fn raw(&self) -> &TVMFFIAny {
        match self {
            KeyArg::View(v) => v.as_raw(),
            KeyArg::Owned(v) => v.as_raw(),
        }
    }
}

/// Values usable as lookup keys: anything convertible into `Any` (including `Any` itself),
/// `AnyView` and `str`.
pub trait MapKey {
    /// The key as a value.
    fn to_key(&self) -> KeyArg<'_>;
}

impl<T: Clone + Into<Any>> MapKey for T {
    fn to_key(&self) -> KeyArg<'_> {
        KeyArg::Owned(self.clone().into())
    }
}

impl MapKey for AnyView<'_> {
    fn to_key(&self) -> KeyArg<'_> {
        KeyArg::View(*self)
    }
}

impl MapKey for str {
    fn to_key(&self) -> KeyArg<'_> {
        KeyArg::Owned(Any::from(self))
    }
}
