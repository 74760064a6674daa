//! The C API for libraries loaded into an executable that embeds the runtime.
//!
//! Kernel libraries refer to the C API by name (`TVMFFIFunctionCall`, ...) and the dynamic
//! loader resolves those names against what the process exports. The Python extension exports
//! them; an executable does not (executables export nothing by default, and a library crate has
//! no way to change that for the binaries that link it). For such a process, [`export_c_api`]
//! loads a shim: a small library, built with this crate and embedded in it, whose `TVMFFI*`
//! symbols jump to the functions linked into the executable. It is loaded `RTLD_GLOBAL`, so the
//! libraries loaded after it resolve the C API against it; its SONAME is `libtvm_ffi.so`, so a
//! library linked against `libtvm_ffi.so` finds it too.

use std::sync::OnceLock;

use tvm_ffi::error::{Error, ErrorKind, Result};

include!(concat!(env!("OUT_DIR"), "/c_api_exports.rs"));

/// The symbol whose presence says that the process already exports the C API.
const PROBE: &std::ffi::CStr = c"TVMFFIFunctionCall";

/// Makes the C API visible to the libraries loaded from now on: nothing to do when the process
/// exports it already, otherwise the shim is loaded (once).
pub(crate) fn export_c_api() -> Result<()> {
    static OUTCOME: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    OUTCOME
        .get_or_init(|| {
            if process_exports_c_api() {
                return Ok(());
            }
            load_shim()
        })
        .clone()
        .map_err(|message| Error::new(ErrorKind::RuntimeError, message))
}

/// Whether a global lookup finds the C API (the Python extension, an executable linked with
/// `--export-dynamic-symbol=TVMFFI*`, or the shim once loaded).
fn process_exports_c_api() -> bool {
    // SAFETY: a lookup of a NUL-terminated name in the global scope.
    !unsafe { libc::dlsym(libc::RTLD_DEFAULT, PROBE.as_ptr()) }.is_null()
}

#[cfg(not(tvm_ffi_shim))]
fn load_shim() -> std::result::Result<(), String> {
    Err(
        "this executable does not export the TVM FFI C API (TVMFFI*), and no shim was built for \
         this platform: link it with -Wl,--export-dynamic-symbol=TVMFFI*"
            .into(),
    )
}

#[cfg(tvm_ffi_shim)]
fn load_shim() -> std::result::Result<(), String> {
    use std::ffi::{CString, c_int};
    use std::io::Write as _;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    static SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libtvm_ffi_shim.so"));
    let fail = |what: String| format!("cannot load the TVM FFI C API shim: {what}");

    // SAFETY: memfd_create with a NUL-terminated name; the descriptor is owned below.
    let fd = unsafe { libc::memfd_create(c"libtvm_ffi.so".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(fail(format!(
            "memfd_create failed: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let file = unsafe { OwnedFd::from_raw_fd(fd) };
    std::fs::File::from(file.try_clone().map_err(|e| fail(e.to_string()))?)
        .write_all(SHIM)
        .map_err(|e| fail(format!("writing it: {e}")))?;
    let path = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd())).expect("no NUL");
    // SAFETY: dlopen of a complete shared library image with a NUL-terminated path.
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if handle.is_null() {
        // SAFETY: dlerror returns NULL or a NUL-terminated message of this thread.
        let reason = unsafe { libc::dlerror() };
        let reason = if reason.is_null() {
            "unknown".into()
        } else {
            // SAFETY: non-NULL, NUL-terminated (checked above).
            unsafe { std::ffi::CStr::from_ptr(reason) }.to_string_lossy()
        };
        return Err(fail(format!("dlopen: {reason}")));
    }
    // SAFETY: a lookup of a NUL-terminated name in the handle just opened.
    let install = unsafe { libc::dlsym(handle, c"tvm_ffi_shim_install".as_ptr()) };
    if install.is_null() {
        return Err(fail("it has no tvm_ffi_shim_install".into()));
    }
    type Install = unsafe extern "C" fn(*const *const (), usize) -> c_int;
    // SAFETY: the shim defines tvm_ffi_shim_install with this signature (shim/install.c).
    let install: Install = unsafe { std::mem::transmute::<*mut libc::c_void, Install>(install) };
    let addresses = c_api_addresses();
    // SAFETY: `addresses` holds C_API_NAMES.len() function addresses, in the slot order the
    // shim's stubs were generated with; the shim copies them before returning.
    if unsafe { install(addresses.as_ptr(), addresses.len()) } != 0 {
        return Err(fail(format!(
            "it was built for another list of the {} exports",
            C_API_NAMES.len()
        )));
    }
    // The handle stays open for the life of the process; the mapping outlives the descriptor.
    Ok(())
}
