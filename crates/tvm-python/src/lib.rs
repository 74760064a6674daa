//! `tvm._native`: the PyO3 glue of the `tvm` package. It holds no state: the process state,
//! the runtime, the device registry and RPC live in `libtvm_ffi.so` (the `tvm-ffi-shared`
//! crate), which this extension links by SONAME and reaches through the C ABI and the global
//! functions the library registers. `tvm/base.py` loads that library first, into global scope.
//!
//! Python-facing behaviour that is easier to read in Python (exception classes, traceback
//! stitching, `dtype`) lives in `python/tvm`; this crate converts values and calls functions.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tvm_ffi::{Any, Array, Function};

mod callback;
mod containers;
mod convert;
mod dataclasses;
mod device;
mod dlpack;
mod dtype;
mod errors;
mod exit_gate;
mod function_type;
mod gil_holder;
mod ml_dtypes;
mod objects;
mod opaque;
mod refcount;
mod runtime_calls;
mod shared_walks;
mod stack;
mod tensor;
mod tensor_exchange;

use convert::{any_to_py, function_of, py_to_any};

/// The global function `name`, or None.
#[pyfunction]
fn get_global_func(py: Python<'_>, name: &str) -> PyResult<Option<Py<PyAny>>> {
    Function::get_global(name)
        .map(|f| function_type::wrap(py, f))
        .transpose()
}

/// Registers a function (or any callable) as the global `name`, with its documentation and
/// metadata JSON (`{"type_schema": ...}`) when given.
#[pyfunction]
#[pyo3(signature = (name, func, allow_override = false, doc = "", metadata = ""))]
fn register_global_func(
    py: Python<'_>,
    name: &str,
    func: &Bound<'_, PyAny>,
    allow_override: bool,
    doc: &str,
    metadata: &str,
) -> PyResult<()> {
    let function = function_of(func)?;
    let registered = if doc.is_empty() && metadata.is_empty() {
        function.register_global(name, allow_override)
    } else {
        function.register_global_documented(name, doc, metadata, allow_override)
    };
    registered.map_err(|e| errors::raise_error(py, e))
}

/// Removes the global `name`; whether it existed.
#[pyfunction]
fn remove_global_func(py: Python<'_>, name: &str) -> PyResult<bool> {
    Function::remove_global(name).map_err(|e| errors::raise_error(py, e))
}

/// The names of all global functions.
#[pyfunction]
fn list_global_func_names(py: Python<'_>) -> PyResult<Vec<String>> {
    Function::list_global_names().map_err(|e| errors::raise_error(py, e))
}

/// Converts a Python value into its runtime form (and back into Python).
#[pyfunction(name = "convert")]
fn convert_value(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    any_to_py(py, py_to_any(value)?)
}

/// The type index registered for a type key, or a `ValueError` naming it.
#[pyfunction]
fn type_key_to_index(key: &str) -> PyResult<i32> {
    tvm_ffi::types::type_key_to_index(key)
        .map_err(|e| PyValueError::new_err(e.message().into_owned()))
}

/// The frames of this glue, of PyO3 and of the interpreter, as backtraces should see them: the
/// wrappers are hidden, and capture stops where the interpreter begins. The lists are, in
/// order, symbol prefixes, symbol fragments, crates, file fragments and boundaries
/// (`ffi.Backtrace.RegisterFrameFilter`).
const PYTHON_FRAMES: [&[&str]; 5] = [
    &["_native::", "pyo3::", "pyo3_ffi::"],
    &["::__pymethod_"],
    &["pyo3"],
    &["/tvm-python/src/"],
    &[
        "_Py*",
        "PyObject_*",
        "PyVectorcall_*",
        "PyEval_*",
        "slot_tp_call",
        "do_call_core",
        "cfunction_*",
        "method_vectorcall*",
    ],
];

/// Hands [`PYTHON_FRAMES`] to the library's backtraces.
fn register_frame_filter() -> tvm_ffi::Result<()> {
    let [a, b, c, d, e] =
        PYTHON_FRAMES.map(|list| list.iter().map(|text| Any::from(*text)).collect::<Array>());
    Function::get_global_required("ffi.Backtrace.RegisterFrameFilter")?.call((a, b, c, d, e))?;
    Ok(())
}

/// The device backends compiled into the runtime library, for `tvm.support.libinfo`.
fn compiled_device_backends() -> tvm_ffi::Result<Vec<String>> {
    let names: Array = Function::get_global_required("runtime.CompiledDeviceBackends")?
        .call(())?
        .cast()?;
    names.iter().map(|name| name.cast()).collect()
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // The library registered everything when it was loaded; this reports a failure of that.
    Function::get_global_required("runtime.LibraryLoadStatus")
        .and_then(|status| status.call(()))
        .map_err(|e| errors::raise_error(py, e))?;
    register_frame_filter().map_err(|e| errors::raise_error(py, e))?;
    let backends = compiled_device_backends().map_err(|e| errors::raise_error(py, e))?;
    m.add("_device_backends", backends)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    opaque::register_hooks().map_err(|e| errors::raise_error(py, e))?;
    callback::find_vectorcall();
    exit_gate::install(py);
    // SAFETY: module initialization runs with the interpreter lock held.
    unsafe { convert::init_small_ints() };
    m.add_class::<objects::PyObjectRef>()?;
    let object_type = m.getattr("Object")?.cast_into::<pyo3::types::PyType>()?;
    m.add("Function", function_type::create(m.py(), &object_type)?)?;
    m.add_class::<containers::PyArray>()?;
    m.add_class::<containers::PyListObj>()?;
    m.add_class::<containers::PyMap>()?;
    m.add_class::<containers::PyDictObj>()?;
    m.add_class::<containers::PyShape>()?;
    m.add_class::<tensor::PyTensor>()?;
    let tensor_type = m.getattr("Tensor")?.cast_into()?;
    dlpack::install_fast_dlpack(&tensor_type)?;
    tensor_exchange::install(&tensor_type)?;
    m.add_class::<device::PyDevice>()?;
    m.add_function(wrap_pyfunction!(get_global_func, m)?)?;
    m.add_function(wrap_pyfunction!(register_global_func, m)?)?;
    m.add_function(wrap_pyfunction!(remove_global_func, m)?)?;
    m.add_function(wrap_pyfunction!(list_global_func_names, m)?)?;
    m.add_function(wrap_pyfunction!(convert_value, m)?)?;
    m.add_function(wrap_pyfunction!(type_key_to_index, m)?)?;
    tensor::add_from_dlpack(m)?;
    m.add_function(wrap_pyfunction!(dlpack::_numpy_arrays_read_directly, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::empty, m)?)?;
    m.add_function(wrap_pyfunction!(objects::_register_object_class, m)?)?;
    m.add_function(wrap_pyfunction!(objects::_object_get_field, m)?)?;
    m.add_function(wrap_pyfunction!(objects::_type_field_names, m)?)?;
    m.add_function(wrap_pyfunction!(objects::_type_fields, m)?)?;
    m.add_function(wrap_pyfunction!(dataclasses::_define_object_type, m)?)?;
    m.add_function(wrap_pyfunction!(dataclasses::_init_object, m)?)?;
    m.add_function(wrap_pyfunction!(dataclasses::_object_set_field, m)?)?;
    m.add_function(wrap_pyfunction!(dataclasses::_define_enum_type, m)?)?;
    m.add_function(wrap_pyfunction!(dataclasses::_add_enum_entry, m)?)?;
    m.add_function(wrap_pyfunction!(dataclasses::_shallow_copy, m)?)?;
    m.add_function(wrap_pyfunction!(errors::_set_error_hooks, m)?)?;
    m.add_function(wrap_pyfunction!(dtype::_register_dtype_class, m)?)?;
    m.add_function(wrap_pyfunction!(dtype::_parse_dtype, m)?)?;
    Ok(())
}
