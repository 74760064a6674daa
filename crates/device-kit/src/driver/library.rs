//! A vendor library opened at run time, and tables of its entry points.

use std::ffi::{CStr, CString, c_void};

/// A shared library opened with `dlopen` (`RTLD_NOW | RTLD_LOCAL`). It stays loaded for the life
/// of the process: drivers keep threads and state that do not survive being unloaded, and the
/// function pointers taken from it may be held anywhere.
#[derive(Debug)]
pub struct DriverLibrary {
    handle: *mut c_void,
    name: String,
}

// SAFETY: a dlopen handle may be used from any thread; dlsym is thread-safe.
unsafe impl Send for DriverLibrary {}
// SAFETY: as above.
unsafe impl Sync for DriverLibrary {}

/// The loader's message for the last failure on this thread.
fn last_dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated message owned by the loader, valid until
    // the next dl* call on this thread; it is copied at once.
    let message = unsafe { libc::dlerror() };
    if message.is_null() {
        "unknown loader error".to_owned()
    } else {
        // SAFETY: as above.
        unsafe { CStr::from_ptr(message) }
            .to_string_lossy()
            .into_owned()
    }
}

impl DriverLibrary {
    /// Opens the library `name` (a file name the loader searches for, or a path).
    pub fn open(name: &str) -> Result<DriverLibrary, String> {
        let c_name = CString::new(name).map_err(|_| format!("{name:?} contains a NUL byte"))?;
        // SAFETY: a NUL-terminated name; the handle is checked below.
        let handle = unsafe { libc::dlopen(c_name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(last_dl_error());
        }
        Ok(DriverLibrary {
            handle,
            name: name.to_owned(),
        })
    }

    /// Opens the library the environment variable `override_var` names when it is set, else the
    /// first of `candidates` that loads. The error names every file tried with the loader's
    /// reason for each (`what` says what was looked for: "CUDA driver").
    pub fn open_first(
        what: &str,
        override_var: &str,
        candidates: &[&str],
    ) -> Result<DriverLibrary, String> {
        if let Some(path) = std::env::var_os(override_var) {
            let path = path.to_string_lossy().into_owned();
            return DriverLibrary::open(&path)
                .map_err(|why| format!("{what} not found: {path} (from ${override_var}): {why}"));
        }
        let mut reasons = Vec::new();
        for name in candidates {
            match DriverLibrary::open(name) {
                Ok(library) => return Ok(library),
                Err(why) => reasons.push(why),
            }
        }
        Err(format!(
            "{what} not found: tried {} ({}); set ${override_var} to the library's path",
            candidates.join(", "),
            reasons.join("; ")
        ))
    }

    /// The name or path the library was opened by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The address of symbol `name`, if the library (or one it depends on) defines it.
    pub fn symbol(&self, name: &str) -> Option<*mut c_void> {
        let c_name = CString::new(name).ok()?;
        // SAFETY: a live handle and a NUL-terminated name.
        let ptr = unsafe { libc::dlsym(self.handle, c_name.as_ptr()) };
        (!ptr.is_null()).then_some(ptr)
    }

    /// Function `name` as the function pointer type `F`; an error naming the symbol and the
    /// library when it is missing.
    ///
    /// # Safety
    /// `F` is an `unsafe extern "C" fn` type matching the symbol's C signature.
    pub unsafe fn function<F: Copy>(&self, name: &str) -> Result<F, String> {
        // SAFETY: forwarded from the caller.
        unsafe { self.optional_function(name) }
            .ok_or_else(|| format!("{} has no symbol {name}", self.name))
    }

    /// Function `name` as `F`, or `None` when the library lacks it (an older driver).
    ///
    /// # Safety
    /// As for [`DriverLibrary::function`].
    pub unsafe fn optional_function<F: Copy>(&self, name: &str) -> Option<F> {
        assert_eq!(
            std::mem::size_of::<F>(),
            std::mem::size_of::<*mut c_void>(),
            "function tables hold function pointers"
        );
        let ptr = self.symbol(name)?;
        // SAFETY: F is a function pointer type of the symbol's signature (the caller's contract)
        // and has the size of a pointer (checked above).
        Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&ptr) })
    }
}

/// Declares a table of a driver's entry points and its `load` constructor, which resolves them
/// from a [`DriverLibrary`]: a missing required function is an error naming it; optional ones
/// (present only in newer drivers) are `Option`s.
///
/// ```ignore
/// driver_table! {
///     /// The functions of libexample.
///     pub struct ExampleFunctions {
///         required {
///             init: "exInit" => fn(u32) -> i32;
///         }
///         optional {
///             launch_ex: "exLaunchEx" => fn(*const u8) -> i32;
///         }
///     }
/// }
/// ```
#[macro_export]
macro_rules! driver_table {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            required {
                $($field:ident : $symbol:literal => fn($($arg:ty),* $(,)?) -> $ret:ty;)*
            }
            optional {
                $($opt_field:ident : $opt_symbol:literal => fn($($opt_arg:ty),* $(,)?) -> $opt_ret:ty;)*
            }
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name {
            $(
                #[doc = concat!("`", $symbol, "`")]
                pub $field: unsafe extern "C" fn($($arg),*) -> $ret,
            )*
            $(
                #[doc = concat!("`", $opt_symbol, "`, absent from older drivers")]
                pub $opt_field: Option<unsafe extern "C" fn($($opt_arg),*) -> $opt_ret>,
            )*
        }

        impl $name {
            /// Resolves every entry point from `library`; the first missing required one is an
            /// error naming it.
            pub fn load(library: &$crate::driver::DriverLibrary) -> Result<$name, String> {
                Ok($name {
                    $(
                        $field: {
                            let symbol: &str = $symbol;
                            // SAFETY: the field's type is the symbol's C signature.
                            unsafe { library.function(symbol)? }
                        },
                    )*
                    $(
                        $opt_field: {
                            let symbol: &str = $opt_symbol;
                            // SAFETY: as above.
                            unsafe { library.optional_function(symbol) }
                        },
                    )*
                })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    driver_table! {
        /// libc functions, standing in for a driver.
        pub struct LibcTable {
            required {
                strlen: "strlen" => fn(*const libc::c_char) -> usize;
            }
            optional {
                no_such: "tvm_no_such_function" => fn() -> i32;
            }
        }
    }

    driver_table! {
        /// A table with a function libc lacks (never called).
        #[allow(dead_code)]
        pub struct MissingTable {
            required {
                missing: "tvm_no_such_function" => fn() -> i32;
            }
            optional {}
        }
    }

    #[test]
    fn tables_resolve_required_and_optional_functions() {
        let library = DriverLibrary::open("libc.so.6").unwrap();
        let table = LibcTable::load(&library).unwrap();
        // SAFETY: strlen of a NUL-terminated string.
        assert_eq!(unsafe { (table.strlen)(c"four".as_ptr()) }, 4);
        assert!(table.no_such.is_none());
        let err = MissingTable::load(&library).unwrap_err();
        assert_eq!(err, "libc.so.6 has no symbol tvm_no_such_function");
    }

    #[test]
    fn missing_libraries_name_every_file_and_the_reason() {
        let err = DriverLibrary::open_first(
            "Example driver",
            "TVM_TEST_UNSET_VARIABLE_FOR_DRIVER",
            &["libtvm_absent_a.so.1", "libtvm_absent_b.so"],
        )
        .unwrap_err();
        assert!(err.starts_with("Example driver not found"), "{err}");
        assert!(
            err.contains("libtvm_absent_a.so.1, libtvm_absent_b.so")
                && err.contains("cannot open shared object file")
                && err.contains("$TVM_TEST_UNSET_VARIABLE_FOR_DRIVER"),
            "{err}"
        );
    }
}
