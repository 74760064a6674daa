//! Conversions between Python objects and runtime values.
//!
//! Arguments are converted into borrowed views wherever the Python object outlives the call
//! (ints, floats, `str` through its cached UTF-8 buffer, wrapped objects), so a call allocates
//! nothing for them; other arguments become temporaries owned for the duration of the call.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::mem::MaybeUninit;

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple, PyType};
use tvm_ffi::abi::{self, TVMFFIAny, TVMFFIAnyPayload, TVMFFIByteArray};
use tvm_ffi::{Any, AnyView, Array, Function};

use crate::device::PyDevice;
use crate::errors::raise_error;
use crate::objects::{PyObjectRef, wrap_object};

/// Values that must live until a call returns. The first few live inline, so that a call with
/// a tensor or a list argument does not allocate for its bookkeeping.
pub(crate) struct Temporaries {
    inline: [MaybeUninit<Any>; INLINE_TEMPORARIES],
    inline_len: usize,
    owned: Vec<Any>,
    // Views point into the boxes, which must not move as the vector grows.
    #[allow(clippy::vec_box)]
    byte_arrays: Vec<Box<TVMFFIByteArray>>,
}

fn pod(type_index: i32, payload: TVMFFIAnyPayload) -> TVMFFIAny {
    TVMFFIAny {
        type_index,
        small_str_len: 0,
        payload,
    }
}

/// Keeps `value` alive in `temps` and returns a view of it.
const INLINE_TEMPORARIES: usize = 4;

impl Default for Temporaries {
    fn default() -> Temporaries {
        Temporaries {
            inline: [const { MaybeUninit::uninit() }; INLINE_TEMPORARIES],
            inline_len: 0,
            owned: Vec::new(),
            byte_arrays: Vec::new(),
        }
    }
}

impl Drop for Temporaries {
    fn drop(&mut self) {
        for value in &mut self.inline[..self.inline_len] {
            // SAFETY: the first `inline_len` slots were written by `keep` and drop once here.
            unsafe { value.assume_init_drop() };
        }
    }
}

fn keep(temps: &mut Temporaries, value: Any) -> TVMFFIAny {
    let raw = *value.as_raw();
    if temps.inline_len < INLINE_TEMPORARIES {
        temps.inline[temps.inline_len].write(value);
        temps.inline_len += 1;
    } else {
        temps.owned.push(value);
    }
    raw
}

fn overflow(obj: &Bound<'_, PyAny>) -> PyErr {
    let text = obj
        .str()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "?".into());
    PyOverflowError::new_err(format!("int {text} does not fit in 64 bits"))
}

/// Reads an exact or derived `int` as i64, or an `OverflowError` naming the value.
fn int_value(obj: &Bound<'_, PyAny>) -> PyResult<i64> {
    // SAFETY: `obj` is a valid object; errors are checked right after.
    let v = unsafe { ffi::PyLong_AsLongLong(obj.as_ptr()) };
    if v == -1 {
        if let Some(err) = PyErr::take(obj.py()) {
            if err.is_instance_of::<PyOverflowError>(obj.py()) {
                return Err(overflow(obj));
            }
            return Err(err);
        }
    }
    Ok(v)
}

/// Converts a Python value into a view (borrowing `obj` or a temporary in `temps`).
pub(crate) fn py_to_view(obj: &Bound<'_, PyAny>, temps: &mut Temporaries) -> PyResult<TVMFFIAny> {
    let py = obj.py();
    let ptr = obj.as_ptr();
    // SAFETY: reading the type pointer of a live object and comparing addresses of type objects.
    let ty = unsafe { ffi::Py_TYPE(ptr) };
    // SAFETY: taking the addresses of the interpreter's static type objects.
    unsafe {
        if ty == &raw mut ffi::PyLong_Type {
            return Ok(pod(
                abi::kTVMFFIInt,
                TVMFFIAnyPayload {
                    v_int64: int_value(obj)?,
                },
            ));
        }
        if ty == &raw mut ffi::PyFloat_Type {
            return Ok(pod(
                abi::kTVMFFIFloat,
                TVMFFIAnyPayload {
                    v_float64: ffi::PyFloat_AsDouble(ptr),
                },
            ));
        }
        if ty == &raw mut ffi::PyUnicode_Type {
            return str_view(obj, temps);
        }
        if ty == &raw mut ffi::PyBytes_Type {
            let mut data = std::ptr::null_mut();
            let mut size: ffi::Py_ssize_t = 0;
            // A bytes object always yields its buffer.
            ffi::PyBytes_AsStringAndSize(ptr, &mut data, &mut size);
            let bytes = std::slice::from_raw_parts(data.cast::<u8>(), size as usize);
            return Ok(bytes_view(bytes, temps));
        }
        if ptr == ffi::Py_None() {
            return Ok(TVMFFIAny::NONE);
        }
        if ty == &raw mut ffi::PyBool_Type {
            let v = i64::from(ptr == ffi::Py_True());
            return Ok(pod(abi::kTVMFFIBool, TVMFFIAnyPayload { v_int64: v }));
        }
    }
    if let Ok(wrapped) = obj.cast::<PyObjectRef>() {
        let value = wrapped.get().any();
        if value.is_none() {
            return Err(PyTypeError::new_err(format!(
                "{} instance is not bound to a runtime object",
                obj.get_type().name()?
            )));
        }
        return Ok(*value.as_raw());
    }
    if crate::dlpack::is_numpy_array(obj) {
        if let Some(tensor) = crate::dlpack::from_buffer(obj) {
            return Ok(keep(temps, tensor.into()));
        }
    }
    if let Ok(device) = obj.cast::<PyDevice>() {
        return Ok(pod(
            abi::kTVMFFIDevice,
            TVMFFIAnyPayload {
                v_device: device.get().0,
            },
        ));
    }
    slow_path(py, obj, temps)
}

/// An inline small value (at most 7 bytes; the tail stays zero).
fn small(type_index: i32, bytes: &[u8]) -> TVMFFIAny {
    let mut payload = [0u8; 8];
    payload[..bytes.len()].copy_from_slice(bytes);
    TVMFFIAny {
        type_index,
        small_str_len: bytes.len() as u32,
        payload: TVMFFIAnyPayload { v_bytes: payload },
    }
}

/// Bytes as an inline small value, or as a view of the Python object's buffer.
fn bytes_view(data: &[u8], temps: &mut Temporaries) -> TVMFFIAny {
    if data.len() <= tvm_ffi::string::MAX_SMALL_LEN {
        return small(abi::kTVMFFISmallBytes, data);
    }
    let array = Box::new(TVMFFIByteArray {
        data: data.as_ptr().cast(),
        size: data.len(),
    });
    let raw = pod(
        abi::kTVMFFIByteArrayPtr,
        TVMFFIAnyPayload {
            v_ptr: (&*array as *const TVMFFIByteArray).cast_mut().cast(),
        },
    );
    temps.byte_arrays.push(array);
    raw
}

fn str_view(obj: &Bound<'_, PyAny>, temps: &mut Temporaries) -> PyResult<TVMFFIAny> {
    let mut size: ffi::Py_ssize_t = 0;
    // SAFETY: `obj` is a str; the UTF-8 buffer is cached in it and NUL-terminated.
    let data = unsafe { ffi::PyUnicode_AsUTF8AndSize(obj.as_ptr(), &mut size) };
    if data.is_null() {
        return Err(PyErr::fetch(obj.py()));
    }
    // SAFETY: `data` holds `size` bytes.
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size as usize) };
    if bytes.len() <= tvm_ffi::string::MAX_SMALL_LEN {
        return Ok(small(abi::kTVMFFISmallStr, bytes));
    }
    if bytes.contains(&0) {
        // Embedded NULs cannot travel as a C string: copy into a string value.
        return Ok(keep(temps, tvm_ffi::String::from_bytes(bytes).into_any()));
    }
    Ok(pod(
        abi::kTVMFFIRawStr,
        TVMFFIAnyPayload {
            v_c_str: data as *const c_char,
        },
    ))
}

/// How values of one Python type convert, decided once per type (types are few and long-lived).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
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

fn classify(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Kind> {
    let ty = obj.get_type();
    let has = |name: &Bound<'_, PyString>| ty.hasattr(name);
    Ok(if crate::dtype::dtype_of(obj)?.is_some() {
        Kind::Dtype
    } else if obj.is_instance_of::<PyString>() {
        Kind::Str
    } else if obj.is_instance_of::<PyBytes>() {
        Kind::Bytes
    } else if obj.is_instance_of::<pyo3::types::PyByteArray>() {
        Kind::ByteArray
    } else if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        Kind::Sequence
    } else if obj.is_instance_of::<PyDict>() {
        Kind::Dict
    } else if obj.is_instance_of::<pyo3::types::PyInt>() {
        Kind::Int
    } else if obj.is_instance_of::<pyo3::types::PyFloat>() {
        Kind::Float
    } else if has(pyo3::intern!(py, "__dlpack__"))? {
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

/// Conversion kinds by type address; each entry keeps its type alive, so addresses stay unique.
/// Only touched with the interpreter lock held, which serializes every access.
struct KindCache(RefCell<HashMap<usize, (Py<PyType>, Kind)>>);

// SAFETY: every access happens with the interpreter lock held (a `Python` token is required),
// so no two threads use the cell at once.
unsafe impl Sync for KindCache {}

/// The conversion kind of `obj`'s type, from the per-type cache.
fn kind_of(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Kind> {
    static CACHE: PyOnceLock<KindCache> = PyOnceLock::new();
    let cache = CACHE.get_or_init(py, || KindCache(RefCell::new(HashMap::new())));
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
    let kind = classify(py, obj)?;
    if let Ok(mut cache) = cache.0.try_borrow_mut() {
        // A program that makes types without end gets no more entries than the bound.
        if cache.len() < 4096 {
            cache.insert(key, (obj.get_type().unbind(), kind));
        }
    }
    Ok(kind)
}

fn slow_path(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    temps: &mut Temporaries,
) -> PyResult<TVMFFIAny> {
    match kind_of(py, obj)? {
        Kind::Dtype => {
            let dl = crate::dtype::dtype_of(obj)?.expect("classified as dtype");
            let mut payload = TVMFFIAnyPayload { v_uint64: 0 };
            payload.v_dtype = dl;
            Ok(pod(abi::kTVMFFIDataType, payload))
        }
        Kind::Str => str_view(obj, temps),
        Kind::Bytes => Ok(bytes_view(obj.cast::<PyBytes>()?.as_bytes(), temps)),
        Kind::ByteArray => {
            let copy: Vec<u8> = obj.extract()?;
            Ok(keep(temps, tvm_ffi::Bytes::from(copy).into()))
        }
        Kind::Sequence => Ok(keep(temps, sequence_to_array(obj)?.into())),
        Kind::Dict => Ok(keep(
            temps,
            crate::containers::dict_to_map(obj.cast::<PyDict>()?)?,
        )),
        Kind::Int => Ok(pod(
            abi::kTVMFFIInt,
            TVMFFIAnyPayload {
                v_int64: int_value(obj)?,
            },
        )),
        Kind::Float => Ok(pod(
            abi::kTVMFFIFloat,
            TVMFFIAnyPayload {
                v_float64: obj.extract()?,
            },
        )),
        Kind::Index => {
            let index = obj.call_method0(pyo3::intern!(py, "__index__"))?;
            Ok(pod(
                abi::kTVMFFIInt,
                TVMFFIAnyPayload {
                    v_int64: int_value(&index)?,
                },
            ))
        }
        Kind::NumpyBool => Ok(pod(
            abi::kTVMFFIBool,
            TVMFFIAnyPayload {
                v_int64: i64::from(obj.is_truthy()?),
            },
        )),
        Kind::NumpyFloat => {
            let value = obj.call_method0(pyo3::intern!(py, "__float__"))?;
            Ok(pod(
                abi::kTVMFFIFloat,
                TVMFFIAnyPayload {
                    v_float64: value.extract()?,
                },
            ))
        }
        Kind::DLPack => Ok(keep(temps, crate::dlpack::from_dlpack_object(obj)?.into())),
        Kind::ObjectAttr => {
            let value = obj.getattr(pyo3::intern!(py, "__tvm_ffi_object__"))?;
            py_to_view(&value, temps)
        }
        Kind::Callable => Ok(keep(
            temps,
            crate::callback::callable_to_function(obj)?.into(),
        )),
        Kind::Opaque => Ok(keep(temps, opaque(obj)?)),
    }
}

unsafe extern "C" fn release_py_object(handle: *mut c_void) {
    tvm_ffi::boundary::ffi_boundary("the deleter of an opaque Python object", || {
        // After the interpreter has shut down the object is gone with it: nothing to release.
        let _ = Python::try_attach(|_py| {
            // SAFETY: the handle holds the strong reference taken in `opaque`.
            unsafe { ffi::Py_DecRef(handle.cast()) };
        });
    })
}

/// Wraps any Python object as an `ffi.OpaquePyObject` that gives the same object back.
pub(crate) fn opaque(obj: &Bound<'_, PyAny>) -> PyResult<Any> {
    let mut out = std::ptr::null_mut();
    // SAFETY: the new object takes one strong reference, released by `release_py_object`.
    let rc = unsafe {
        ffi::Py_IncRef(obj.as_ptr());
        abi::TVMFFIObjectCreateOpaque(
            obj.as_ptr().cast(),
            abi::kTVMFFIOpaquePyObject,
            Some(release_py_object),
            &mut out,
        )
    };
    if rc != 0 {
        // SAFETY: creation failed; give the reference back.
        unsafe { ffi::Py_DecRef(obj.as_ptr()) };
        return Err(raise_error(
            obj.py(),
            tvm_ffi::Error::take_raised_or("RuntimeError", "opaque"),
        ));
    }
    // SAFETY: a new owned object of index 74.
    Ok(unsafe {
        Any::from_raw(pod(
            abi::kTVMFFIOpaquePyObject,
            TVMFFIAnyPayload { v_obj: out.cast() },
        ))
    })
}

/// The Python object held by a value of type `ffi.OpaquePyObject`.
///
/// # Safety
/// `value` holds a live opaque Python object.
unsafe fn opaque_handle(value: &TVMFFIAny) -> *mut ffi::PyObject {
    // SAFETY: an opaque object keeps its PyObject* at offset 24, after the object header.
    unsafe {
        *value
            .payload
            .v_obj
            .cast::<u8>()
            .add(24)
            .cast::<*mut ffi::PyObject>()
    }
}

/// `__any_hash__` of opaque Python objects: the identity of the Python object.
unsafe extern "C" fn opaque_hash(value: *const TVMFFIAny) -> i64 {
    // SAFETY: the runtime calls the hook with a valid opaque value.
    unsafe { opaque_handle(&*value) as i64 }
}

/// `__any_equal__` of opaque Python objects: whether both hold the same Python object.
unsafe extern "C" fn opaque_equal(a: *const TVMFFIAny, b: *const TVMFFIAny) -> bool {
    // SAFETY: the runtime calls the hook with two valid opaque values.
    unsafe { opaque_handle(&*a) == opaque_handle(&*b) }
}

/// Makes the runtime compare and hash opaque Python objects by the object they hold, so the
/// same Python object wrapped twice is one map key and is found by `in`.
pub(crate) fn register_opaque_hooks(py: Python<'_>) -> PyResult<()> {
    let hooks = [
        ("__any_hash__", opaque_hash as *mut c_void),
        ("__any_equal__", opaque_equal as *mut c_void),
    ];
    for (name, hook) in hooks {
        let key = TVMFFIByteArray {
            data: name.as_ptr().cast(),
            size: name.len(),
        };
        let value = Any::from(hook);
        // SAFETY: valid pointers for the call; the runtime keeps its own copy of the value.
        let rc = unsafe {
            abi::TVMFFITypeRegisterAttr(abi::kTVMFFIOpaquePyObject, &key, value.as_raw())
        };
        if rc != 0 {
            return Err(raise_error(
                py,
                tvm_ffi::Error::take_raised_or("RuntimeError", name),
            ));
        }
    }
    Ok(())
}

/// Converts every item of a list or tuple into an array element.
/// One level of container nesting, counted against the interpreter's recursion limit: a list
/// that contains itself (or nesting deeper than the limit) is a `RecursionError`, not a crash.
pub(crate) struct NestingGuard(());

impl NestingGuard {
    pub(crate) fn enter(py: Python<'_>) -> PyResult<NestingGuard> {
        // SAFETY: the GIL is held; a non-zero result comes with a RecursionError set.
        if unsafe { ffi::Py_EnterRecursiveCall(c" while converting a nested container".as_ptr()) }
            != 0
        {
            return Err(PyErr::fetch(py));
        }
        Ok(NestingGuard(()))
    }
}

impl Drop for NestingGuard {
    fn drop(&mut self) {
        // SAFETY: pairs with the successful `Py_EnterRecursiveCall` of `enter`.
        unsafe { ffi::Py_LeaveRecursiveCall() };
    }
}

fn sequence_to_array(obj: &Bound<'_, PyAny>) -> PyResult<Array> {
    let _nesting = NestingGuard::enter(obj.py())?;
    let mut values = Vec::with_capacity(obj.len()?);
    for item in obj.try_iter()? {
        values.push(py_to_any(&item?)?);
    }
    Ok(Array::from_vec(values))
}

/// Converts a Python value into an owning value.
pub(crate) fn py_to_any(obj: &Bound<'_, PyAny>) -> PyResult<Any> {
    let mut temps = Temporaries::default();
    let raw = py_to_view(obj, &mut temps)?;
    // SAFETY: the view borrows `obj` or `temps`, both alive here.
    let view = unsafe { AnyView::from_raw(raw) };
    view.try_to_owned().map_err(|e| raise_error(obj.py(), e))
}

/// The function behind a Python value: a wrapped function or any callable.
pub(crate) fn function_of(obj: &Bound<'_, PyAny>) -> PyResult<Function> {
    if let Some(function) = crate::function_type::function_of(obj) {
        return Ok(function);
    }
    if !obj.is_callable() {
        return Err(PyTypeError::new_err(format!(
            "expected a function or callable, got {}",
            obj.repr()?
        )));
    }
    crate::callback::callable_to_function(obj)
}

/// Views handed to another thread while the interpreter lock is released.
struct SendViews<'a>(&'a [AnyView<'a>]);

// SAFETY: the views borrow values that stay alive (and untouched) until the call returns.
unsafe impl Send for SendViews<'_> {}

/// Calls `function` with (borrowed, live) Python arguments, releasing the interpreter lock during the call if
/// `release_gil`.
pub(crate) fn call_function(
    py: Python<'_>,
    function: &Function,
    args: &[*mut ffi::PyObject],
    release_gil: bool,
) -> PyResult<Any> {
    const STACK: usize = 8;
    let n = args.len();
    let mut temps = Temporaries::default();
    let mut stack = [TVMFFIAny::NONE; STACK];
    let mut heap = Vec::new();
    let slots: &mut [TVMFFIAny] = if n <= STACK {
        &mut stack[..n]
    } else {
        heap.resize(n, TVMFFIAny::NONE);
        &mut heap[..]
    };
    for (slot, item) in slots.iter_mut().zip(args) {
        // SAFETY: the caller lends live argument objects for the call.
        let item = unsafe { Bound::from_borrowed_ptr(py, *item) };
        *slot = py_to_view(&item, &mut temps)?;
    }
    // SAFETY: `AnyView` is a transparent `TVMFFIAny`; the views borrow `args` and `temps`.
    let views: &[AnyView<'_>] =
        unsafe { std::slice::from_raw_parts(slots.as_ptr().cast::<AnyView<'_>>(), n) };
    let result = if release_gil {
        let views = SendViews(views);
        py.detach(move || {
            let views = views;
            function.call_packed(views.0)
        })
    } else {
        function.call_packed(views)
    };
    drop(temps);
    result.map_err(|e| raise_error(py, e))
}

/// Converts a returned value into a Python object.
pub(crate) fn any_to_py(py: Python<'_>, value: Any) -> PyResult<Py<PyAny>> {
    let raw = *value.as_raw();
    // SAFETY: each arm reads the payload member its type index selects.
    unsafe {
        match raw.type_index {
            abi::kTVMFFINone => Ok(py.None()),
            abi::kTVMFFIInt => Ok(raw.payload.v_int64.into_pyobject(py)?.into_any().unbind()),
            abi::kTVMFFIBool => Ok(pyo3::types::PyBool::new(py, raw.payload.v_int64 != 0)
                .to_owned()
                .into_any()
                .unbind()),
            abi::kTVMFFIFloat => Ok(raw.payload.v_float64.into_pyobject(py)?.into_any().unbind()),
            abi::kTVMFFISmallStr | abi::kTVMFFIStr => {
                let bytes = tvm_ffi::string::bytes_of_any(&value).unwrap_or_default();
                // One decoding pass; bytes that are not UTF-8 survive as surrogate escapes.
                let text = ffi::PyUnicode_DecodeUTF8(
                    bytes.as_ptr().cast(),
                    bytes.len() as ffi::Py_ssize_t,
                    c"surrogateescape".as_ptr(),
                );
                Ok(Bound::from_owned_ptr_or_err(py, text)?.unbind())
            }
            abi::kTVMFFISmallBytes | abi::kTVMFFIBytes => {
                let bytes = tvm_ffi::string::bytes_of_any(&value).unwrap_or_default();
                Ok(PyBytes::new(py, bytes).into_any().unbind())
            }
            abi::kTVMFFIDataType => crate::dtype::make_dtype(py, raw.payload.v_dtype),
            abi::kTVMFFIDevice => Ok(Py::new(py, PyDevice(raw.payload.v_device))?.into_any()),
            abi::kTVMFFIOpaquePtr | abi::kTVMFFIDLTensorPtr => {
                let ctypes = py.import("ctypes")?;
                Ok(ctypes
                    .getattr("c_void_p")?
                    .call1((raw.payload.v_ptr as usize,))?
                    .unbind())
            }
            abi::kTVMFFIOpaquePyObject => {
                let cell = raw
                    .payload
                    .v_obj
                    .cast::<u8>()
                    .add(24)
                    .cast::<*mut ffi::PyObject>();
                Ok(Bound::from_borrowed_ptr(py, *cell).unbind())
            }
            abi::kTVMFFIFunction => {
                let f = value.cast::<Function>().map_err(|e| raise_error(py, e))?;
                crate::function_type::wrap(py, f)
            }
            abi::kTVMFFIError => {
                let err = value
                    .cast::<tvm_ffi::Error>()
                    .map_err(|e| raise_error(py, e))?;
                Ok(raise_error(py, err).into_value(py).into_any())
            }
            index if index >= abi::kTVMFFIStaticObjectBegin => {
                crate::containers::wrap_builtin(py, value)
                    .unwrap_or_else(|value| wrap_object(py, value))
            }
            other => Err(PyTypeError::new_err(format!(
                "cannot convert a value of type index {other}"
            ))),
        }
    }
}
