//! Conversions between Python objects and runtime values.
//!
//! Every Python value takes one way, whichever entry it comes through (a call's arguments, a
//! container's items, an attribute, a callback's result): [`route`] reads it once by its type
//! (the plain built-ins by their exact type in [`plain`], with no lookup and no Python code;
//! wrapped runtime objects by a subtype check; any other type by a kind cached per type), and
//! the module of its route converts it: [`scalars`] (numbers, strings, bytes, dtypes, devices),
//! [`sequences`] (lists, tuples and dicts into arrays and maps, their items through
//! [`py_to_any`]) and [`objects`] (runtime objects, tensors and DLPack producers, callables,
//! opaque objects). A call whose arguments are all plain values, wrapped objects, numpy arrays
//! or callables takes the same reads on the raw interpreter calls of [`fast`]. [`to_python`]
//! converts the other way, and [`call`] runs a function on Python arguments.
//!
//! Arguments are converted into borrowed views wherever the Python object outlives the call
//! (ints, floats, `str` through its cached UTF-8 buffer, wrapped objects), so a call allocates
//! nothing for them; other arguments become temporaries owned for the duration of the call.

mod call;
mod fast;
mod ints;
mod objects;
mod plain;
mod scalars;
mod sequences;
mod temps;
mod to_python;

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{
    PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType,
};
use tvm_ffi::abi::TVMFFIAny;
use tvm_ffi::{Any, AnyView};

pub(crate) use call::call_function;
pub(crate) use fast::{
    call_without_args, plain_from_python, plain_to_python, set_object_type, try_call,
};
pub(crate) use ints::init as init_small_ints;
pub(crate) use objects::function_of;
pub(crate) use to_python::any_to_py;

use crate::device::PyDevice;
use crate::errors::raise_error;
use crate::objects::PyObjectRef;
use plain::Plain;
use temps::{Temporaries, keep};

/// The way a Python value converts, found once from its type.
enum Route<'a, 'py> {
    /// A plain built-in value, already read.
    Plain(Plain<'a>),
    /// A wrapped runtime object (`tvm.ffi.Object` and its subclasses: tensors, functions,
    /// containers, registered classes).
    Object(&'a Bound<'py, PyObjectRef>),
    /// A `numpy.ndarray`.
    NumpyArray,
    /// A `tvm.Device`.
    Device(&'a Bound<'py, PyDevice>),
    /// Any other type, by the kind cached for it.
    Other(Kind),
}

/// How values of the other Python types convert, decided once per type (types are few and
/// long-lived).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    NumpyArray,
    Device,
    Dtype,
    Str,
    Bytes,
    ByteArray,
    Sequence,
    Dict,
    Int,
    Float,
    Index,
    NumpyBool,
    NumpyFloat,
    DLPack,
    ObjectAttr,
    Callable,
    Opaque,
}

/// The route of a Python value: the plain built-ins by their exact type ([`plain::read`]), then
/// wrapped objects, then everything else (numpy arrays and devices included) by its cached kind.
#[inline(always)]
fn route<'a, 'py>(obj: &'a Bound<'py, PyAny>) -> PyResult<Route<'a, 'py>> {
    // SAFETY: `obj` is alive for `'a`, with its own type; the thread holds the interpreter lock
    // (`Bound`).
    if let Some(plain) = unsafe { plain::read(obj.as_ptr(), obj.get_type_ptr()) } {
        return Ok(Route::Plain(plain));
    }
    // A type check that, unlike a failed `cast`, makes no error object for the other types.
    if obj.is_instance_of::<PyObjectRef>() {
        // SAFETY: the object was just found to be an instance of `PyObjectRef`.
        return Ok(Route::Object(unsafe { obj.cast_unchecked() }));
    }
    Ok(match kind_of(obj.py(), obj)? {
        Kind::NumpyArray => Route::NumpyArray,
        // SAFETY: the kind of the object's type says it is a `PyDevice`.
        Kind::Device => Route::Device(unsafe { obj.cast_unchecked() }),
        kind => Route::Other(kind),
    })
}

/// The kind of the type of `obj`, worked out from scratch.
fn classify_type(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Kind> {
    let ty = obj.get_type();
    let has = |name: &Bound<'_, PyString>| ty.hasattr(name);
    Ok(if crate::dlpack::is_numpy_array(obj) {
        Kind::NumpyArray
    } else if obj.is_instance_of::<PyDevice>() {
        Kind::Device
    } else if crate::dtype::dtype_of(obj)?.is_some() {
        Kind::Dtype
    } else if obj.is_instance_of::<PyString>() {
        Kind::Str
    } else if obj.is_instance_of::<PyBytes>() {
        Kind::Bytes
    } else if obj.is_instance_of::<PyByteArray>() {
        Kind::ByteArray
    } else if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        Kind::Sequence
    } else if obj.is_instance_of::<PyDict>() {
        Kind::Dict
    } else if obj.is_instance_of::<PyInt>() {
        Kind::Int
    } else if obj.is_instance_of::<PyFloat>() {
        Kind::Float
    } else if has(pyo3::intern!(py, "__dlpack__"))?
        || has(pyo3::intern!(py, "__dlpack_c_exchange_api__"))?
    {
        Kind::DLPack
    } else if has(pyo3::intern!(py, "__tvm_ffi_object__"))? {
        Kind::ObjectAttr
    } else if let Some(kind) = numpy_scalar_kind(obj)? {
        kind
    } else if has(pyo3::intern!(py, "__index__"))? && !obj.is_callable() {
        Kind::Index
    } else if obj.is_callable() {
        Kind::Callable
    } else {
        Kind::Opaque
    })
}

/// numpy's bool and floating-point scalars convert like Python's `bool` and `float` (its integer
/// scalars already do, through `__index__`).
fn numpy_scalar_kind(obj: &Bound<'_, PyAny>) -> PyResult<Option<Kind>> {
    let ty = obj.get_type();
    if ty.module()?.to_str()? != "numpy" {
        return Ok(None);
    }
    let name = ty.name()?;
    let name = name.to_str()?;
    Ok(if name == "bool" || name == "bool_" {
        Some(Kind::NumpyBool)
    } else if matches!(
        name,
        "float16" | "float32" | "float64" | "longdouble" | "half" | "single" | "double"
    ) {
        Some(Kind::NumpyFloat)
    } else {
        None
    })
}

/// Hashes a type's address: addresses are aligned, so the low bits are mixed in from above.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    #[inline]
    fn write_usize(&mut self, address: usize) {
        self.write_u64(address as u64);
    }

    #[inline]
    fn write_u64(&mut self, value: u64) {
        let mixed = (self.0 ^ value).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = mixed ^ (mixed >> 32);
    }
}

/// Conversion kinds by type address; each entry keeps its type alive, so addresses stay unique.
/// Only touched with the interpreter lock held, which serializes every access.
struct KindCache(RefCell<KindMap>);

/// Types by address, each with its kind (and a reference that keeps it alive).
type KindMap = HashMap<usize, (Py<PyType>, Kind), BuildHasherDefault<AddressHasher>>;

// SAFETY: every access happens with the interpreter lock held (a `Python` token is required),
// so no two threads use the cell at once.
unsafe impl Sync for KindCache {}

/// The per-type cache of conversion kinds.
static CACHE: PyOnceLock<KindCache> = PyOnceLock::new();

/// The cached kind of a type, if it has been classified (no Python code runs).
#[inline]
fn cached_kind(py: Python<'_>, ty: *mut pyo3::ffi::PyTypeObject) -> Option<Kind> {
    let cache = CACHE.get(py)?;
    let cache = cache.0.try_borrow().ok()?;
    cache.get(&(ty as usize)).map(|(_, kind)| *kind)
}

/// The conversion kind of `obj`'s type, from the per-type cache.
fn kind_of(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Kind> {
    let cache = CACHE.get_or_init(py, || KindCache(RefCell::new(HashMap::default())));
    let key = obj.get_type_ptr() as usize;
    let cached = cache
        .0
        .try_borrow()
        .ok()
        .and_then(|c| c.get(&key).map(|(_, kind)| *kind));
    if let Some(kind) = cached {
        return Ok(kind);
    }
    // Classifying runs Python code (attribute lookups), which may convert values itself.
    let kind = classify_type(py, obj)?;
    if let Ok(mut cache) = cache.0.try_borrow_mut() {
        // A program that makes types without end gets no more entries than the bound.
        if cache.len() < 4096 {
            cache.insert(key, (obj.get_type().unbind(), kind));
        }
    }
    Ok(kind)
}

/// Converts a Python value into a view (borrowing `obj` or a temporary in `temps`).
fn py_to_view(obj: &Bound<'_, PyAny>, temps: &mut Temporaries) -> PyResult<TVMFFIAny> {
    view_of(route(obj)?, obj, temps)
}

/// Converts `obj`, of route `route`, into a view (borrowing `obj` or a temporary in `temps`).
fn view_of(
    route: Route<'_, '_>,
    obj: &Bound<'_, PyAny>,
    temps: &mut Temporaries,
) -> PyResult<TVMFFIAny> {
    match route {
        Route::Plain(Plain::Bytes(bytes)) => Ok(scalars::bytes(bytes, temps)),
        Route::Plain(plain) => plain
            .to_any()
            .map(|value| keep(temps, value))
            .map_err(|err| raise_error(obj.py(), err)),
        Route::Object(wrapped) => objects::wrapped(wrapped),
        Route::NumpyArray => objects::numpy_array(obj, temps),
        Route::Device(device) => Ok(scalars::device(device)),
        Route::Other(kind) => match kind {
            // Routed as `Route::NumpyArray` and `Route::Device` above.
            Kind::NumpyArray | Kind::Device => unreachable!("routed before"),
            Kind::Dtype => scalars::dtype(obj),
            Kind::Str => scalars::str(obj.cast()?, temps),
            Kind::Bytes => Ok(scalars::bytes(scalars::content(obj.cast()?), temps)),
            Kind::ByteArray => scalars::byte_array(obj, temps),
            Kind::Sequence => sequences::array(obj, temps),
            Kind::Dict => sequences::map(obj.cast()?, temps),
            Kind::Int => scalars::int(obj.cast()?),
            Kind::Float => Ok(scalars::float(obj.cast()?)),
            Kind::Index => scalars::index(obj),
            Kind::NumpyBool => scalars::numpy_bool(obj),
            Kind::NumpyFloat => scalars::numpy_float(obj),
            Kind::DLPack => objects::dlpack(obj, temps),
            Kind::ObjectAttr => objects::object_attr(obj, temps),
            Kind::Callable => Ok(temps.callable(obj)),
            Kind::Opaque => Ok(keep(
                temps,
                crate::opaque::opaque(obj).map_err(|err| raise_error(obj.py(), err))?,
            )),
        },
    }
}

/// Converts a Python value into an owning value: the entry of every value that is not a call's
/// argument (container items, attributes, callbacks' results). Plain values and wrapped objects
/// directly, the rest through a view of the route already found.
#[inline]
pub(crate) fn py_to_any(obj: &Bound<'_, PyAny>) -> PyResult<Any> {
    match route(obj)? {
        Route::Plain(plain) => plain.to_any().map_err(|err| raise_error(obj.py(), err)),
        // SAFETY: the raw value is a view of the wrapper's own object, which the copy takes a
        // new reference to.
        Route::Object(wrapped) => unsafe { AnyView::from_raw(objects::wrapped(wrapped)?) }
            .try_to_owned()
            .map_err(|e| raise_error(obj.py(), e)),
        other => {
            let mut temps = Temporaries::default();
            let raw = view_of(other, obj, &mut temps)?;
            // SAFETY: the view borrows `obj` or `temps`, both alive here (byte arrays point at
            // a box in `temps`).
            let view = unsafe { AnyView::from_raw(raw) };
            view.try_to_owned().map_err(|e| raise_error(obj.py(), e))
        }
    }
}
