//! The device API as global functions, for C, C++, Python and remote callers.

use std::ffi::c_void;

use tvm_ffi::{Any, DataType, Device, Error, ErrorKind, Result, Shape, Tensor};

use super::c_table::register_c_table;
use super::{
    DeviceAttr, StreamHandle, TensorDeviceExt, create_stream, device_attr, empty_on, free_stream,
    set_current_stream, sync_stream, sync_stream_from_to,
};

fn attr_from_code(code: i32) -> Result<DeviceAttr> {
    DeviceAttr::from_code(code).ok_or_else(|| {
        Error::new(
            ErrorKind::ValueError,
            format!("unknown device attribute kind {code} (0..=16 are defined)"),
        )
    })
}

fn stream_arg(stream: *mut c_void) -> StreamHandle {
    StreamHandle(stream)
}

/// Registers the device globals (called by `tvm_runtime::init`).
pub(crate) fn register_globals() {
    use crate::register_typed;
    register_typed(
        "runtime.TensorEmpty",
        |shape: Shape, dtype: DataType, device: Device| empty_on(&shape, dtype, device),
    );
    register_typed("runtime.TensorCopyFromTo", |from: Tensor, to: Tensor| {
        to.copy_from(&from)
    });
    register_typed(
        "runtime.DeviceGetAttr",
        |device: Device, kind: i32| -> Result<Any> {
            Ok(device_attr(device, attr_from_code(kind)?)?.unwrap_or(Any::none()))
        },
    );
    register_typed("runtime.DeviceStreamCreate", |device: Device| {
        create_stream(device).map(|s| Any::from(s.0))
    });
    register_typed(
        "runtime.DeviceStreamFree",
        |device: Device, stream: *mut c_void| {
            // SAFETY: the caller hands back a stream it created and stops using it; the registry
            // and the backend refuse streams they do not know.
            unsafe { free_stream(device, stream_arg(stream)) }
        },
    );
    register_typed(
        "runtime.DeviceStreamSync",
        |device: Device, stream: Option<*mut c_void>| sync_stream(device, stream.map(stream_arg)),
    );
    register_typed(
        "runtime.DeviceStreamSyncFromTo",
        |device: Device, from: Option<*mut c_void>, to: *mut c_void| {
            sync_stream_from_to(device, from.map(stream_arg), stream_arg(to))
        },
    );
    register_typed(
        "runtime.DeviceSetStream",
        |device: Device, stream: *mut c_void| {
            set_current_stream(device, stream_arg(stream)).map(|s| Any::from(s.0))
        },
    );
    register_typed(
        "ffi.DeviceAPIRegister",
        |device_type: i32, table: *mut c_void| {
            // SAFETY: the C helper TVMFFIDeviceAPIRegister passes the caller's table, which the
            // header requires to be valid; it is checked before use.
            unsafe { register_c_table(device_type, table.cast_const().cast()) }
        },
    );
}
