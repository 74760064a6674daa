//! The entry points CUDA's driver API and HIP have in one shape (a result code, handles as
//! pointers, out-parameters first), resolved under each vendor's names, so that the kit writes
//! streams, events, device queries and kernel lookup once for both
//! ([`SharedOps`](crate::driver::shared_ops::SharedOps)).

use std::ffi::{c_char, c_void};

/// A vendor handle (`CUstream`, `hipEvent_t`, `CUmodule`, ...).
pub type Handle = *mut c_void;

macro_rules! shared_calls {
    ($($field:ident => fn($($arg:ty),*);)*) => {
        /// The vendor's symbol name of each shared entry point.
        #[derive(Clone, Copy, Debug)]
        pub struct SharedCallNames {
            $(
                #[doc = concat!("The symbol of [`SharedCalls::", stringify!($field), "`].")]
                pub $field: &'static str,
            )*
        }

        /// The shared entry points of one vendor library.
        #[derive(Clone, Copy, Debug)]
        pub struct SharedCalls {
            $(
                #[doc = concat!("The vendor's `", stringify!($field), "`.")]
                pub $field: unsafe extern "C" fn($($arg),*) -> i32,
            )*
        }

        impl SharedCalls {
            /// Resolves every entry point from `library` under `names`; the first missing one
            /// is an error naming it.
            pub fn load(
                library: &crate::driver::DriverLibrary,
                names: &SharedCallNames,
            ) -> std::result::Result<SharedCalls, String> {
                Ok(SharedCalls {
                    $(
                        // SAFETY: both vendors declare the symbol with the field's C signature.
                        $field: unsafe { library.function(names.$field)? },
                    )*
                })
            }
        }
    };
}

shared_calls! {
    device_get_attribute => fn(*mut i32, i32, i32);
    device_get_name => fn(*mut c_char, i32, i32);
    device_total_mem => fn(*mut usize, i32);
    mem_get_info => fn(*mut usize, *mut usize);
    stream_create_with_flags => fn(*mut Handle, u32);
    stream_destroy => fn(Handle);
    stream_synchronize => fn(Handle);
    stream_wait_event => fn(Handle, Handle, u32);
    event_create_with_flags => fn(*mut Handle, u32);
    event_record => fn(Handle, Handle);
    event_destroy => fn(Handle);
    module_unload => fn(Handle);
    module_get_function => fn(*mut Handle, Handle, *const c_char);
}

/// `CU_STREAM_NON_BLOCKING` and `hipStreamNonBlocking`: the stream does not wait for the
/// legacy default (null) stream.
pub const STREAM_NON_BLOCKING: u32 = 1;
/// `CU_EVENT_DISABLE_TIMING` and `hipEventDisableTiming`: the cheapest event, for ordering only.
pub const EVENT_DISABLE_TIMING: u32 = 2;

/// Code loaded on one device (`CUmodule`, `hipModule_t`), as an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadedCode(pub usize);

impl LoadedCode {
    /// The vendor's handle.
    pub fn handle(self) -> Handle {
        self.0 as Handle
    }
}

/// A kernel of loaded code (`CUfunction`, `hipFunction_t`), as an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kernel(pub usize);

impl Kernel {
    /// The vendor's handle.
    pub fn handle(self) -> Handle {
        self.0 as Handle
    }
}
