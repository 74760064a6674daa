//! Map and Dict global functions (being written).

use crate::function::Function;

/// The map functions.
pub(super) fn functions() -> Vec<(&'static str, Function)> {
    Vec::new()
}
