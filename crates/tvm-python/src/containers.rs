//! Python classes for the built-in containers: `Array`, `List` (sequences), `Map`, `Dict`
//! (mappings that keep insertion order) and `Shape`.

use std::borrow::Cow;

use pyo3::exceptions::{PyIndexError, PyKeyError, PyMemoryError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PySlice, PyTuple};
use tvm_ffi::abi;
use tvm_ffi::containers::map::{Dict, Map, MapRead};
use tvm_ffi::{Any, Array, List, Shape};

use crate::convert::{any_to_py, py_to_any};
use crate::errors::raise_error;
use crate::objects::{Borrowed, PyObjectRef, initializer, new_wrapped};
use crate::shared_walks::{mapping_repr, remembered_eq, sequence_repr};

/// Wraps a built-in container or tensor in its Python class; other objects are given back.
pub(crate) fn wrap_builtin(py: Python<'_>, value: Any) -> Result<PyResult<Py<PyAny>>, Any> {
    let wrapped = match value.type_index() {
        abi::kTVMFFIArray => value.cast::<Array>().map(|a| new_wrapped(py, a, PyArray)),
        abi::kTVMFFIList => value.cast::<List>().map(|l| new_wrapped(py, l, PyListObj)),
        abi::kTVMFFIMap => value.cast::<Map>().map(|m| new_wrapped(py, m, PyMap)),
        abi::kTVMFFIDict => value.cast::<Dict>().map(|d| new_wrapped(py, d, PyDictObj)),
        abi::kTVMFFIShape => value.cast::<Shape>().map(|s| new_wrapped(py, s, PyShape)),
        abi::kTVMFFITensor => value
            .cast::<tvm_ffi::Tensor>()
            .map(|t| new_wrapped(py, t, crate::tensor::PyTensor)),
        _ => return Err(value),
    };
    Ok(wrapped.unwrap_or_else(|e| Err(raise_error(py, e))))
}

fn items_of(iterable: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<Any>> {
    let Some(iterable) = iterable else {
        return Ok(Vec::new());
    };
    let known = known_len(iterable);
    let mut items = Vec::new();
    for item in iterable.try_iter()? {
        make_room(&mut items, known)?;
        items.push(py_to_any(&item?)?);
    }
    Ok(items)
}

/// The number of items of a list or tuple, which then take one allocation; 0 for other
/// iterables, whose items grow as they come.
fn known_len(iterable: &Bound<'_, PyAny>) -> usize {
    if let Ok(list) = iterable.cast::<PyList>() {
        list.len()
    } else if let Ok(tuple) = iterable.cast::<PyTuple>() {
        tuple.len()
    } else {
        0
    }
}

/// Room for one more value in `values`, which will hold `known` values if that is known (0
/// otherwise): all of them at once, else twice as many as now; a `MemoryError` when that does
/// not fit in memory.
fn make_room<T>(values: &mut Vec<T>, known: usize) -> PyResult<()> {
    if values.len() < values.capacity() {
        return Ok(());
    }
    let more = known.saturating_sub(values.len()).max(values.len()).max(4);
    values
        .try_reserve_exact(more)
        .map_err(|_| too_many_values(values.len() + more))
}

/// The dimensions of an iterable of ints (not a `str`), growing as they come: a `MemoryError`
/// when they do not fit in memory.
fn dims_of(iterable: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    if iterable.is_instance_of::<pyo3::types::PyString>() {
        return Err(PyTypeError::new_err(
            "a shape is a sequence of ints, not a str",
        ));
    }
    let known = known_len(iterable);
    let mut dims = Vec::new();
    for item in iterable.try_iter()? {
        make_room(&mut dims, known)?;
        dims.push(item?.extract::<i64>()?);
    }
    Ok(dims)
}

/// The `MemoryError` of a container of `count` values that does not fit in memory.
#[cold]
fn too_many_values(count: usize) -> PyErr {
    PyMemoryError::new_err(format!("cannot allocate a container of {count} values"))
}

/// Resolves a Python index (negative from the end) or an `IndexError` naming it.
fn resolve_index(index: isize, len: usize) -> PyResult<usize> {
    let resolved = if index < 0 {
        index + len as isize
    } else {
        index
    };
    if resolved < 0 || resolved as usize >= len {
        return Err(PyIndexError::new_err(format!(
            "index {index} out of range for length {len}"
        )));
    }
    Ok(resolved as usize)
}

/// Element access shared by the sequence classes: an int index or a slice (giving a list).
fn sequence_getitem(py: Python<'_>, items: &[Any], key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    if let Ok(slice) = key.cast::<PySlice>() {
        let indices = slice.indices(items.len() as isize)?;
        let mut out = Vec::with_capacity(indices.slicelength);
        let mut i = indices.start;
        for _ in 0..indices.slicelength {
            out.push(any_to_py(py, items[i as usize].clone())?);
            i += indices.step;
        }
        return Ok(PyList::new(py, out)?.into_any().unbind());
    }
    let index: isize = match key.extract() {
        Ok(index) => index,
        Err(_) if key.is_instance_of::<pyo3::types::PyInt>() => {
            return Err(PyIndexError::new_err(format!(
                "index {key} out of range for a sequence of length {}",
                items.len()
            )));
        }
        Err(_) => {
            return Err(PyTypeError::new_err(format!(
                "indices must be integers or slices, not {}",
                key.get_type().name()?
            )));
        }
    };
    any_to_py(py, items[resolve_index(index, items.len())?].clone())
}

/// Compares a sequence (`container`, holding `items`) with any Python sequence element by
/// element.
fn sequence_eq(
    py: Python<'_>,
    container: Any,
    items: &[Any],
    other: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    let runtime = other.cast::<PyArray>().is_ok() || other.cast::<PyListObj>().is_ok();
    if !(runtime || other.is_instance_of::<PyList>() || other.is_instance_of::<PyTuple>()) {
        return Ok(false);
    }
    if other.len()? != items.len() {
        return Ok(false);
    }
    let theirs = if runtime { py_to_any(other).ok() } else { None };
    remembered_eq(&container, theirs, || {
        for (mine, theirs) in items.iter().zip(other.try_iter()?) {
            if !any_to_py(py, mine.clone())?.bind(py).eq(theirs?)? {
                return Ok(false);
            }
        }
        Ok(true)
    })
}

thread_local! {
    /// The containers whose repr this thread is building, by address.
    static REPRS_IN_PROGRESS: std::cell::RefCell<Vec<usize>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `body` to print `container`, unless this thread is already printing it: a container
/// reached again through itself prints as `placeholder`, as Python prints `[...]` for a list
/// holding itself.
fn repr_once(
    container: Any,
    placeholder: &str,
    body: impl FnOnce() -> PyResult<String>,
) -> PyResult<String> {
    struct Leave(usize);
    impl Drop for Leave {
        fn drop(&mut self) {
            REPRS_IN_PROGRESS.with_borrow_mut(|active| active.retain(|&key| key != self.0));
        }
    }
    let key = container.as_object_ptr().map_or(0, |ptr| ptr as usize);
    let entered = REPRS_IN_PROGRESS.with_borrow_mut(|active| {
        let fresh = !active.contains(&key);
        if fresh {
            active.push(key);
        }
        fresh
    });
    if !entered {
        return Ok(placeholder.to_owned());
    }
    let _leave = Leave(key);
    body()
}

/// Whether `a == b` in Python (identity first, as `in` and `list.index` do).
fn py_equal(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(a.is(b) || a.eq(b)?)
}

/// Python's `value in sequence`: the runtime's equality first (no conversions of the items),
/// then Python equality item by item, so that `in` agrees with `==` for nested containers and
/// values the runtime compares by identity.
fn sequence_contains(py: Python<'_>, items: &[Any], value: &Bound<'_, PyAny>) -> PyResult<bool> {
    if let Ok(converted) = py_to_any(value)
        && items.contains(&converted)
    {
        return Ok(true);
    }
    for item in items {
        if py_equal(any_to_py(py, item.clone())?.bind(py), value)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Clamps optional Python `start`/`stop` bounds (negative from the end) to `0..=len`.
fn clamp_bounds(len: usize, start: Option<isize>, stop: Option<isize>) -> (usize, usize) {
    let clamp = |bound: isize| {
        let resolved = if bound < 0 {
            bound + len as isize
        } else {
            bound
        };
        resolved.clamp(0, len as isize) as usize
    };
    (start.map_or(0, clamp), stop.map_or(len, clamp))
}

/// `sequence.index(value, start, stop)`: the first position of an item equal to `value`, or a
/// `ValueError` naming it.
fn sequence_index(
    py: Python<'_>,
    items: &[Any],
    value: &Bound<'_, PyAny>,
    start: Option<isize>,
    stop: Option<isize>,
) -> PyResult<usize> {
    let (start, stop) = clamp_bounds(items.len(), start, stop);
    for (i, item) in items.iter().enumerate().take(stop).skip(start) {
        if py_equal(any_to_py(py, item.clone())?.bind(py), value)? {
            return Ok(i);
        }
    }
    Err(PyValueError::new_err(format!(
        "{} is not in the sequence",
        value.repr()?
    )))
}

/// `sequence.count(value)`: the number of items equal to `value`.
fn sequence_count(py: Python<'_>, items: &[Any], value: &Bound<'_, PyAny>) -> PyResult<usize> {
    let mut count = 0;
    for item in items {
        if py_equal(any_to_py(py, item.clone())?.bind(py), value)? {
            count += 1;
        }
    }
    Ok(count)
}

/// The items of a sequence as one slice: borrowed from an immutable `Array`, a snapshot of a
/// `List` (whose items may change while Python code runs).
trait SequenceItems {
    fn items(&self) -> Cow<'_, [Any]>;
}

impl SequenceItems for Array {
    fn items(&self) -> Cow<'_, [Any]> {
        Cow::Borrowed(self.as_slice())
    }
}

impl SequenceItems for List {
    fn items(&self) -> Cow<'_, [Any]> {
        Cow::Owned(self.to_vec())
    }
}

/// The `#[pymethods]` of a sequence class (`Array`, `List`): the extra methods given, then the
/// read-only protocol every sequence shares.
macro_rules! sequence_methods {
    ($cls:ident { $($extra:tt)* }) => {
        #[pymethods]
        impl $cls {
            $($extra)*

            fn __len__(&self) -> usize {
                self.0.len()
            }

            fn __iter__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                let items: PyResult<Vec<Py<PyAny>>> =
                    self.0.items().iter().map(|v| any_to_py(py, v.clone())).collect();
                Ok(PyList::new(py, items?)?.try_iter()?.into_any().unbind())
            }

            fn __contains__(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<bool> {
                sequence_contains(py, &self.0.items(), value)
            }

            fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
                sequence_eq(py, Any::from((*self.0).clone()), &self.0.items(), other)
            }

            /// The first position of an item equal to `value` (within `start..stop`).
            #[pyo3(signature = (value, start = None, stop = None))]
            fn index(
                &self,
                py: Python<'_>,
                value: &Bound<'_, PyAny>,
                start: Option<isize>,
                stop: Option<isize>,
            ) -> PyResult<usize> {
                sequence_index(py, &self.0.items(), value, start, stop)
            }

            /// The number of items equal to `value`.
            fn count(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<usize> {
                sequence_count(py, &self.0.items(), value)
            }

            fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
                let items = self.0.items();
                repr_once(Any::from((*self.0).clone()), "[...]", || sequence_repr(py, &items))
            }
        }
    };
}

/// An immutable sequence of values.
#[pyclass(extends = PyObjectRef, frozen, sequence, module = "tvm.ffi", name = "Array")]
pub struct PyArray(Borrowed<Array>);

sequence_methods!(PyArray {
    #[new]
    #[pyo3(signature = (items = None))]
    fn py_new(
        py: Python<'_>,
        items: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<PyArray>> {
        let array = Array::try_from_vec(items_of(items)?).map_err(|err| raise_error(py, err))?;
        Ok(initializer(array, PyArray))
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        sequence_getitem(py, self.0.as_slice(), key)
    }
});

/// A shared, mutable sequence of values.
#[pyclass(extends = PyObjectRef, frozen, sequence, module = "tvm.ffi", name = "List")]
pub struct PyListObj(Borrowed<List>);

// SAFETY: `List` is not `Sync`, but every access happens with the interpreter lock held.
unsafe impl Sync for PyListObj {}
// SAFETY: as above; the list's reference count is atomic.
unsafe impl Send for PyListObj {}

sequence_methods!(PyListObj {
    #[new]
    #[pyo3(signature = (items = None))]
    fn py_new(
        py: Python<'_>,
        items: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<PyListObj>> {
        let items = items_of(items)?;
        let list = List::new();
        list.try_reserve(items.len())
            .map_err(|err| raise_error(py, err))?;
        for item in items {
            list.push(item);
        }
        Ok(initializer(list, PyListObj))
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        if key.is_instance_of::<pyo3::types::PyInt>() {
            // One element without copying the list.
            let index: isize = key.extract()?;
            let i = resolve_index(index, self.0.len())?;
            return any_to_py(py, self.0.get(i as i64).map_err(|e| raise_error(py, e))?);
        }
        sequence_getitem(py, &self.0.to_vec(), key)
    }

    fn __setitem__(&self, py: Python<'_>, index: i64, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.0
            .set(index, py_to_any(value)?)
            .map_err(|e| raise_error(py, e))
    }

    fn __delitem__(&self, py: Python<'_>, index: i64) -> PyResult<()> {
        self.0
            .remove(index)
            .map(drop)
            .map_err(|e| raise_error(py, e))
    }

    /// Removes the first item equal to `value`, or raises a `ValueError` naming it.
    fn remove(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let index = sequence_index(py, &self.0.to_vec(), value, None, None)?;
        self.0
            .remove(index as i64)
            .map(drop)
            .map_err(|e| raise_error(py, e))
    }

    /// Reverses the list in place.
    fn reverse(&self, py: Python<'_>) -> PyResult<()> {
        for (i, value) in self.0.to_vec().into_iter().rev().enumerate() {
            self.0
                .set(i as i64, value)
                .map_err(|e| raise_error(py, e))?;
        }
        Ok(())
    }

    fn __iadd__(&self, values: &Bound<'_, PyAny>) -> PyResult<()> {
        self.extend(values)
    }

    /// Appends a value.
    fn append(&self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.0.push(py_to_any(value)?);
        Ok(())
    }

    /// Appends every value of an iterable.
    fn extend(&self, values: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = values.py();
        let values = items_of(Some(values))?;
        self.0
            .try_reserve(self.0.len().saturating_add(values.len()))
            .map_err(|err| raise_error(py, err))?;
        for v in values {
            self.0.push(v);
        }
        Ok(())
    }

    /// Inserts a value before `index`.
    fn insert(&self, py: Python<'_>, index: i64, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let len = self.0.len() as i64;
        let index = if index < 0 {
            (index + len).max(0)
        } else {
            index.min(len)
        };
        self.0
            .insert(index, py_to_any(value)?)
            .map_err(|e| raise_error(py, e))
    }

    /// Removes and returns the value at `index` (the last by default).
    #[pyo3(signature = (index = -1))]
    fn pop(&self, py: Python<'_>, index: i64) -> PyResult<Py<PyAny>> {
        any_to_py(py, self.0.remove(index).map_err(|e| raise_error(py, e))?)
    }

    /// Removes every value.
    fn clear(&self) {
        self.0.clear();
    }
});

fn map_key_error(py: Python<'_>, key: &Bound<'_, PyAny>) -> PyErr {
    let _ = py;
    PyKeyError::new_err(key.clone().unbind())
}

/// Compares a mapping (`container`, holding `entries`) with any Python mapping entry by entry.
fn mapping_eq(
    py: Python<'_>,
    container: Any,
    entries: Vec<(Any, Any)>,
    other: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    let Ok(len) = other.len() else {
        return Ok(false);
    };
    if !other.hasattr("keys")? || len != entries.len() {
        return Ok(false);
    }
    let runtime = other.cast::<PyMap>().is_ok() || other.cast::<PyDictObj>().is_ok();
    let theirs = if runtime { py_to_any(other).ok() } else { None };
    remembered_eq(&container, theirs, || {
        for (k, v) in entries {
            let key = any_to_py(py, k)?;
            let Ok(theirs) = other.get_item(key.bind(py)) else {
                return Ok(false);
            };
            if !any_to_py(py, v)?.bind(py).eq(theirs)? {
                return Ok(false);
            }
        }
        Ok(true)
    })
}

fn entries_to_py(py: Python<'_>, entries: Vec<(Any, Any)>, part: u8) -> PyResult<Py<PyAny>> {
    let mut out = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        out.push(match part {
            0 => any_to_py(py, k)?,
            1 => any_to_py(py, v)?,
            _ => PyTuple::new(py, [any_to_py(py, k)?, any_to_py(py, v)?])?
                .into_any()
                .unbind(),
        });
    }
    Ok(PyList::new(py, out)?.into_any().unbind())
}

macro_rules! mapping_methods {
    ($cls:ident { $($extra:tt)* }) => {
        #[pymethods]
        impl $cls {
            $($extra)*

            fn __len__(&self) -> usize {
                self.0.len()
            }

            fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
                let k = py_to_any(key)?;
                match self.0.get(&k) {
                    Some(v) => any_to_py(py, v),
                    None => Err(map_key_error(py, key)),
                }
            }

            fn __contains__(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
                Ok(self.0.contains_key(&py_to_any(key)?))
            }

            fn __iter__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                let keys = entries_to_py(py, self.0.iter().collect(), 0)?;
                Ok(keys.bind(py).try_iter()?.into_any().unbind())
            }

            /// The value for `key`, or `default`.
            #[pyo3(signature = (key, default = None))]
            fn get(&self, py: Python<'_>, key: &Bound<'_, PyAny>, default: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
                match self.0.get(&py_to_any(key)?) {
                    Some(v) => any_to_py(py, v),
                    None => Ok(default.unwrap_or_else(|| py.None())),
                }
            }

            /// The keys, in insertion order.
            fn keys(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                entries_to_py(py, self.0.iter().collect(), 0)
            }

            /// The values, in insertion order.
            fn values(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                entries_to_py(py, self.0.iter().collect(), 1)
            }

            /// The `(key, value)` pairs, in insertion order.
            fn items(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                entries_to_py(py, self.0.iter().collect(), 2)
            }

            fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
                mapping_eq(py, Any::from((*self.0).clone()), self.0.iter().collect(), other)
            }

            fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
                repr_once(Any::from((*self.0).clone()), "{...}", || {
                    mapping_repr(py, self.0.iter().collect())
                })
            }
        }
    };
}

fn entries_of(source: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(Any, Any)>> {
    let Some(source) = source else {
        return Ok(Vec::new());
    };
    let pairs = if source.hasattr("items")? {
        source.call_method0("items")?
    } else {
        source.clone()
    };
    let known = source.cast::<PyDict>().map_or(0, |dict| dict.len());
    let mut entries = Vec::new();
    for pair in pairs.try_iter()? {
        let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = pair?.extract()?;
        make_room(&mut entries, known)?;
        entries.push((py_to_any(&k)?, py_to_any(&v)?));
    }
    Ok(entries)
}

/// An immutable mapping that keeps insertion order.
#[pyclass(extends = PyObjectRef, frozen, mapping, module = "tvm.ffi", name = "Map")]
pub struct PyMap(Borrowed<Map>);

mapping_methods!(PyMap {
    #[new]
    #[pyo3(signature = (source = None))]
    fn py_new(
        py: Python<'_>,
        source: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<PyMap>> {
        let entries = entries_of(source)?;
        let mut map = Map::try_with_capacity(entries.len()).map_err(|err| raise_error(py, err))?;
        for (k, v) in entries {
            map.insert(k, v);
        }
        Ok(initializer(map, PyMap))
    }
});

/// A shared, mutable mapping that keeps insertion order.
#[pyclass(extends = PyObjectRef, frozen, mapping, module = "tvm.ffi", name = "Dict")]
pub struct PyDictObj(Borrowed<Dict>);

// SAFETY: `Dict` is shared-mutable without locks; every access holds the interpreter lock.
unsafe impl Sync for PyDictObj {}
// SAFETY: as above; the reference count is atomic.
unsafe impl Send for PyDictObj {}

mapping_methods!(PyDictObj {
    #[new]
    #[pyo3(signature = (source = None))]
    fn py_new(
        py: Python<'_>,
        source: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<PyDictObj>> {
        let entries = entries_of(source)?;
        let dict = Dict::try_with_capacity(entries.len()).map_err(|err| raise_error(py, err))?;
        for (k, v) in entries {
            dict.insert(k, v);
        }
        Ok(initializer(dict, PyDictObj))
    }

    fn __setitem__(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.0.insert(py_to_any(key)?, py_to_any(value)?);
        Ok(())
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        match self.0.remove(&py_to_any(key)?) {
            Some(_) => Ok(()),
            None => Err(map_key_error(py, key)),
        }
    }

    /// Removes `key` and returns its value (or `default`, or a `KeyError`).
    #[pyo3(signature = (key, *default))]
    fn pop(&self, py: Python<'_>, key: &Bound<'_, PyAny>, default: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
        if default.len() > 1 {
            return Err(PyTypeError::new_err(format!(
                "pop expected at most 2 arguments, got {}",
                default.len() + 1
            )));
        }
        match self.0.remove(&py_to_any(key)?) {
            Some(v) => any_to_py(py, v),
            None if !default.is_empty() => Ok(default.get_item(0)?.unbind()),
            None => Err(map_key_error(py, key)),
        }
    }

    /// Removes every entry.
    fn clear(&self) {
        self.0.clear();
    }

    /// Inserts the entries of a mapping or of `(key, value)` pairs, then the keyword arguments.
    #[pyo3(signature = (source = None, **kwargs))]
    fn update(
        &self,
        source: Option<&Bound<'_, PyAny>>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        for (k, v) in entries_of(source)? {
            self.0.insert(k, v);
        }
        for (k, v) in entries_of(kwargs.map(|d| d.as_any()))? {
            self.0.insert(k, v);
        }
        Ok(())
    }

    /// The value for `key`, inserting `default` first if the key is missing.
    #[pyo3(signature = (key, default = None))]
    fn setdefault(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let k = py_to_any(key)?;
        if let Some(v) = self.0.get(&k) {
            return any_to_py(py, v);
        }
        let value = match default {
            Some(d) => py_to_any(d)?,
            None => Any::none(),
        };
        self.0.insert(k, value.clone());
        any_to_py(py, value)
    }

    /// Removes and returns the last inserted `(key, value)` pair; a `KeyError` when empty.
    fn popitem(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let Some((k, v)) = self.0.iter().last() else {
            return Err(PyKeyError::new_err("popitem(): Dict is empty"));
        };
        self.0.remove(&k);
        Ok(PyTuple::new(py, [any_to_py(py, k)?, any_to_py(py, v)?])?
            .into_any()
            .unbind())
    }
});

/// An immutable tuple of dimensions.
#[pyclass(extends = PyObjectRef, frozen, sequence, module = "tvm.ffi", name = "Shape")]
pub struct PyShape(Borrowed<Shape>);

#[pymethods]
impl PyShape {
    #[new]
    #[pyo3(signature = (dims = None))]
    fn py_new(
        py: Python<'_>,
        dims: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<PyShape>> {
        let dims = match dims {
            Some(dims) => dims_of(dims)?,
            None => Vec::new(),
        };
        let shape = Shape::try_new(&dims).map_err(|err| raise_error(py, err))?;
        Ok(initializer(shape, PyShape))
    }

    fn __len__(&self) -> usize {
        self.0.len()
    }

    fn __getitem__(&self, index: isize) -> PyResult<i64> {
        Ok(self.0[resolve_index(index, self.0.len())?])
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyTuple::new(py, self.0.as_slice())?.try_iter()?.into_any())
    }

    /// The first position of dimension `value` (within `start..stop`).
    #[pyo3(signature = (value, start = None, stop = None))]
    fn index(
        &self,
        value: &Bound<'_, PyAny>,
        start: Option<isize>,
        stop: Option<isize>,
    ) -> PyResult<usize> {
        let (start, stop) = clamp_bounds(self.0.len(), start, stop);
        let wanted = value.extract::<i64>().ok();
        (start..stop)
            .find(|&i| Some(self.0[i]) == wanted)
            .ok_or_else(|| {
                let text = value.repr().map(|r| r.to_string()).unwrap_or_default();
                PyValueError::new_err(format!("{text} is not in the shape"))
            })
    }

    /// The number of dimensions equal to `value`.
    fn count(&self, value: &Bound<'_, PyAny>) -> usize {
        let wanted = value.extract::<i64>().ok();
        self.0.iter().filter(|&&d| Some(d) == wanted).count()
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .extract::<Vec<i64>>()
            .is_ok_and(|v| v == self.0.as_slice())
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.0.as_slice().hash(&mut h);
        h.finish()
    }

    fn __repr__(&self) -> String {
        let dims: Vec<String> = self.0.iter().map(i64::to_string).collect();
        format!("Shape([{}])", dims.join(", "))
    }
}
