//! Typed views of the containers: [`ArrayOf<T>`] is an `ffi.Array` whose every element is a
//! `T`, and [`MapOf<K, V>`] an `ffi.Map` whose every key is a `K` and value a `V`. Converting a
//! value into one checks every element once (a typed function's argument gets a `TypeError`
//! naming the element that does not convert), so reading afterwards cannot fail; the type
//! schema names the element types (`{"type":"ffi.Array","args":[{"type":"int"}]}`), which
//! stubs read.

use std::fmt;
use std::marker::PhantomData;

use crate::any::{Any, AnyView, TryFromAnyView};
use crate::containers::array::Array;
use crate::containers::map::{Map, MapRead};
use crate::error::{Error, ErrorKind, Result};

/// The element of a container converted to `T`; checked when the container was made.
fn element<T: TryFromAnyView>(value: &Any) -> T {
    T::try_from_view(&value.as_view()).expect("elements are checked when the container is made")
}

/// The `TypeError` of an element that is not a `T`.
fn element_error<T: TryFromAnyView>(what: &str, value: &Any) -> Error {
    Error::new(
        ErrorKind::TypeError,
        format!(
            "{what} is `{}`, not `{}`",
            value.as_view().type_name(),
            T::TYPE_NAME
        ),
    )
}

/// An `ffi.Array` of `T`s.
pub struct ArrayOf<T> {
    array: Array,
    _element: PhantomData<fn() -> T>,
}

impl<T: TryFromAnyView + Into<Any>> ArrayOf<T> {
    /// An empty array.
    pub fn new() -> ArrayOf<T> {
        ArrayOf::unchecked(Array::new())
    }

    fn unchecked(array: Array) -> ArrayOf<T> {
        ArrayOf {
            array,
            _element: PhantomData,
        }
    }

    /// An array of `values`; a `MemoryError` when it cannot be allocated.
    pub fn try_from_vec(values: Vec<T>) -> Result<ArrayOf<T>> {
        let values = values.into_iter().map(Into::into).collect();
        Array::try_from_vec(values).map(ArrayOf::unchecked)
    }

    /// `array` as an array of `T`s; a `TypeError` naming the first element that is not one.
    pub fn try_from_array(array: Array) -> Result<ArrayOf<T>> {
        for (index, value) in array.iter().enumerate() {
            if T::try_from_view(&value.as_view()).is_none() {
                return Err(element_error::<T>(
                    &format!("element {index} of the array"),
                    value,
                ));
            }
        }
        Ok(ArrayOf::unchecked(array))
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.array.len()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.array.is_empty()
    }

    /// Element `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<T> {
        self.array.get(index).map(element)
    }

    /// The elements in order.
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        self.array.iter().map(element)
    }

    /// The elements, collected.
    pub fn to_vec(&self) -> Vec<T> {
        self.iter().collect()
    }

    /// The untyped array.
    pub fn as_array(&self) -> &Array {
        &self.array
    }
}

impl<T: TryFromAnyView + Into<Any>> Default for ArrayOf<T> {
    fn default() -> ArrayOf<T> {
        ArrayOf::new()
    }
}

impl<T> Clone for ArrayOf<T> {
    fn clone(&self) -> ArrayOf<T> {
        ArrayOf {
            array: self.array.clone(),
            _element: PhantomData,
        }
    }
}

impl<T: TryFromAnyView + Into<Any> + fmt::Debug> fmt::Debug for ArrayOf<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: TryFromAnyView + Into<Any>> FromIterator<T> for ArrayOf<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> ArrayOf<T> {
        ArrayOf::unchecked(iter.into_iter().collect())
    }
}

impl<T> From<ArrayOf<T>> for Any {
    fn from(array: ArrayOf<T>) -> Any {
        array.array.into()
    }
}

impl<T: TryFromAnyView + Into<Any>> TryFrom<Array> for ArrayOf<T> {
    type Error = Error;
    fn try_from(array: Array) -> Result<ArrayOf<T>> {
        ArrayOf::try_from_array(array)
    }
}

impl<T: TryFromAnyView + Into<Any>> TryFromAnyView for ArrayOf<T> {
    const TYPE_NAME: &'static str = "ffi.Array";

    /// Accepts an array (or a list, copied) whose every element is a `T`.
    fn try_from_view(view: &AnyView<'_>) -> Option<ArrayOf<T>> {
        ArrayOf::try_from_array(Array::try_from_view(view)?).ok()
    }

    fn mismatch(view: &AnyView<'_>) -> Option<std::string::String> {
        let array = Array::try_from_view(view)?;
        ArrayOf::<T>::try_from_array(array)
            .err()
            .map(|e| e.message().into_owned())
    }

    fn type_schema() -> std::string::String {
        format!(r#"{{"type":"ffi.Array","args":[{}]}}"#, T::type_schema())
    }
}

/// An `ffi.Map` from `K`s to `V`s.
pub struct MapOf<K, V> {
    map: Map,
    _entry: PhantomData<fn() -> (K, V)>,
}

impl<K, V> MapOf<K, V>
where
    K: TryFromAnyView + Into<Any>,
    V: TryFromAnyView + Into<Any>,
{
    /// An empty map.
    pub fn new() -> MapOf<K, V> {
        MapOf::unchecked(Map::new())
    }

    fn unchecked(map: Map) -> MapOf<K, V> {
        MapOf {
            map,
            _entry: PhantomData,
        }
    }

    /// `map` as a map of `K` to `V`; a `TypeError` naming the first key or value that is not
    /// one.
    pub fn try_from_map(map: Map) -> Result<MapOf<K, V>> {
        for (key, value) in map.iter() {
            if K::try_from_view(&key.as_view()).is_none() {
                return Err(element_error::<K>("a key of the map", &key));
            }
            if V::try_from_view(&value.as_view()).is_none() {
                let what = format!("the value of key {:?} in the map", key.as_view());
                return Err(element_error::<V>(&what, &value));
            }
        }
        Ok(MapOf::unchecked(map))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The value stored for `key`.
    pub fn get(&self, key: K) -> Option<V> {
        let key: Any = key.into();
        self.map.get(&key).map(|value| element(&value))
    }

    /// Stores `value` for `key`, returning the value it replaces (copying the map first if it
    /// is shared, as [`Map::insert`] does).
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        self.map.insert(key, value).map(|old| element(&old))
    }

    /// The entries in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (K, V)> + '_ {
        self.map.iter().map(|(k, v)| (element(&k), element(&v)))
    }

    /// The untyped map.
    pub fn as_map(&self) -> &Map {
        &self.map
    }
}

impl<K, V> Default for MapOf<K, V>
where
    K: TryFromAnyView + Into<Any>,
    V: TryFromAnyView + Into<Any>,
{
    fn default() -> MapOf<K, V> {
        MapOf::new()
    }
}

impl<K, V> Clone for MapOf<K, V> {
    fn clone(&self) -> MapOf<K, V> {
        MapOf {
            map: self.map.clone(),
            _entry: PhantomData,
        }
    }
}

impl<K, V> fmt::Debug for MapOf<K, V>
where
    K: TryFromAnyView + Into<Any> + fmt::Debug,
    V: TryFromAnyView + Into<Any> + fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K, V> FromIterator<(K, V)> for MapOf<K, V>
where
    K: TryFromAnyView + Into<Any>,
    V: TryFromAnyView + Into<Any>,
{
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> MapOf<K, V> {
        MapOf::unchecked(iter.into_iter().collect())
    }
}

impl<K, V> From<MapOf<K, V>> for Any {
    fn from(map: MapOf<K, V>) -> Any {
        map.map.into()
    }
}

impl<K, V> TryFrom<Map> for MapOf<K, V>
where
    K: TryFromAnyView + Into<Any>,
    V: TryFromAnyView + Into<Any>,
{
    type Error = Error;
    fn try_from(map: Map) -> Result<MapOf<K, V>> {
        MapOf::try_from_map(map)
    }
}

impl<K, V> TryFromAnyView for MapOf<K, V>
where
    K: TryFromAnyView + Into<Any>,
    V: TryFromAnyView + Into<Any>,
{
    const TYPE_NAME: &'static str = "ffi.Map";

    /// Accepts a map (or a dict) whose every key is a `K` and value a `V`.
    fn try_from_view(view: &AnyView<'_>) -> Option<MapOf<K, V>> {
        MapOf::try_from_map(Map::try_from_view(view)?).ok()
    }

    fn mismatch(view: &AnyView<'_>) -> Option<std::string::String> {
        let map = Map::try_from_view(view)?;
        MapOf::<K, V>::try_from_map(map)
            .err()
            .map(|e| e.message().into_owned())
    }

    fn type_schema() -> std::string::String {
        format!(
            r#"{{"type":"ffi.Map","args":[{},{}]}}"#,
            K::type_schema(),
            V::type_schema()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_check_their_elements_once_and_read_typed() {
        let ints: ArrayOf<i64> = [1i64, 2, 3].into_iter().collect();
        assert_eq!(ints.to_vec(), vec![1, 2, 3]);
        assert_eq!(ints.get(1), Some(2));
        assert_eq!(ints.get(3), None);
        let mixed = Array::from_vec(vec![Any::from(1i64), Any::from("two")]);
        let err = ArrayOf::<i64>::try_from_array(mixed.clone()).unwrap_err();
        assert_eq!(err.kind(), "TypeError");
        assert_eq!(
            err.message(),
            "element 1 of the array is `ffi.String`, not `int`"
        );
        assert!(ArrayOf::<i64>::try_from_view(&Any::from(mixed).as_view()).is_none());
        assert_eq!(
            ArrayOf::<Option<i64>>::type_schema(),
            r#"{"type":"ffi.Array","args":[{"type":"Optional","args":[{"type":"int"}]}]}"#
        );
    }

    #[test]
    fn maps_check_keys_and_values_and_read_typed() {
        let mut map: MapOf<crate::String, i64> =
            [(crate::String::from("a"), 1i64)].into_iter().collect();
        assert_eq!(map.insert("b".into(), 2), None);
        assert_eq!(map.insert("a".into(), 10), Some(1));
        assert_eq!(map.get("a".into()), Some(10));
        assert_eq!(map.len(), 2);
        let mut raw = Map::new();
        raw.insert("x", 1.5f64);
        let err = MapOf::<crate::String, i64>::try_from_map(raw).unwrap_err();
        assert_eq!(
            err.message(),
            r#"the value of key "x" in the map is `float`, not `int`"#
        );
        assert_eq!(
            MapOf::<crate::String, f64>::type_schema(),
            r#"{"type":"ffi.Map","args":[{"type":"ffi.String"},{"type":"float"}]}"#
        );
    }
}
