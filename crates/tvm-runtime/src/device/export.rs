//! A Rust backend in a library of its own: its [`DeviceApi`] exported as the C table of
//! `tvm/ffi/extra/device_api.h` and registered with the process's runtime.
//!
//! A library that links its own copy of this crate has its own copy of the registry statics, so
//! [`super::register_device_api`] there would register with nobody. [`register_external`] goes
//! through the global function `ffi.DeviceAPIRegister` instead, which reaches the registry of the
//! runtime that owns the process state (the Python extension, or an embedding executable).

use std::ffi::{CString, c_int, c_void};
use std::sync::Arc;

use tvm_ffi::abi::{
    DLDataType, DLDevice, DLTensor, TVM_FFI_DEVICE_API_TABLE_VERSION, TVMFFIAny,
    TVMFFIDeviceAPITable, TVMFFIStreamHandle,
};
use tvm_ffi::boundary::ffi_status;
use tvm_ffi::{Any, DataType, Device, Error, ErrorKind, Function, Result};

use super::{DeviceApi, DeviceAttr, StreamHandle};

/// What a table's `self` points at: the backend and its name, kept alive until `release`.
struct Exported {
    api: Arc<dyn DeviceApi>,
    name: CString,
    /// Text attributes handed out as raw strings, alive as long as the table.
    texts: std::sync::Mutex<Vec<CString>>,
}

/// # Safety
/// `this` is the `self` of a table made by [`export_table`], not released yet.
unsafe fn exported<'a>(this: *mut c_void) -> &'a Exported {
    // SAFETY: guaranteed by the caller.
    unsafe { &*this.cast::<Exported>() }
}

unsafe extern "C" fn get_attr(
    this: *mut c_void,
    device: DLDevice,
    kind: i32,
    out: *mut TVMFFIAny,
) -> c_int {
    ffi_status("device table get_attr", || {
        // SAFETY: the runtime passes back the table's own context.
        let exported = unsafe { exported(this) };
        let attr = DeviceAttr::from_code(kind).ok_or_else(|| {
            Error::new(
                ErrorKind::ValueError,
                format!("unknown device attribute kind {kind}"),
            )
        })?;
        let value = exported.api.attr(Device(device), attr)?;
        let raw = match value {
            None => TVMFFIAny::NONE,
            Some(v) => match v.try_as::<i64>() {
                Some(int) => Any::from(int).into_raw(),
                None => {
                    let text: String = v.cast()?;
                    let text = CString::new(text.replace('\0', " ")).unwrap_or_default();
                    let mut texts = exported.texts.lock().unwrap_or_else(|e| e.into_inner());
                    let raw = TVMFFIAny::raw_c_str(text.as_ptr());
                    texts.push(text);
                    raw
                }
            },
        };
        // SAFETY: `out` is valid for writes (the table's contract).
        unsafe { out.write(raw) };
        Ok(())
    })
}

unsafe extern "C" fn alloc(
    this: *mut c_void,
    device: DLDevice,
    nbytes: usize,
    alignment: usize,
    dtype_hint: DLDataType,
    out: *mut *mut c_void,
) -> c_int {
    ffi_status("device table alloc", || {
        // SAFETY: the runtime passes back the table's own context.
        let api = &unsafe { exported(this) }.api;
        let ptr = api.alloc(Device(device), nbytes, alignment, DataType(dtype_hint))?;
        // SAFETY: `out` is valid for writes (the table's contract).
        unsafe { out.write(ptr) };
        Ok(())
    })
}

unsafe extern "C" fn free(this: *mut c_void, device: DLDevice, ptr: *mut c_void) -> c_int {
    ffi_status("device table free", || {
        // SAFETY: the runtime passes back the table's context and a pointer from `alloc`.
        unsafe { exported(this).api.free(Device(device), ptr) }
    })
}

unsafe extern "C" fn copy(
    this: *mut c_void,
    from: *const DLTensor,
    to: *const DLTensor,
    stream: TVMFFIStreamHandle,
) -> c_int {
    ffi_status("device table copy", || {
        // SAFETY: the runtime passes back the table's context and two valid descriptors.
        unsafe { exported(this).api.copy(&*from, &*to, StreamHandle(stream)) }
    })
}

unsafe extern "C" fn stream_create(
    this: *mut c_void,
    device: DLDevice,
    out: *mut TVMFFIStreamHandle,
) -> c_int {
    ffi_status("device table stream_create", || {
        // SAFETY: the runtime passes back the table's own context.
        let stream = unsafe { exported(this) }
            .api
            .create_stream(Device(device))?;
        // SAFETY: `out` is valid for writes (the table's contract).
        unsafe { out.write(stream.0) };
        Ok(())
    })
}

unsafe extern "C" fn stream_free(
    this: *mut c_void,
    device: DLDevice,
    stream: TVMFFIStreamHandle,
) -> c_int {
    ffi_status("device table stream_free", || {
        // SAFETY: the runtime passes back the table's context and a stream it created.
        unsafe {
            exported(this)
                .api
                .free_stream(Device(device), StreamHandle(stream))
        }
    })
}

unsafe extern "C" fn stream_sync(
    this: *mut c_void,
    device: DLDevice,
    stream: TVMFFIStreamHandle,
) -> c_int {
    ffi_status("device table stream_sync", || {
        // SAFETY: the runtime passes back the table's own context.
        unsafe { exported(this) }
            .api
            .sync_stream(Device(device), StreamHandle(stream))
    })
}

unsafe extern "C" fn release(this: *mut c_void) {
    tvm_ffi::boundary::ffi_boundary("device table release", || {
        // SAFETY: made by `Box::into_raw` in `export_table`, released once by the runtime.
        drop(unsafe { Box::from_raw(this.cast::<Exported>()) });
    })
}

/// The C table of a Rust backend. Its `self` owns the backend until the table's `release`
/// runs; a table that is never registered leaks it.
pub fn export_table(api: Arc<dyn DeviceApi>) -> TVMFFIDeviceAPITable {
    let name = CString::new(api.name().replace('\0', " ")).unwrap_or_default();
    let exported = Box::new(Exported {
        api,
        name,
        texts: std::sync::Mutex::new(Vec::new()),
    });
    let name_ptr = exported.name.as_ptr();
    TVMFFIDeviceAPITable {
        struct_size: size_of::<TVMFFIDeviceAPITable>() as u32,
        version: TVM_FFI_DEVICE_API_TABLE_VERSION,
        self_: Box::into_raw(exported).cast(),
        name: name_ptr,
        get_attr: Some(get_attr),
        alloc: Some(alloc),
        free: Some(free),
        copy: Some(copy),
        stream_create: Some(stream_create),
        stream_free: Some(stream_free),
        stream_sync: Some(stream_sync),
        release: Some(release),
    }
}

/// Registers a Rust backend with the runtime that owns the process (through
/// `ffi.DeviceAPIRegister`), for `device_type`. Use this from a backend library; the final
/// artifact's own backends call [`super::register_device_api`].
pub fn register_external(device_type: i32, api: Arc<dyn DeviceApi>) -> Result<()> {
    let register = Function::get_global_required("ffi.DeviceAPIRegister")?;
    let table = export_table(api);
    let result = register.call((device_type, (&raw const table).cast_mut().cast::<c_void>()));
    if result.is_err() {
        // Refused: the table was not taken, so its context is still ours to release.
        // SAFETY: made by `export_table` above and not registered.
        unsafe { release(table.self_) };
    }
    result.map(drop)
}
