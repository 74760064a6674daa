//! Snapshots of a container's items for the structural walks: the engines call user code
//! (visitors, mutators) between items, which may change a list or dict being walked.

use crate::abi;
use crate::any::{Any, AnyView};
use crate::containers::array::ArrayObj;
use crate::{Dict, List, Map, MapRead};

/// A snapshot of the items of an array or list (callbacks may change a list meanwhile).
pub(crate) fn sequence_items(value: AnyView<'_>) -> Vec<Any> {
    if let Some(array) = value.as_object::<ArrayObj>() {
        return array.as_slice().to_vec();
    }
    value
        .cast::<List>()
        .map(|list| list.to_vec())
        .unwrap_or_default()
}

/// A snapshot of the values of a map or dict, in insertion order.
pub(crate) fn map_values(value: AnyView<'_>) -> Vec<Any> {
    if value.type_index() == abi::kTVMFFIMap {
        return value
            .cast::<Map>()
            .map(|m| m.values().collect())
            .unwrap_or_default();
    }
    value
        .cast::<Dict>()
        .map(|dict| dict.values().collect())
        .unwrap_or_default()
}
