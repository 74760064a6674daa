//! `tvm.ffi.Function`: a heap type of its own (a subclass of the PyO3 class `Object`) whose
//! instances are called through vectorcall.
//!
//! A PyO3 class is called through `tp_call`: CPython packs the arguments into a tuple for every
//! call and PyO3 unpacks them again. Under the 3.11 limited API a class can still opt into
//! vectorcall when it is created from a spec, by naming a `__vectorcalloffset__` member and
//! setting `Py_TPFLAGS_HAVE_VECTORCALL`; the interpreter then hands the arguments over as an
//! array. This type does exactly that and nothing more: its instances are `Object` instances
//! (PyO3 allocates and frees the base part) followed by the fields below.

use std::ffi::{c_char, c_int, c_void};
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicUsize, Ordering};

use pyo3::exceptions::{PySystemError, PyTypeError};
use pyo3::ffi;
use pyo3::impl_::trampoline::{MethodDef, fastcall_cfunction_with_keywords};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyTuple, PyType};
use tvm_ffi::abi::TVMFFIObject;
use tvm_ffi::boundary::ffi_boundary;
use tvm_ffi::{Any, Function, ObjectRef};

use crate::convert::{any_to_py, call_function, call_without_args, try_call};
use crate::errors::{PyReturn, python_entry};
use crate::objects::PyObjectRef;

/// `Py_TPFLAGS_HAVE_VECTORCALL`: in the interpreter since 3.8, in the limited API's headers
/// since 3.12.
const HAVE_VECTORCALL: u64 = 1 << 11;

/// `PY_VECTORCALL_ARGUMENTS_OFFSET`: a flag bit in `nargsf`, not part of the count.
pub(crate) const ARGUMENTS_OFFSET: usize = 1 << (usize::BITS - 1);

/// A vectorcall function: the slot of vectorcall types, and `PyObject_Vectorcall` itself.
pub(crate) type VectorCall = unsafe extern "C" fn(
    *mut ffi::PyObject,
    *const *mut ffi::PyObject,
    usize,
    *mut ffi::PyObject,
) -> *mut ffi::PyObject;

/// The fields that follow the `Object` part of an instance.
#[repr(C)]
struct Fields {
    vectorcall: Option<VectorCall>,
    /// One strong reference to the function object.
    function: *mut TVMFFIObject,
    /// The instance dictionary (`__doc__`, `__signature__` set by `Module.get_function`).
    dict: *mut ffi::PyObject,
    release_gil: usize,
}

/// Where the fields start in an instance (copied from [`FunctionType`] for the fast path).
static FIELDS_OFFSET: AtomicUsize = AtomicUsize::new(0);

/// The type object and where the fields start in an instance.
struct FunctionType {
    ty: Py<PyType>,
    fields_offset: usize,
    base_dealloc: ffi::destructor,
    base_new: ffi::newfunc,
}

static TYPE: PyOnceLock<FunctionType> = PyOnceLock::new();

fn function_type(py: Python<'_>) -> &FunctionType {
    TYPE.get(py)
        .expect("tvm.ffi.Function is created when the native module loads")
}

/// # Safety
/// `obj` is an instance of the `Function` type.
unsafe fn fields<'a>(py: Python<'_>, obj: *mut ffi::PyObject) -> &'a mut Fields {
    let offset = function_type(py).fields_offset;
    // SAFETY: instances are `basicsize` bytes, the fields at `fields_offset`.
    unsafe { &mut *obj.cast::<u8>().add(offset).cast::<Fields>() }
}

/// The function of an instance, borrowed (no reference count change).
///
/// # Safety
/// `obj` is a live instance of the `Function` type.
unsafe fn borrowed_function(py: Python<'_>, obj: *mut ffi::PyObject) -> ManuallyDrop<Function> {
    // SAFETY: the instance owns one reference to a function object, borrowed here.
    unsafe {
        let raw = fields(py, obj).function;
        ManuallyDrop::new(Function::from_object(ObjectRef::from_raw(raw)))
    }
}

/// Calls the function of `callable` with borrowed argument objects.
///
/// # Safety
/// `callable` is a live instance; `args` holds `nargs` live objects.
unsafe fn call(
    py: Python<'_>,
    callable: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: usize,
) -> PyResult<*mut ffi::PyObject> {
    // SAFETY: per the contract.
    let fields = unsafe { fields(py, callable) };
    if fields.function.is_null() {
        // Only reachable by allocating through the base class's `__new__` by hand.
        return Err(PyTypeError::new_err(
            "this tvm.ffi.Function is not bound to a function",
        ));
    }
    // SAFETY: the instance owns one reference to a function object, borrowed here.
    let function =
        unsafe { ManuallyDrop::new(Function::from_object(ObjectRef::from_raw(fields.function))) };
    let release = fields.release_gil != 0;
    let args = if nargs == 0 {
        &[][..]
    } else {
        // SAFETY: per the contract.
        unsafe { std::slice::from_raw_parts(args, nargs) }
    };
    call_function(py, &function, args, release)
        .and_then(|v| any_to_py(py, v))
        .map(Py::into_ptr)
}

/// The error for keyword arguments, which functions do not take.
fn no_keywords() -> PyErr {
    PyTypeError::new_err("tvm.ffi.Function takes no keyword arguments")
}

/// The body of [`vectorcall`], entered through PyO3's own trampoline so that PyO3 knows the
/// thread holds the interpreter: Python objects released during the call (a callback made for
/// it, an exception replaced by a clearer one) are freed at once, not queued for PyO3's next
/// entry.
struct VectorcallBody;

impl MethodDef<fastcall_cfunction_with_keywords::Func> for VectorcallBody {
    const METH: fastcall_cfunction_with_keywords::Func = vectorcall_body;
}

/// # Safety
/// Called by the trampoline with the interpreter's vectorcall arguments.
unsafe fn vectorcall_body(
    py: Python<'_>,
    callable: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> PyResult<*mut ffi::PyObject> {
    Ok(python_entry(py, CALL, || {
        // SAFETY: `kwnames` is NULL or a tuple of keyword names.
        if !kwnames.is_null() && unsafe { ffi::PyTuple_Size(kwnames) } > 0 {
            return Err(no_keywords());
        }
        crate::stack::check("in a call of a tvm.ffi.Function")?;
        let nargs = nargsf as usize & !ARGUMENTS_OFFSET;
        // SAFETY: the interpreter passes `nargs` live arguments.
        unsafe { call(py, callable, args, nargs) }
    }))
}

/// The vectorcall slot: the fast path ([`crate::convert::try_call`]) where it applies, without
/// PyO3's entry trampoline (its attach count and the release of objects queued for it), and the
/// general path through the trampoline otherwise.
unsafe extern "C" fn vectorcall(
    callable: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: usize,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: the interpreter calls us with the GIL held.
    let py = unsafe { Python::assume_attached() };
    let call = RawCall {
        callable,
        args,
        nargsf,
        kwnames,
    };
    // A panic becomes an `InternalError` here instead of unwinding into the interpreter.
    ffi_boundary(CALL, || {
        // SAFETY: the interpreter's vectorcall arguments, as the slot receives them.
        PyReturn(unsafe { fast_or_general(py, call) })
    })
    .0
}

/// What a call is named in a panic's error.
const CALL: &str = "a call of a tvm.ffi.Function";

/// The arguments of a vectorcall, as the interpreter passes them.
#[derive(Clone, Copy)]
struct RawCall {
    callable: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: usize,
    kwnames: *mut ffi::PyObject,
}

/// # Safety
/// The interpreter's vectorcall arguments; the thread holds the interpreter lock.
#[inline(always)]
unsafe fn fast_or_general(py: Python<'_>, call: RawCall) -> *mut ffi::PyObject {
    // SAFETY: `callable` is a live instance; `args` holds `nargs` live objects; `kwnames` is NULL
    // or a tuple.
    unsafe {
        let offset = FIELDS_OFFSET.load(Ordering::Relaxed);
        let fields = &*call.callable.cast::<u8>().add(offset).cast::<Fields>();
        if call.kwnames.is_null() && !fields.function.is_null() && fields.release_gil == 0 {
            // No native-stack check here: the fast path runs no Python code of its own, so
            // recursion can only come back through a callback, which checks
            // (`crate::callback`).
            let function =
                ManuallyDrop::new(Function::from_object(ObjectRef::from_raw(fields.function)));
            let nargs = call.nargsf & !ARGUMENTS_OFFSET;
            if nargs == 0 {
                return call_without_args(&function);
            }
            let args = std::slice::from_raw_parts(call.args, nargs);
            if let Some(result) = try_call(py, &function, args) {
                return result;
            }
        }
        general(call)
    }
}

/// The general path of [`vectorcall`], through PyO3's trampoline (out of line: the fast path's
/// frame stays small).
///
/// # Safety
/// The interpreter's vectorcall arguments; the thread holds the interpreter lock.
#[inline(never)]
unsafe fn general(call: RawCall) -> *mut ffi::PyObject {
    // SAFETY: per the contract.
    unsafe {
        fastcall_cfunction_with_keywords::<VectorcallBody>(
            call.callable,
            call.args,
            call.nargsf as ffi::Py_ssize_t,
            call.kwnames,
        )
    }
}

unsafe extern "C" fn tp_call(
    callable: *mut ffi::PyObject,
    args: *mut ffi::PyObject,
    kwargs: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: the interpreter calls us with the GIL held.
    let py = unsafe { Python::assume_attached() };
    python_entry(py, "a call of a tvm.ffi.Function", || {
        // SAFETY: `args` is a tuple and `kwargs` NULL or a dict, both live for the call.
        unsafe {
            if !kwargs.is_null() && ffi::PyDict_Size(kwargs) > 0 {
                return Err(no_keywords());
            }
            let n = ffi::PyTuple_Size(args).max(0) as usize;
            let items: Vec<*mut ffi::PyObject> = (0..n)
                .map(|i| ffi::PyTuple_GetItem(args, i as ffi::Py_ssize_t))
                .collect();
            call(py, callable, items.as_ptr(), n)
        }
    })
}

unsafe extern "C" fn dealloc(obj: *mut ffi::PyObject) {
    // SAFETY: the interpreter deallocates with the GIL held.
    let py = unsafe { Python::assume_attached() };
    python_entry(py, "the deallocation of a tvm.ffi.Function", || {
        // SAFETY: called once for a dying instance; the base part is released by the base
        // class's deallocator afterwards.
        unsafe {
            let fields = fields(py, obj);
            if !fields.dict.is_null() {
                ffi::Py_DecRef(std::mem::replace(&mut fields.dict, std::ptr::null_mut()));
            }
            if !fields.function.is_null() {
                tvm_ffi::object::dec_ref(std::mem::replace(
                    &mut fields.function,
                    std::ptr::null_mut(),
                ));
            }
            (function_type(py).base_dealloc)(obj);
        }
        Ok(())
    })
}

unsafe extern "C" fn get_release_gil(
    obj: *mut ffi::PyObject,
    _closure: *mut c_void,
) -> *mut ffi::PyObject {
    // SAFETY: the interpreter calls getters with the GIL held.
    let py = unsafe { Python::assume_attached() };
    python_entry(py, "tvm.ffi.Function.release_gil", || {
        // SAFETY: a live instance.
        let value = unsafe { fields(py, obj).release_gil != 0 };
        Ok(pyo3::types::PyBool::new(py, value).to_owned().into_ptr())
    })
}

unsafe extern "C" fn set_release_gil(
    obj: *mut ffi::PyObject,
    value: *mut ffi::PyObject,
    _closure: *mut c_void,
) -> c_int {
    // SAFETY: the interpreter calls setters with the GIL held.
    let py = unsafe { Python::assume_attached() };
    python_entry(py, "tvm.ffi.Function.release_gil", || {
        if value.is_null() {
            return Err(PyTypeError::new_err("release_gil cannot be deleted"));
        }
        // SAFETY: a live instance and a live value.
        unsafe {
            let truth = ffi::PyObject_IsTrue(value);
            if truth < 0 {
                return Err(PyErr::fetch(py));
            }
            fields(py, obj).release_gil = truth as usize;
        }
        Ok(0)
    })
}

/// `Function(...)` from Python: functions come from the registry, modules or `convert`.
unsafe extern "C" fn refuse_new(
    _ty: *mut ffi::PyTypeObject,
    _args: *mut ffi::PyObject,
    _kwargs: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: the interpreter calls constructors with the GIL held.
    let py = unsafe { Python::assume_attached() };
    python_entry(py, "tvm.ffi.Function.__new__", || {
        Err(PyTypeError::new_err(
            "cannot create 'tvm.ffi.Function' instances directly; use tvm.ffi.convert(callable), \
             tvm.get_global_func(name) or a module's functions",
        ))
    })
}

unsafe extern "C" fn repr(obj: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: the interpreter calls `repr` with the GIL held.
    let py = unsafe { Python::assume_attached() };
    python_entry(py, "tvm.ffi.Function.__repr__", || {
        // SAFETY: a live instance.
        let text = format!("<tvm.ffi.Function {:p}>", unsafe {
            fields(py, obj).function
        });
        Ok(pyo3::types::PyString::new(py, &text).into_ptr())
    })
}

/// Creates the `Function` type as a subclass of `object_type` (called once, at module load).
pub(crate) fn create<'py>(
    py: Python<'py>,
    object_type: &Bound<'py, PyType>,
) -> PyResult<Bound<'py, PyType>> {
    let base_size: usize = object_type.getattr("__basicsize__")?.extract()?;
    let fields_offset = base_size.next_multiple_of(std::mem::align_of::<Fields>());
    let basicsize = fields_offset + std::mem::size_of::<Fields>();
    let leak = |s: &str| -> *const c_char {
        Box::leak(
            std::ffi::CString::new(s)
                .expect("no NUL")
                .into_boxed_c_str(),
        )
        .as_ptr()
    };
    let members: &'static mut [ffi::PyMemberDef] = Box::leak(Box::new([
        ffi::PyMemberDef {
            name: leak("__vectorcalloffset__"),
            type_code: ffi::Py_T_PYSSIZET,
            offset: fields_offset as ffi::Py_ssize_t,
            flags: ffi::Py_READONLY,
            doc: std::ptr::null(),
        },
        ffi::PyMemberDef {
            name: leak("__dictoffset__"),
            type_code: ffi::Py_T_PYSSIZET,
            offset: (fields_offset + std::mem::offset_of!(Fields, dict)) as ffi::Py_ssize_t,
            flags: ffi::Py_READONLY,
            doc: std::ptr::null(),
        },
        ffi::PyMemberDef::default(),
    ]));
    let getsets: &'static mut [ffi::PyGetSetDef] = Box::leak(Box::new([
        ffi::PyGetSetDef {
            name: leak("release_gil"),
            get: Some(get_release_gil),
            set: Some(set_release_gil),
            doc: leak(
                "Whether calls release the interpreter lock while native code runs (default False).",
            ),
            closure: std::ptr::null_mut(),
        },
        ffi::PyGetSetDef::default(),
    ]));
    let slots: &'static mut [ffi::PyType_Slot] = Box::leak(Box::new([
        ffi::PyType_Slot {
            slot: ffi::Py_tp_call,
            pfunc: tp_call as *mut c_void,
        },
        ffi::PyType_Slot {
            slot: ffi::Py_tp_dealloc,
            pfunc: dealloc as *mut c_void,
        },
        ffi::PyType_Slot {
            slot: ffi::Py_tp_repr,
            pfunc: repr as *mut c_void,
        },
        ffi::PyType_Slot {
            slot: ffi::Py_tp_new,
            pfunc: refuse_new as *mut c_void,
        },
        ffi::PyType_Slot {
            slot: ffi::Py_tp_members,
            pfunc: members.as_mut_ptr().cast(),
        },
        ffi::PyType_Slot {
            slot: ffi::Py_tp_getset,
            pfunc: getsets.as_mut_ptr().cast(),
        },
        ffi::PyType_Slot {
            slot: ffi::Py_tp_doc,
            pfunc: leak("A packed function: call it with positional arguments.")
                .cast_mut()
                .cast(),
        },
        ffi::PyType_Slot::default(),
    ]));
    let spec = Box::leak(Box::new(ffi::PyType_Spec {
        name: leak("tvm.ffi.Function"),
        basicsize: c_int::try_from(basicsize).expect("small type"),
        itemsize: 0,
        flags: (ffi::Py_TPFLAGS_DEFAULT | HAVE_VECTORCALL as std::ffi::c_ulong) as std::ffi::c_uint,
        slots: slots.as_mut_ptr(),
    }));
    let bases = PyTuple::new(py, [object_type])?;
    // SAFETY: a complete spec (leaked, so it outlives the type) and a tuple of bases.
    let ty = unsafe { ffi::PyType_FromSpecWithBases(spec, bases.as_ptr()) };
    // SAFETY: a new reference or NULL with an error set.
    let ty = unsafe { Bound::from_owned_ptr_or_err(py, ty)? }.cast_into::<PyType>()?;
    // SAFETY: the base type is live; its deallocator frees the base part of our instances.
    let base_dealloc =
        unsafe { ffi::PyType_GetSlot(object_type.as_type_ptr(), ffi::Py_tp_dealloc) };
    if base_dealloc.is_null() {
        return Err(PySystemError::new_err("tvm.ffi.Object has no deallocator"));
    }
    // SAFETY: the slot holds a destructor.
    let base_dealloc: ffi::destructor = unsafe { std::mem::transmute(base_dealloc) };
    // SAFETY: as above; the base's constructor allocates (at the subtype's size) and initializes
    // the base part of our instances.
    let base_new = unsafe { ffi::PyType_GetSlot(object_type.as_type_ptr(), ffi::Py_tp_new) };
    if base_new.is_null() {
        return Err(PySystemError::new_err("tvm.ffi.Object has no constructor"));
    }
    // SAFETY: the slot holds a constructor.
    let base_new: ffi::newfunc = unsafe { std::mem::transmute(base_new) };
    let created = FunctionType {
        ty: ty.clone().unbind(),
        fields_offset,
        base_dealloc,
        base_new,
    };
    TYPE.set(py, created)
        .map_err(|_| PySystemError::new_err("tvm.ffi.Function created twice"))?;
    FIELDS_OFFSET.store(fields_offset, Ordering::Relaxed);
    crate::convert::set_object_type(object_type.as_type_ptr());
    Ok(ty)
}

/// A new Python `Function` for `function`.
pub(crate) fn wrap(py: Python<'_>, function: Function) -> PyResult<Py<PyAny>> {
    let created = function_type(py);
    let empty = PyTuple::empty(py);
    // The base class allocates the instance (at our size) and initializes its own part.
    // SAFETY: the base constructor with our (sub)type and empty arguments.
    let instance = unsafe {
        let raw = (created.base_new)(
            created.ty.as_ptr().cast(),
            empty.as_ptr(),
            std::ptr::null_mut(),
        );
        Bound::from_owned_ptr_or_err(py, raw)?
    };
    let base = instance.cast::<PyObjectRef>()?;
    let raw = function.as_object().clone().into_raw();
    base.get().bind(Any::from(function))?;
    // SAFETY: a new instance of our type; the fields are zeroed by the allocator.
    unsafe {
        let fields = fields(py, instance.as_ptr());
        fields.vectorcall = Some(vectorcall);
        fields.function = raw;
    }
    Ok(instance.unbind())
}

/// The function behind a Python `Function`, if `obj` is one.
pub(crate) fn function_of(obj: &Bound<'_, PyAny>) -> Option<Function> {
    let py = obj.py();
    let ty = TYPE.get(py)?;
    if !obj.is_exact_instance(ty.ty.bind(py)) {
        return None;
    }
    // SAFETY: an instance of our type; the clone takes its own reference.
    let borrowed = unsafe { borrowed_function(py, obj.as_ptr()) };
    Some((*borrowed).clone())
}
