//! numpy arrays as tensors sharing their memory, without the producer's DLPack machinery. An
//! array is read from numpy's own structs (the heads of `PyArrayObject_fields` and
//! `PyArray_Descr`, the same in numpy 1.x and 2.x) once that reading has been checked in this
//! process against numpy's buffer export of the same arrays; an array the struct does not
//! describe goes through the buffer protocol, and one neither describes through `__dlpack__`
//! (the caller's fallback).

use std::ffi::{CStr, c_char, c_int, c_long, c_void};

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PySlice;
use tvm_ffi::Tensor;
use tvm_ffi::abi::{self, DLDataType, DLTensor};
use tvm_ffi::boundary::ffi_boundary;

/// Arrays with more dimensions go through `__dlpack__`.
const MAX_DIMS: usize = 16;

// numpy's `npy_intp` dims and `Py_ssize_t` buffer dims are read as DLPack's `int64_t`.
const _: () = assert!(size_of::<isize>() == size_of::<i64>());

/// The head of numpy's `PyArrayObject_fields`: the fields up to `flags` have kept their order
/// and types since numpy 1.7 (later versions appended fields after them).
#[repr(C)]
struct ArrayHead {
    ob_base: ffi::PyObject,
    data: *mut c_void,
    nd: c_int,
    dimensions: *const isize,
    strides: *const isize,
    base: *mut ffi::PyObject,
    descr: *const DescrHead,
    flags: c_int,
}

/// The head of numpy's `PyArray_Descr`: the fields up to `type_num` are the same in numpy 1.x
/// and 2.x (2.x widened the ones after it).
#[repr(C)]
struct DescrHead {
    ob_base: ffi::PyObject,
    typeobj: *mut ffi::PyTypeObject,
    kind: c_char,
    type_char: c_char,
    byteorder: c_char,
    flags: c_char,
    type_num: c_int,
}

/// `NPY_ARRAY_WRITEABLE`.
const WRITEABLE: u32 = 0x0400;
/// `NPY_ARRAY_WARN_ON_WRITE` (numpy-internal, the same bit in 1.x and 2.x): numpy warns when
/// such an array (an output of `broadcast_arrays`) is written, and its buffer export calls the
/// array read-only; so does the struct reading, so that both ways give the same tensor.
const WARN_ON_WRITE: u32 = 1 << 31;

/// The DLPack element type of numpy type number `type_num` (numpy's `NPY_TYPES`, part of its C
/// ABI), for the types DLPack describes exactly: not `longdouble` (padded, not IEEE), object,
/// string, structured or user types.
fn element_type(type_num: c_int) -> Option<DLDataType> {
    let c_bits = |bytes: usize| (bytes * 8) as u8;
    let (code, bits) = match type_num {
        0 => (abi::kDLBool, 8),
        1 => (abi::kDLInt, 8),
        2 => (abi::kDLUInt, 8),
        3 => (abi::kDLInt, 16),
        4 => (abi::kDLUInt, 16),
        5 => (abi::kDLInt, c_bits(size_of::<c_int>())),
        6 => (abi::kDLUInt, c_bits(size_of::<c_int>())),
        7 => (abi::kDLInt, c_bits(size_of::<c_long>())),
        8 => (abi::kDLUInt, c_bits(size_of::<c_long>())),
        9 => (abi::kDLInt, 64),
        10 => (abi::kDLUInt, 64),
        11 => (abi::kDLFloat, 32),
        12 => (abi::kDLFloat, 64),
        14 => (abi::kDLComplex, 64),
        15 => (abi::kDLComplex, 128),
        23 => (abi::kDLFloat, 16),
        _ => return None,
    };
    Some(DLDataType {
        code,
        bits,
        lanes: 1,
    })
}

/// Whether a descriptor's byte order character means this machine's order (`|`: one byte).
fn native_byte_order(byteorder: c_char) -> bool {
    let native = if cfg!(target_endian = "little") {
        b'<'
    } else {
        b'>'
    };
    let byteorder = byteorder as u8;
    byteorder == b'=' || byteorder == b'|' || byteorder == native
}

/// The DLPack data type of a buffer format string (native byte order only).
fn buffer_dtype(format: &[u8], itemsize: isize) -> Option<DLDataType> {
    let format = match format {
        [b'@' | b'=' | b'<', rest @ ..] if cfg!(target_endian = "little") => rest,
        [b'@' | b'=', rest @ ..] => rest,
        other => other,
    };
    let (code, bits) = match format {
        b"?" => (abi::kDLBool, 8),
        b"b" | b"h" | b"i" | b"l" | b"q" | b"n" => (abi::kDLInt, itemsize * 8),
        b"B" | b"H" | b"I" | b"L" | b"Q" | b"N" => (abi::kDLUInt, itemsize * 8),
        b"e" | b"f" | b"d" => (abi::kDLFloat, itemsize * 8),
        b"Zf" | b"Zd" => (abi::kDLComplex, itemsize * 8),
        _ => return None,
    };
    Some(DLDataType {
        code,
        bits: u8::try_from(bits).ok()?,
        lanes: 1,
    })
}

/// What an array's struct or buffer view says of it, borrowing its shape and strides.
#[derive(Debug, PartialEq)]
struct HostArray<'a> {
    data: *mut c_void,
    /// The element type, when DLPack describes it in this machine's byte order.
    dtype: Option<DLDataType>,
    shape: &'a [i64],
    byte_strides: &'a [i64],
    read_only: bool,
}

impl HostArray<'_> {
    /// The DLPack descriptor of the array (CPU memory), its strides in elements written to
    /// `strides`; `None` for an element type DLPack does not describe or a stride that is not a
    /// whole number of elements.
    fn descriptor(&self, strides: &mut [i64; MAX_DIMS]) -> Option<DLTensor> {
        let dtype = self.dtype?;
        let itemsize = i64::from(dtype.bits / 8);
        if itemsize == 0 || self.byte_strides.iter().any(|s| s % itemsize != 0) {
            return None;
        }
        for (element, bytes) in strides.iter_mut().zip(self.byte_strides) {
            *element = bytes / itemsize;
        }
        Some(DLTensor {
            data: self.data,
            device: abi::DLDevice {
                device_type: abi::kDLCPU,
                device_id: 0,
            },
            ndim: self.shape.len() as i32,
            dtype,
            shape: self.shape.as_ptr().cast_mut(),
            strides: if self.shape.is_empty() {
                std::ptr::null_mut()
            } else {
                strides.as_mut_ptr()
            },
            byte_offset: 0,
        })
    }
}

/// `ndim` dimensions at `ptr` (none for a scalar; `None` for a null pointer).
///
/// # Safety
/// A non-null `ptr` points to `ndim` values that outlive `'a`.
unsafe fn dims<'a>(ptr: *const isize, ndim: usize) -> Option<&'a [i64]> {
    match ndim {
        0 => Some(&[]),
        _ if ptr.is_null() => None,
        // SAFETY: per the contract; `isize` is `i64` on the 64-bit targets this builds for.
        _ => Some(unsafe { std::slice::from_raw_parts(ptr.cast::<i64>(), ndim) }),
    }
}

/// Reads the structs of `array`; `None` past [`MAX_DIMS`] dimensions.
///
/// # Safety
/// `array` is a live object of exactly numpy's `ndarray` type, laid out as [`ArrayHead`] (what
/// [`struct_is_readable`] confirms); the interpreter lock is held for `'a`.
unsafe fn read_struct<'a>(array: *mut ffi::PyObject) -> Option<HostArray<'a>> {
    // SAFETY: per the contract, `array` points to an `ArrayHead` and its descriptor to a
    // `DescrHead`; numpy keeps `nd` dimensions and strides for the array's life.
    unsafe {
        let head = &*array.cast::<ArrayHead>();
        let ndim = usize::try_from(head.nd).ok().filter(|&n| n <= MAX_DIMS)?;
        let descr = head.descr.as_ref()?;
        Some(HostArray {
            data: head.data,
            dtype: element_type(descr.type_num).filter(|_| native_byte_order(descr.byteorder)),
            shape: dims(head.dimensions, ndim)?,
            byte_strides: dims(head.strides, ndim)?,
            read_only: head.flags as u32 & WRITEABLE == 0 || head.flags as u32 & WARN_ON_WRITE != 0,
        })
    }
}

/// A strided, read-only buffer view of an object, released when dropped.
struct BufferView(ffi::Py_buffer);

impl BufferView {
    /// The view of `obj`, or `None` (its error cleared) when it exports none.
    fn get(obj: &Bound<'_, PyAny>) -> Option<Self> {
        // SAFETY: a zeroed Py_buffer is what PyObject_GetBuffer expects to fill.
        let mut view: ffi::Py_buffer = unsafe { std::mem::zeroed() };
        // SAFETY: a live object and a writable view; on failure the error is cleared below.
        if unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), &mut view, ffi::PyBUF_RECORDS_RO) } != 0 {
            drop(PyErr::take(obj.py()));
            return None;
        }
        Some(Self(view))
    }

    /// What the view says of its exporter; `None` past [`MAX_DIMS`] dimensions or where a
    /// filled view lacks its format, shape or strides.
    fn array(&self) -> Option<HostArray<'_>> {
        let view = &self.0;
        let ndim = usize::try_from(view.ndim).ok().filter(|&n| n <= MAX_DIMS)?;
        if view.format.is_null() {
            return None;
        }
        // SAFETY: a view filled with RECORDS_RO holds a format string and `ndim` shape and
        // stride entries, valid until it is released (after `self`'s borrow ends).
        unsafe {
            let format = CStr::from_ptr(view.format).to_bytes();
            Some(HostArray {
                data: view.buf,
                dtype: buffer_dtype(format, view.itemsize),
                shape: dims(view.shape, ndim)?,
                byte_strides: dims(view.strides, ndim)?,
                read_only: view.readonly != 0,
            })
        }
    }

    /// The view, no longer released on drop.
    fn into_raw(self) -> ffi::Py_buffer {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: read once out of a value that is never dropped.
        unsafe { std::ptr::read(&this.0) }
    }
}

impl Drop for BufferView {
    fn drop(&mut self) {
        // SAFETY: the view was filled by `get` and is released once.
        unsafe { ffi::PyBuffer_Release(&mut self.0) };
    }
}

/// Whether numpy's structs can be read directly in this process: checked once, on two arrays (a
/// strided writable one and a read-only one) whose structs must say exactly what numpy's buffer
/// export says of them. numpy is loaded: the caller holds one of its arrays.
fn struct_is_readable(py: Python<'_>) -> bool {
    static READABLE: PyOnceLock<bool> = PyOnceLock::new();
    *READABLE.get_or_init(py, || {
        known_layout(py).unwrap_or(false)
            && probe_arrays(py).is_ok_and(|arrays| arrays.iter().all(struct_matches_buffer))
    })
}

/// Whether the loaded numpy is a version whose array struct starts as [`ArrayHead`] (1.x or
/// 2.x) and whose arrays are at least that large, so that the check reads inside them.
fn known_layout(py: Python<'_>) -> PyResult<bool> {
    let numpy = py.import("numpy")?;
    let version: String = numpy.getattr("__version__")?.extract()?;
    let major = version.split('.').next().unwrap_or_default();
    let size: usize = numpy
        .getattr("ndarray")?
        .getattr("__basicsize__")?
        .extract()?;
    Ok(matches!(major, "1" | "2") && size >= size_of::<ArrayHead>())
}

/// The arrays [`struct_is_readable`] checks: `zeros((3, 4), "int16")[:, ::2].T` (strided, not
/// contiguous) and a read-only `arange(5.0)`.
fn probe_arrays(py: Python<'_>) -> PyResult<[Bound<'_, PyAny>; 2]> {
    let numpy = py.import("numpy")?;
    let strided = numpy
        .call_method1("zeros", ((3, 4), "int16"))?
        .get_item((PySlice::full(py), PySlice::new(py, 0, 4, 2)))?
        .getattr("T")?;
    let read_only = numpy.call_method1("arange", (5.0,))?;
    read_only.call_method1("setflags", (false,))?;
    Ok([strided, read_only])
}

/// Whether the structs of numpy array `array` say what its buffer export says.
fn struct_matches_buffer(array: &Bound<'_, PyAny>) -> bool {
    if !is_numpy_array(array) {
        return false;
    }
    let Some(view) = BufferView::get(array) else {
        return false;
    };
    let Ok(descr) = array.getattr(pyo3::intern!(array.py(), "dtype")) else {
        return false;
    };
    // SAFETY: the head lies inside the array (`known_layout` checked the type's size); only its
    // scalar fields and the descriptor's address are read, before any pointer is followed.
    let head = unsafe { &*array.as_ptr().cast::<ArrayHead>() };
    if head.data != view.0.buf || head.nd != view.0.ndim || head.descr.cast() != descr.as_ptr() {
        return false;
    }
    // SAFETY: `array` is exactly an ndarray whose data, dimension count and descriptor are
    // where `ArrayHead` says (`ndarray.dtype` is the descriptor itself); the rest is checked
    // against the view.
    let read = unsafe { read_struct(array.as_ptr()) };
    let exported = view.array();
    read.is_some() && read == exported && exported.is_some_and(|a| a.dtype.is_some())
}

/// Whether `obj` is exactly a numpy array (whose buffer export matches its DLPack export).
pub(crate) fn is_numpy_array(obj: &Bound<'_, PyAny>) -> bool {
    static NDARRAY: PyOnceLock<usize> = PyOnceLock::new();
    let py = obj.py();
    let ty = obj.get_type_ptr() as usize;
    if let Some(ndarray) = NDARRAY.get(py) {
        return ty == *ndarray;
    }
    // Named so, and then the very type numpy's module holds (not a lookalike).
    let ty_obj = obj.get_type();
    let named_so =
        ty_obj.name().is_ok_and(|n| n == "ndarray") && ty_obj.module().is_ok_and(|m| m == "numpy");
    if !named_so || loaded_ndarray_type(py) != Some(ty) {
        return false;
    }
    // The type object lives as long as numpy is loaded, which is the process.
    let _ = NDARRAY.set(py, ty);
    true
}

/// The address of `numpy.ndarray` if numpy is loaded.
fn loaded_ndarray_type(py: Python<'_>) -> Option<usize> {
    let modules = py
        .import("sys")
        .and_then(|sys| sys.getattr("modules"))
        .ok()?;
    let numpy = modules.get_item("numpy").ok()?;
    let ndarray = numpy.getattr("ndarray").ok()?;
    Some(ndarray.as_ptr() as usize)
}

/// A tensor sharing the memory of `array`, exactly a numpy array ([`is_numpy_array`]): the
/// same zero-copy view as its DLPack export (CPU memory, shape, strides, read-only flag).
/// `None` when neither numpy's struct nor its buffer describe a DLPack tensor (the caller then
/// tries `__dlpack__`).
pub(crate) fn from_numpy_array(array: &Bound<'_, PyAny>) -> Option<Tensor> {
    if struct_is_readable(array.py()) {
        // SAFETY: exactly an ndarray, laid out as checked; the lock is held.
        let read = unsafe { read_struct(array.as_ptr()) };
        let mut strides = [0i64; MAX_DIMS];
        if let Some((read, prototype)) =
            read.and_then(|read| Some((read.read_only, read.descriptor(&mut strides)?)))
        {
            // SAFETY: the array is live and the lock held; the tensor owns this reference.
            unsafe { crate::refcount::incref(array.as_ptr()) };
            // SAFETY: the array keeps its memory, shape and strides while the tensor holds it.
            return unsafe { share_with_exporter(&prototype, read, array.as_ptr()) };
        }
    }
    from_buffer(array)
}

/// [`from_numpy_array`] through the buffer protocol.
fn from_buffer(array: &Bound<'_, PyAny>) -> Option<Tensor> {
    let view = BufferView::get(array)?;
    let mut strides = [0i64; MAX_DIMS];
    let exported = view.array()?;
    let read_only = exported.read_only;
    let prototype = exported.descriptor(&mut strides)?;
    let mut view = view.into_raw();
    if releases_nothing(view.obj) {
        // Releasing such a view only drops its reference to the exporter: the tensor keeps that
        // reference alone (8 bytes instead of the 80 of the view), and the exporter keeps the
        // memory, shape and strides the view described for as long as it lives.
        // SAFETY: as just said; the view's reference passes to the tensor.
        return unsafe { share_with_exporter(&prototype, read_only, view.obj) };
    }
    // SAFETY: the view is plain data that may move (its exporter keeps its own state); the
    // tensor copies it and releases the copy once; on failure `from_foreign` releases it.
    unsafe {
        let record = std::slice::from_raw_parts_mut(
            (&raw mut view).cast::<u8>(),
            std::mem::size_of::<ffi::Py_buffer>(),
        );
        Tensor::from_foreign(&prototype, read_only, record, release_buffer).ok()
    }
}

/// A tensor over `prototype` that owns the reference `exporter` (released when the tensor goes,
/// or at once if this fails).
///
/// # Safety
/// `exporter` keeps the memory, shape and strides `prototype` describes while it lives.
unsafe fn share_with_exporter(
    prototype: &DLTensor,
    read_only: bool,
    exporter: *mut ffi::PyObject,
) -> Option<Tensor> {
    let mut exporter = exporter.cast::<c_void>();
    // SAFETY: per the contract; the record is the exporter's reference, dropped once.
    unsafe {
        let record = std::slice::from_raw_parts_mut(
            (&raw mut exporter).cast::<u8>(),
            std::mem::size_of::<*mut c_void>(),
        );
        Tensor::from_foreign(prototype, read_only, record, release_exporter).ok()
    }
}

/// Whether the exporter `obj` of a view does nothing when the view is released (its type has no
/// `bf_releasebuffer`, as numpy's `ndarray`), so that `PyBuffer_Release` is just a `Py_DECREF`.
fn releases_nothing(obj: *mut ffi::PyObject) -> bool {
    // SAFETY: `obj` is null or the live exporter a filled view holds a reference to; reading a
    // slot of a type is allowed for static types since Python 3.10.
    !obj.is_null()
        && unsafe { ffi::PyType_GetSlot(ffi::Py_TYPE(obj), ffi::Py_bf_releasebuffer) }.is_null()
}

unsafe extern "C" fn release_buffer(ctx: *mut c_void) {
    ffi_boundary(
        "the buffer release of a tensor imported from Python",
        || {
            // After the interpreter has shut down the exporter is gone with it: nothing to release.
            let _ = Python::try_attach(|_py| {
                // SAFETY: `ctx` is the tensor's copy of the view filled by `PyObject_GetBuffer`,
                // released once.
                unsafe { ffi::PyBuffer_Release(ctx.cast::<ffi::Py_buffer>()) };
            });
        },
    )
}

unsafe extern "C" fn release_exporter(ctx: *mut c_void) {
    ffi_boundary(
        "the release of the exporter of a tensor imported from Python",
        || {
            // After the interpreter has shut down the exporter is gone with it: nothing to drop.
            let _ = Python::try_attach(|_py| {
                // SAFETY: `ctx` is the tensor's copy of the exporter pointer, a strong reference,
                // dropped once.
                unsafe { ffi::Py_DecRef(*ctx.cast::<*mut ffi::PyObject>()) };
            });
        },
    )
}

/// `_numpy_arrays_read_directly()`: whether this process reads numpy arrays from numpy's
/// structs (running the check on first use), for tests and diagnostics; `False` where numpy
/// cannot be imported.
#[pyfunction]
pub(crate) fn _numpy_arrays_read_directly(py: Python<'_>) -> bool {
    struct_is_readable(py)
}
