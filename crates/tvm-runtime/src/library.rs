//! Shared libraries as modules: `dlopen`, the export conventions of compiled code
//! (`__tvm_ffi_<name>`, `__tvm_ffi__metadata_<name>`, `__tvm_ffi__doc_<name>`), context symbols,
//! `__tvm_ffi__library_ctx`, the ABI version record, and embedded module blobs.

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_void};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use tvm_ffi::abi::{self, TVMFFISafeCallType};
use tvm_ffi::function::SafeCall;
use tvm_ffi::{Any, AnyView, Error, ErrorKind, Function, Result};

use crate::module::{Module, ModuleImpl};
use crate::{blob, elf};

/// Prefix of exported functions.
pub const SYMBOL_PREFIX: &str = "__tvm_ffi_";

/// A `dlopen`ed library (kept loaded for the life of the process).
pub(crate) struct Library {
    handle: *mut c_void,
    path: PathBuf,
}

// SAFETY: a dlopen handle may be used from any thread.
unsafe impl Send for Library {}
// SAFETY: as above; symbol lookups are thread-safe.
unsafe impl Sync for Library {}

fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated message owned by the loader.
    let msg = unsafe { libc::dlerror() };
    if msg.is_null() {
        "unknown loader error".to_owned()
    } else {
        // SAFETY: as above.
        unsafe { CStr::from_ptr(msg) }
            .to_string_lossy()
            .into_owned()
    }
}

/// Whether `path` is a bare file name, with no directory part.
fn is_bare_name(path: &Path) -> bool {
    path.parent()
        .is_some_and(|parent| parent.as_os_str().is_empty())
        && !path.as_os_str().is_empty()
}

/// `dlopen(file, RTLD_NOW | RTLD_LOCAL)` after making the C API visible to the library;
/// `shown` names the library in errors.
fn dlopen_now(file: &Path, shown: &Path) -> Result<*mut c_void> {
    let c_path = CString::new(file.as_os_str().as_encoded_bytes()).map_err(|_| {
        Error::new(
            ErrorKind::ValueError,
            format!("path contains a NUL byte: {}", shown.display()),
        )
    })?;
    crate::export_c_api()?;
    // SAFETY: a valid NUL-terminated path or name; the handle is checked below.
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        let reason = dl_error();
        let hint = if reason.contains("undefined symbol: TVMFFI") {
            " (the process does not export the TVM FFI C API: load the library through the \
             `tvm` package, or link `tvm-ffi-capi` into the executable and export its symbols)"
        } else {
            ""
        };
        return Err(Error::new(
            "OSError",
            format!(
                "cannot load '{}' as a shared library: {reason}{hint}",
                shown.display()
            ),
        ));
    }
    Ok(handle)
}

/// The file the dynamic loader opened for `handle` (glibc's `RTLD_DI_LINKMAP`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn loaded_path(handle: *mut c_void) -> Option<PathBuf> {
    /// The public head of glibc's `struct link_map` (`<link.h>`).
    #[repr(C)]
    struct LinkMapHead {
        addr: usize,
        name: *const std::ffi::c_char,
    }
    let mut map: *const LinkMapHead = std::ptr::null();
    // SAFETY: `handle` is a live dlopen handle and `map` a valid out-parameter for a pointer.
    let rc = unsafe {
        libc::dlinfo(
            handle,
            libc::RTLD_DI_LINKMAP,
            (&raw mut map).cast::<c_void>(),
        )
    };
    if rc != 0 || map.is_null() {
        return None;
    }
    // SAFETY: on success the loader's link map of the handle, whose name is NUL-terminated.
    let name = unsafe { (*map).name };
    if name.is_null() {
        return None;
    }
    // SAFETY: as above.
    let text = unsafe { CStr::from_ptr(name) }.to_str().ok()?;
    (!text.is_empty()).then(|| PathBuf::from(text))
}

/// The file the dynamic loader opened: not known on this platform.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn loaded_path(_handle: *mut c_void) -> Option<PathBuf> {
    None
}

impl Library {
    /// Opens `path` with `RTLD_NOW | RTLD_LOCAL`: every undefined symbol is resolved now, so a
    /// missing one is an error here rather than the process dying on the first call. Only
    /// regular files are opened (a FIFO or device named `*.so` would block or mislead the loader).
    ///
    /// A path names a file relative to the current directory. A bare name (no directory part)
    /// that is not a file there is searched for as the dynamic loader searches (its library
    /// path, `LD_LIBRARY_PATH`, libraries already loaded), as Apache TVM FFI's loader does.
    pub(crate) fn open(path: &Path) -> Result<Library> {
        let metadata = match std::fs::metadata(path) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound && is_bare_name(path) => {
                return Library::open_by_search(path);
            }
            Err(err) => {
                return Err(match err.kind() {
                    std::io::ErrorKind::NotFound => Error::new(
                        "FileNotFoundError",
                        format!("No such file or directory: '{}'", path.display()),
                    ),
                    _ => Error::new(
                        "OSError",
                        format!("cannot read '{}': {err}", path.display()),
                    ),
                });
            }
            Ok(metadata) => metadata,
        };
        if !metadata.is_file() {
            let what = if metadata.is_dir() {
                "a directory"
            } else {
                "not a regular file"
            };
            return Err(Error::new(
                "OSError",
                format!(
                    "cannot load '{}' as a shared library: it is {what}",
                    path.display()
                ),
            ));
        }
        // dlopen searches the system's library path for a name without a slash; the file
        // meant is the one found above, relative to the current directory.
        let absolute = std::path::absolute(path).map_err(|err| {
            Error::new(
                "OSError",
                format!("cannot resolve '{}': {err}", path.display()),
            )
        })?;
        // A file cut short would be mapped as it is, and touching its missing pages kills
        // the process inside `dlopen`.
        elf::check_complete(&absolute, path)?;
        let handle = dlopen_now(&absolute, path)?;
        Ok(Library {
            handle,
            path: path.to_owned(),
        })
    }

    /// Opens a bare name that is not a file in the current directory through the dynamic
    /// loader's own search; the library keeps the path the loader found.
    fn open_by_search(name: &Path) -> Result<Library> {
        let handle = dlopen_now(name, name).map_err(|err| {
            if err.message().contains("No such file or directory") {
                Error::new(
                    "FileNotFoundError",
                    format!(
                        "No such file or directory: '{}' (neither in the current directory nor \
                         on the dynamic loader's search path)",
                        name.display()
                    ),
                )
            } else {
                err
            }
        })?;
        let path = loaded_path(handle).unwrap_or_else(|| name.to_owned());
        Ok(Library { handle, path })
    }

    /// Whether `ptr` lies in this library itself (`dlsym` also searches its dependencies).
    fn defines(&self, ptr: *mut c_void) -> bool {
        // SAFETY: an all-zero Dl_info is a valid out-parameter.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr only inspects the address.
        if unsafe { libc::dladdr(ptr, &mut info) } == 0 || info.dli_fname.is_null() {
            return false;
        }
        // SAFETY: dladdr returned a NUL-terminated file name.
        let file = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy();
        let canonical = |p: &Path| std::fs::canonicalize(p).ok();
        canonical(Path::new(file.as_ref())) == canonical(&self.path)
    }

    /// The address of symbol `name`, if the library itself defines it.
    pub(crate) fn own_symbol(&self, name: &str) -> Option<*mut c_void> {
        self.symbol(name).filter(|ptr| self.defines(*ptr))
    }

    /// The address of symbol `name`, if the library defines it.
    pub(crate) fn symbol(&self, name: &str) -> Option<*mut c_void> {
        let name = CString::new(name).ok()?;
        // SAFETY: a live handle and a NUL-terminated name.
        let ptr = unsafe { libc::dlsym(self.handle, name.as_ptr()) };
        (!ptr.is_null()).then_some(ptr)
    }

    fn safe_call(&self, name: &str) -> Option<SafeCall> {
        let ptr = self.symbol(name)?;
        // SAFETY: symbols named with the export prefix are safe-call functions by convention.
        let call: TVMFFISafeCallType = unsafe { std::mem::transmute(ptr) };
        call
    }
}

// A library is never closed: functions, objects and global registrations it creates (through
// `TVMFFIFunctionCreate`, static initializers, deleters in object headers) may outlive its
// module, so its code must stay mapped for the life of the process.

/// Calls an exported safe-call function with a NULL handle (the convention for exports).
pub(crate) fn call_symbol(call: SafeCall, args: &[AnyView<'_>]) -> Result<Any> {
    // SAFETY: symbols with the export prefix follow the safe-call convention, with NULL handles.
    unsafe { tvm_ffi::function::call_safe_call(call, std::ptr::null_mut(), args) }
}

/// The module of a loaded shared library.
pub(crate) struct LibraryModule {
    library: Arc<Library>,
}

impl LibraryModule {
    fn text_symbol(&self, prefix: &str, name: &str) -> Result<Option<String>> {
        let Some(call) = self.library.safe_call(&format!("{prefix}{name}")) else {
            return Ok(None);
        };
        let value = call_symbol(call, &[])?;
        Ok(Some(value.cast::<std::string::String>()?))
    }
}

impl ModuleImpl for LibraryModule {
    fn kind(&self) -> &str {
        "library"
    }

    fn get_function(&self, module: &Module, name: &str) -> Result<Option<Function>> {
        let Some(call) = self.library.safe_call(&format!("{SYMBOL_PREFIX}{name}")) else {
            return Ok(None);
        };
        let keep_alive = module.clone();
        Ok(Some(Function::from_packed(move |args| {
            let _module = &keep_alive;
            call_symbol(call, args)
        })))
    }

    fn function_metadata(&self, name: &str) -> Result<Option<String>> {
        self.text_symbol("__tvm_ffi__metadata_", name)
    }

    fn function_doc(&self, name: &str) -> Result<Option<String>> {
        self.text_symbol("__tvm_ffi__doc_", name)
    }

    fn property_mask(&self) -> i64 {
        Module::BINARY_SERIALIZABLE | Module::RUNNABLE
    }
}

/// Checks the ABI version a library recorded (if it did) against this runtime's.
fn check_abi_version(library: &Library) -> Result<()> {
    let Some(ptr) = library.own_symbol("__tvm_ffi__abi_version") else {
        return Ok(());
    };
    // SAFETY: the record is a `uint32_t` data symbol.
    let recorded = unsafe { *ptr.cast::<u32>() };
    let (major, minor) = (recorded >> 16, recorded & 0xFFFF);
    if major != abi::TVM_FFI_VERSION_MAJOR {
        return Err(Error::new(
            "ImportError",
            format!(
                "'{}' was built for TVM FFI ABI {major}.{minor}, but this runtime implements {}.{}",
                library.path.display(),
                abi::TVM_FFI_VERSION_MAJOR,
                abi::TVM_FFI_VERSION_MINOR
            ),
        ));
    }
    Ok(())
}

/// The registered context symbols: (name, address).
pub(crate) fn registered_context_symbols() -> Result<Vec<(std::string::String, *mut c_void)>> {
    let symbols = Function::get_global_required("ffi.GetContextSymbols")?.call(())?;
    let pairs: tvm_ffi::Array = symbols.cast()?;
    pairs
        .as_slice()
        .chunks(2)
        .map(|pair| Ok((pair[0].cast()?, pair[1].cast()?)))
        .collect()
}

/// Writes every registered context symbol into the library's same-named `void*` global, after
/// checking that every runtime-function slot the library exports (a pointer-sized `__TVM*`
/// object, such as `__TVMBackendParallelLaunch`) has a registered symbol: an empty slot would
/// be a call to address 0 when the kernel runs.
fn fill_context_symbols(library: &Library) -> Result<()> {
    let symbols = registered_context_symbols()?;
    let slot_size = std::mem::size_of::<*mut c_void>() as u64;
    // A file that cannot be read again after loading is left unchecked.
    let slots = elf::exported_objects(&library.path, "__TVM", slot_size).unwrap_or_default();
    if let Some(missing) = slots
        .iter()
        .find(|slot| !symbols.iter().any(|(name, _)| name == *slot))
    {
        let mut provided: Vec<&str> = symbols
            .iter()
            .map(|(name, _)| name.as_str())
            .filter(|name| name.starts_with("__TVM"))
            .collect();
        provided.sort_unstable();
        return Err(Error::new(
            "OSError",
            format!(
                "cannot load '{}': its slot `{missing}` needs a runtime function this runtime \
                 does not provide (it provides {})",
                library.path.display(),
                provided.join(", ")
            ),
        ));
    }
    for (name, addr) in symbols {
        if let Some(slot) = library.symbol(&name) {
            // SAFETY: a context symbol is a `void*` global of the library.
            unsafe { *slot.cast::<*mut c_void>() = addr };
        }
    }
    Ok(())
}

/// Loads a shared library as a module (the `.so` loader).
pub fn load_library(path: &Path) -> Result<Module> {
    let library = Arc::new(Library::open(path)?);
    check_abi_version(&library)?;
    fill_context_symbols(&library)?;
    let lib_module = Module::new(LibraryModule {
        library: library.clone(),
    });
    let root = match library.symbol("__tvm_ffi__library_bin") {
        // SAFETY: the blob symbol points at the embedded, length-prefixed module blob.
        Some(ptr) => unsafe { blob::load_embedded(ptr.cast::<u8>(), &lib_module)? },
        None => lib_module.clone(),
    };
    if let Some(slot) = library.symbol("__tvm_ffi__library_ctx") {
        let cookie = lib_module.as_object().as_raw() as usize;
        if !is_writable_pointer_slot(slot as usize) {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "{}: `__tvm_ffi__library_ctx` must be a writable, pointer-aligned `void*` \
                 global (it is read-only or misaligned)",
                path.display()
            );
        }
        // The cookie stays valid for the process, as the library does.
        LIBRARY_CONTEXTS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(cookie, lib_module.clone());
        // SAFETY: the slot is a writable, aligned pointer-sized global of the library (checked
        // above); the cookie is only handed back to the runtime, which checks it.
        unsafe { *slot.cast::<*mut c_void>() = cookie as *mut c_void };
    }
    Ok(root)
}

/// The library modules whose cookies were handed out through `__tvm_ffi__library_ctx`, by
/// cookie: generated code hands a cookie back, and only these are accepted.
static LIBRARY_CONTEXTS: LazyLock<Mutex<HashMap<usize, Module>>> = LazyLock::new(Default::default);

/// The library module behind a context cookie; a `ValueError` for anything else.
pub(crate) fn module_of_context(cookie: i64) -> Result<Module> {
    usize::try_from(cookie)
        .ok()
        .and_then(|c| {
            LIBRARY_CONTEXTS
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&c)
                .cloned()
        })
        .ok_or_else(|| {
            Error::new(
                ErrorKind::ValueError,
                format!("{cookie:#x} is not the context of a loaded library"),
            )
        })
}

/// Whether a pointer-sized global at `address` can be written: aligned, and inside a writable
/// mapping of this process (`/proc/self/maps`).
fn is_writable_pointer_slot(address: usize) -> bool {
    let size = std::mem::size_of::<*mut c_void>();
    if !address.is_multiple_of(size) {
        return false;
    }
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return false;
    };
    maps.lines().any(|line| {
        let mut fields = line.split_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
            return false;
        };
        let Some((start, end)) = range.split_once('-') else {
            return false;
        };
        let (Ok(start), Ok(end)) = (
            usize::from_str_radix(start, 16),
            usize::from_str_radix(end, 16),
        ) else {
            return false;
        };
        perms.as_bytes().get(1) == Some(&b'w') && start <= address && address + size <= end
    })
}
