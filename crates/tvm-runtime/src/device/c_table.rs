//! Backends from other libraries: the C table of `tvm/ffi/extra/device_api.h`, checked when it
//! is registered and wrapped as a [`DeviceApi`].

use std::ffi::{CStr, c_int, c_void};
use std::sync::Arc;

use tvm_ffi::abi::{
    self, DLTensor, TVM_FFI_DEVICE_API_TABLE_VERSION, TVMFFIAny, TVMFFIDeviceAPITable,
};
use tvm_ffi::{Any, DataType, Device, Error, ErrorKind, Result};

use super::{DeviceApi, DeviceAttr, StreamHandle, register_device_api};

/// A backend behind a C table.
pub struct CTableDeviceApi {
    table: TVMFFIDeviceAPITable,
    name: String,
}

// SAFETY: the header requires a backend's functions to be callable from any thread.
unsafe impl Send for CTableDeviceApi {}
// SAFETY: as above; the table itself is immutable after registration.
unsafe impl Sync for CTableDeviceApi {}

/// The entries a table must fill, by name.
fn missing_entry(table: &TVMFFIDeviceAPITable) -> Option<&'static str> {
    [
        ("get_attr", table.get_attr.is_none()),
        ("alloc", table.alloc.is_none()),
        ("free", table.free.is_none()),
        ("copy", table.copy.is_none()),
        ("stream_create", table.stream_create.is_none()),
        ("stream_free", table.stream_free.is_none()),
        ("stream_sync", table.stream_sync.is_none()),
        ("name", table.name.is_null()),
    ]
    .into_iter()
    .find_map(|(name, missing)| missing.then_some(name))
}

impl CTableDeviceApi {
    /// Checks and copies a table: its size field, version and every required entry. On error
    /// nothing is taken (`release` is not called).
    ///
    /// # Safety
    /// `table` is NULL or points at a readable table of at least `struct_size` bytes whose
    /// functions behave as the header says.
    pub unsafe fn from_table(table: *const TVMFFIDeviceAPITable) -> Result<CTableDeviceApi> {
        if table.is_null() {
            tvm_ffi::bail!(ErrorKind::ValueError, "the device API table is NULL");
        }
        // SAFETY: non-NULL; the size field comes first in every version of the table.
        let struct_size = unsafe { table.cast::<u32>().read_unaligned() } as usize;
        let expected = size_of::<TVMFFIDeviceAPITable>();
        if struct_size != expected {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "the device API table has struct_size {struct_size}, this runtime expects \
                 {expected} (rebuild the backend against this header)"
            );
        }
        // SAFETY: the table is readable and as large as the mirror.
        let table = unsafe { table.read_unaligned() };
        if table.version != TVM_FFI_DEVICE_API_TABLE_VERSION {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "the device API table has version {}, this runtime speaks \
                 {TVM_FFI_DEVICE_API_TABLE_VERSION}",
                table.version
            );
        }
        if let Some(entry) = missing_entry(&table) {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "the device API table has no `{entry}` (NULL); every entry but `release` is required"
            );
        }
        // SAFETY: checked non-NULL above; NUL-terminated per the header.
        let name = unsafe { CStr::from_ptr(table.name) }
            .to_string_lossy()
            .into_owned();
        Ok(CTableDeviceApi { table, name })
    }

    /// Turns a status code into a result, taking the error the backend raised.
    fn status(&self, rc: c_int, what: &str) -> Result<()> {
        if rc == 0 {
            return Ok(());
        }
        Err(Error::take_raised_or(
            ErrorKind::RuntimeError,
            format!(
                "device backend '{}': {what} failed with status {rc}",
                self.name
            ),
        ))
    }
}

impl Drop for CTableDeviceApi {
    fn drop(&mut self) {
        if let Some(release) = self.table.release {
            // SAFETY: the backend's own release function, called once with its context.
            unsafe { release(self.table.self_) };
        }
    }
}

/// The entry of a checked table (present by construction).
macro_rules! entry {
    ($self:ident . $name:ident) => {
        $self
            .table
            .$name
            .expect(concat!("checked at registration: ", stringify!($name)))
    };
}

impl DeviceApi for CTableDeviceApi {
    fn name(&self) -> &str {
        &self.name
    }

    fn attr(&self, device: Device, attr: DeviceAttr) -> Result<Option<Any>> {
        let mut out = TVMFFIAny::NONE;
        // SAFETY: a checked table; `out` is valid for writes.
        let rc =
            unsafe { entry!(self.get_attr)(self.table.self_, device.0, attr as i32, &mut out) };
        self.status(rc, &format!("get_attr({attr}) of {device}"))?;
        Ok(match out.type_index {
            abi::kTVMFFINone => None,
            // SAFETY: the tag says which payload is set.
            abi::kTVMFFIInt => Some(Any::from(unsafe { out.payload.v_int64 })),
            abi::kTVMFFIRawStr => {
                // SAFETY: a NUL-terminated string the backend keeps alive (the header's rule).
                let text = unsafe { CStr::from_ptr(out.payload.v_c_str) };
                Some(Any::from(text.to_string_lossy().as_ref()))
            }
            other => tvm_ffi::bail!(
                ErrorKind::TypeError,
                "device backend '{}': get_attr({attr}) wrote a value of type index {other}; \
                 expected an int, a raw string or None",
                self.name
            ),
        })
    }

    fn alloc(
        &self,
        device: Device,
        nbytes: usize,
        alignment: usize,
        dtype_hint: DataType,
    ) -> Result<*mut c_void> {
        let mut out = std::ptr::null_mut();
        // SAFETY: a checked table; `out` is valid for writes.
        let rc = unsafe {
            entry!(self.alloc)(
                self.table.self_,
                device.0,
                nbytes,
                alignment,
                dtype_hint.0,
                &mut out,
            )
        };
        self.status(rc, &format!("alloc({nbytes} bytes) on {device}"))?;
        if out.is_null() && nbytes > 0 {
            tvm_ffi::bail!(
                ErrorKind::RuntimeError,
                "device backend '{}': alloc({nbytes} bytes) on {device} returned NULL",
                self.name
            );
        }
        Ok(out)
    }

    unsafe fn free(&self, device: Device, ptr: *mut c_void) -> Result<()> {
        // SAFETY: a checked table; `ptr` came from this backend (the caller's contract).
        let rc = unsafe { entry!(self.free)(self.table.self_, device.0, ptr) };
        self.status(rc, &format!("free({ptr:p}) on {device}"))
    }

    unsafe fn copy(&self, from: &DLTensor, to: &DLTensor, stream: StreamHandle) -> Result<()> {
        // SAFETY: a checked table; valid descriptors (the caller's contract).
        let rc = unsafe { entry!(self.copy)(self.table.self_, from, to, stream.0) };
        self.status(rc, "copy")
    }

    fn create_stream(&self, device: Device) -> Result<StreamHandle> {
        let mut out = std::ptr::null_mut();
        // SAFETY: a checked table; `out` is valid for writes.
        let rc = unsafe { entry!(self.stream_create)(self.table.self_, device.0, &mut out) };
        self.status(rc, &format!("stream_create on {device}"))?;
        Ok(StreamHandle(out))
    }

    unsafe fn free_stream(&self, device: Device, stream: StreamHandle) -> Result<()> {
        // SAFETY: a checked table; the stream came from this backend (the caller's contract).
        let rc = unsafe { entry!(self.stream_free)(self.table.self_, device.0, stream.0) };
        self.status(rc, &format!("stream_free on {device}"))
    }

    fn sync_stream(&self, device: Device, stream: StreamHandle) -> Result<()> {
        // SAFETY: a checked table; the registry only passes streams of this device.
        let rc = unsafe { entry!(self.stream_sync)(self.table.self_, device.0, stream.0) };
        self.status(rc, &format!("stream_sync on {device}"))
    }
}

/// Checks a C table and registers it for `device_type` (the body of `ffi.DeviceAPIRegister`).
///
/// # Safety
/// As for [`CTableDeviceApi::from_table`].
pub unsafe fn register_c_table(device_type: i32, table: *const TVMFFIDeviceAPITable) -> Result<()> {
    // SAFETY: forwarded from the caller.
    let api = unsafe { CTableDeviceApi::from_table(table)? };
    let api = Arc::new(api);
    match register_device_api(device_type, api.clone()) {
        Ok(()) => Ok(()),
        Err(err) => {
            // Refused: the caller keeps its context, so the table must not release it.
            let mut refused = Arc::into_inner(api).expect("the only reference");
            refused.table.release = None;
            Err(err)
        }
    }
}
