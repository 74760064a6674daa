//! Python classes wrapping runtime objects: the base `Object`, `Function`, and the registry of
//! Python classes bound to type keys with `register_object`.

use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::sync::RwLock;

use pyo3::exceptions::{PyAttributeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};
use tvm_ffi::abi::{TVMFFIAny, TVMFFIAnyPayload, TVMFFIObject};
use tvm_ffi::reflection::{self, FieldRef};
use tvm_ffi::{Any, types};

use crate::convert::{any_to_py, call_function};
use crate::errors::raise_error;

/// Base class of every object from the runtime; holds one strong reference.
///
/// An instance is as small as apache-tvm-ffi's: the object pointer alone (its type index is in
/// the object's header), and no weak-reference slot (Python subclasses get one of their own).
#[pyclass(subclass, frozen, module = "tvm.ffi", name = "Object")]
pub struct PyObjectRef {
    handle: Handle,
}

/// The object of an `Object`: one strong reference, or NULL for an instance not bound yet; set
/// when the instance is made, or once later by `bind` for instances made through `__new__`
/// (Python subclasses). Every access holds the interpreter lock, which serializes the one write
/// with the reads.
struct Handle(UnsafeCell<*mut TVMFFIObject>);

// SAFETY: see `Handle`: all access is serialized by the interpreter lock, and the only write
// (`bind`) happens while no value from `any` is outstanding.
unsafe impl Sync for Handle {}
// SAFETY: as above; the reference it owns may be released on any thread.
unsafe impl Send for Handle {}

impl Drop for Handle {
    fn drop(&mut self) {
        let object = *self.0.get_mut();
        if !object.is_null() {
            // SAFETY: the handle owns this strong reference.
            unsafe { tvm_ffi::object::dec_ref(object) };
        }
    }
}

/// The object of an object value, or NULL for None (`Object` wrappers hold objects only).
fn object_of(value: Any) -> PyResult<*mut TVMFFIObject> {
    if value.is_none() {
        return Ok(std::ptr::null_mut());
    }
    if !value.is_object() {
        return Err(PyTypeError::new_err(format!(
            "an Object wraps runtime objects, not {}",
            value.type_key()
        )));
    }
    // SAFETY: an object value's payload is its object; the reference moves into the result.
    Ok(unsafe { value.into_raw().payload.v_obj })
}

impl PyObjectRef {
    /// Wraps an object value (or None, for an instance bound later).
    pub(crate) fn from_any(value: Any) -> PyObjectRef {
        debug_assert!(value.is_none() || value.is_object());
        PyObjectRef {
            handle: Handle(UnsafeCell::new(
                object_of(value).unwrap_or(std::ptr::null_mut()),
            )),
        }
    }

    /// Binds an instance created through `__new__` to its object (once).
    pub(crate) fn bind(&self, value: Any) -> PyResult<()> {
        if !self.any().is_none() {
            return Err(PyTypeError::new_err("object is already initialized"));
        }
        let object = object_of(value)?;
        // SAFETY: see `Handle`; the previous value is NULL, so nothing is leaked.
        unsafe { *self.handle.0.get() = object };
        Ok(())
    }

    /// The held value, borrowed (None for an instance not yet bound to an object).
    pub(crate) fn any(&self) -> ManuallyDrop<Any> {
        // SAFETY: see `Handle`.
        let object = unsafe { *self.handle.0.get() };
        if object.is_null() {
            return ManuallyDrop::new(Any::none());
        }
        // SAFETY: a live object (this handle's reference), viewed without a count of its own:
        // the value is never dropped.
        ManuallyDrop::new(unsafe {
            Any::from_raw(TVMFFIAny {
                type_index: (*object).type_index,
                small_str_len: 0,
                payload: TVMFFIAnyPayload { v_obj: object },
            })
        })
    }

    fn object_ptr(&self) -> usize {
        self.any().as_object_ptr().map_or(0, |p| p as usize)
    }
}

#[pymethods]
impl PyObjectRef {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn py_new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyAny>>) -> PyObjectRef {
        PyObjectRef::from_any(Any::none())
    }

    /// Binds an instance created from Python to the object returned by `constructor(*args)`.
    #[pyo3(signature = (constructor, *args))]
    fn __init_handle_by_constructor__(
        &self,
        py: Python<'_>,
        constructor: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
    ) -> PyResult<()> {
        let function = crate::convert::function_of(constructor)?;
        let items: Vec<*mut pyo3::ffi::PyObject> = args.iter().map(|a| a.as_ptr()).collect();
        let value = call_function(py, &function, &items, false)?;
        if !value.is_object() {
            return Err(PyTypeError::new_err(format!(
                "constructor returned {}, not an object",
                value.type_key()
            )));
        }
        self.bind(value)
    }

    /// The type key of the object's runtime type.
    #[getter]
    fn type_key(&self) -> String {
        self.any().type_key()
    }

    /// The runtime type index.
    #[getter]
    fn _type_index(&self) -> i32 {
        self.any().type_index()
    }

    /// Whether both wrap the same object.
    fn same_as(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyObjectRef>()
            .is_ok_and(|o| o.get().object_ptr() == self.object_ptr())
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        self.same_as(other)
    }

    fn __ne__(&self, other: &Bound<'_, PyAny>) -> bool {
        !self.same_as(other)
    }

    fn __hash__(&self) -> isize {
        self.object_ptr() as isize
    }

    /// The object's strong reference count.
    fn _use_count(&self) -> u32 {
        self.any()
            .as_object::<tvm_ffi::Object>()
            .map_or(0, tvm_ffi::Object::strong_count)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let this = slf.get();
        if this.any().is_none() {
            return Ok(format!("<unbound {}>", slf.get_type().name()?));
        }
        // The runtime's printer (`ffi.ReprPrint`); the Python-level field repr if it fails.
        if let Ok(text) = tvm_ffi::extra::repr::repr(this.any().as_view()) {
            return Ok(text);
        }
        let fields = reflected_fields(this.any().type_index());
        let mut parts = Vec::new();
        for name in fields {
            let value = slf.getattr(name.as_str())?;
            parts.push(format!("{name}={}", value.repr()?));
        }
        Ok(format!("{}({})", this.any().type_key(), parts.join(", ")))
    }

    /// Pickles as JSON-graph text (`ffi.ToJSONGraphString`), read back by
    /// `tvm.ffi.serialization.from_json_graph_str`.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (String,))> {
        let py = slf.py();
        let this = slf.get();
        let text = tvm_ffi::extra::serialization::to_json_graph_string(
            this.any().as_view(),
            Any::none().as_view(),
        )
        .map_err(|e| raise_error(py, e))?;
        let load = py
            .import("tvm.ffi.serialization")?
            .getattr("from_json_graph_str")?;
        Ok((load, (text,)))
    }

    /// A deep copy through `ffi.DeepCopy` (shared references and cycles kept).
    fn __deepcopy__(&self, py: Python<'_>, _memo: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let copy = tvm_ffi::extra::deep_copy::deep_copy(self.any().as_view())
            .map_err(|e| raise_error(py, e))?;
        any_to_py(py, copy)
    }
}

/// The value of reflected field `name` of an object; an `AttributeError` naming the field and
/// the type if there is none.
#[pyfunction]
pub(crate) fn _object_get_field(
    py: Python<'_>,
    obj: &Bound<'_, PyObjectRef>,
    name: &str,
) -> PyResult<Py<PyAny>> {
    let this = obj.get();
    match read_field(&this.any(), name) {
        Some(value) => any_to_py(py, value.map_err(|e| raise_error(py, e))?),
        None => Err(PyAttributeError::new_err(format!(
            "'{}' object has no attribute '{name}'",
            this.any().type_key()
        ))),
    }
}

/// The names of the reflected fields of a type (with its ancestors'), root first.
#[pyfunction]
pub(crate) fn _type_field_names(type_index: i32) -> Vec<String> {
    reflected_fields(type_index)
}

/// The reflected fields of a type (with its ancestors'), root first, as (name, doc, metadata
/// JSON) each: what stub generators read a field's type schema from.
#[pyfunction]
pub(crate) fn _type_fields(type_index: i32) -> Vec<(String, String, String)> {
    reflection::fields_of(type_index)
        .map(|f| {
            (
                f.name().to_owned(),
                f.doc().to_owned(),
                f.metadata().to_owned(),
            )
        })
        .collect()
}

/// A wrapper value (`Array`, `Tensor`, ...) kept by a subclass of `Object` that borrows the
/// reference held by the object's base part instead of holding a second one.
pub struct Borrowed<W>(ManuallyDrop<W>);

impl<W> std::ops::Deref for Borrowed<W> {
    type Target = W;
    fn deref(&self) -> &W {
        &self.0
    }
}

/// A value that is one counted reference to an object, which `Into<Any>` moves unchanged.
///
/// # Safety
/// Implementors are a single object handle, and converting one into `Any` keeps that object
/// and that reference (no copy, no new object).
pub(crate) unsafe trait ObjectHandle: Into<Any> {}

// SAFETY: each of these is one counted object pointer that `Into<Any>` moves as it is.
unsafe impl ObjectHandle for tvm_ffi::Array {}
// SAFETY: as above.
unsafe impl ObjectHandle for tvm_ffi::List {}
// SAFETY: as above.
unsafe impl ObjectHandle for tvm_ffi::containers::map::Map {}
// SAFETY: as above.
unsafe impl ObjectHandle for tvm_ffi::containers::map::Dict {}
// SAFETY: as above.
unsafe impl ObjectHandle for tvm_ffi::Shape {}
// SAFETY: as above.
unsafe impl ObjectHandle for tvm_ffi::Tensor {}

/// The initializer of a Python object of class `T` around `value`: the base `Object` part holds
/// the one reference, `T` gets a borrowed copy (no reference-count traffic).
pub(crate) fn initializer<W, T>(
    value: W,
    make: impl FnOnce(Borrowed<W>) -> T,
) -> PyClassInitializer<T>
where
    W: ObjectHandle,
    T: pyo3::PyClass<BaseType = PyObjectRef>,
{
    // SAFETY: a bitwise copy of the handle that is never dropped; `ObjectHandle` guarantees the
    // reference moves into `any` unchanged, and the base part keeps it (never replaced) for the
    // whole life of the Python object, which outlives the copy.
    let copy = ManuallyDrop::new(unsafe { std::ptr::read(&value) });
    let any: Any = value.into();
    PyClassInitializer::from(PyObjectRef::from_any(any)).add_subclass(make(Borrowed(copy)))
}

/// A new Python object of class `T` around `value` (see [`initializer`]).
pub(crate) fn new_wrapped<W, T>(
    py: Python<'_>,
    value: W,
    make: impl FnOnce(Borrowed<W>) -> T,
) -> PyResult<Py<PyAny>>
where
    W: ObjectHandle,
    T: pyo3::PyClass<BaseType = PyObjectRef>,
{
    Ok(Py::new(py, initializer(value, make))?.into_any())
}

/// Names of the reflected fields of a type, root first.
pub(crate) fn reflected_fields(type_index: i32) -> Vec<String> {
    reflection::fields_of(type_index)
        .map(|field| field.name().to_owned())
        .collect()
}

/// Reads field `name` of the object in `value` through its getter; `None` if `value` is not an
/// object or its type has no readable field of that name.
fn read_field(value: &Any, name: &str) -> Option<tvm_ffi::Result<Any>> {
    if !value.is_object() {
        return None;
    }
    let field = reflection::fields_of(value.type_index())
        .find(|field| field.name() == name)
        .filter(FieldRef::is_readable)?;
    Some(field.get(value))
}

/// Python classes bound to runtime type indices by `register_object`.
static CLASSES: RwLock<Option<HashMap<i32, Py<PyType>>>> = RwLock::new(None);

/// Binds `cls` to the type registered as `type_key`.
#[pyfunction]
pub(crate) fn _register_object_class(type_key: &str, cls: &Bound<'_, PyType>) -> PyResult<i32> {
    let index = types::type_key_to_index(type_key).map_err(|e| {
        let _ = e;
        pyo3::exceptions::PyValueError::new_err(format!(
            "Cannot find object type index for `{type_key}`: register the type in native code first"
        ))
    })?;
    let mut classes = CLASSES.write().unwrap_or_else(|e| e.into_inner());
    classes
        .get_or_insert_with(HashMap::new)
        .insert(index, cls.clone().unbind());
    Ok(index)
}

/// The Python class for an object type: the registered class of the type or its nearest
/// registered ancestor.
pub(crate) fn class_for(py: Python<'_>, type_index: i32) -> Option<Py<PyType>> {
    let classes = CLASSES.read().unwrap_or_else(|e| e.into_inner());
    let classes = classes.as_ref()?;
    if let Some(cls) = classes.get(&type_index) {
        return Some(cls.clone_ref(py));
    }
    reflection::ancestors_of(type_index)
        .rev()
        .find_map(|ancestor| classes.get(&ancestor).map(|c| c.clone_ref(py)))
}

/// Wraps an object value in its registered Python class (or `Object`).
pub(crate) fn wrap_object(py: Python<'_>, value: Any) -> PyResult<Py<PyAny>> {
    if let Some(cls) = class_for(py, value.type_index()) {
        let cls = cls.bind(py);
        let instance = cls.call_method1("__new__", (cls,))?;
        let base = instance.cast::<PyObjectRef>().map_err(|_| {
            PyTypeError::new_err(format!(
                "registered class {cls} does not derive from tvm.ffi.Object"
            ))
        })?;
        base.get().bind(value)?;
        return Ok(instance.unbind());
    }
    Ok(Py::new(py, PyObjectRef::from_any(value))?.into_any())
}
