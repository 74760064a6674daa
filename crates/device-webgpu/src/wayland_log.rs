//! Silences libwayland's client log in headless processes. wgpu enables the Wayland surface
//! extension on every Vulkan instance, and a Mesa driver built with Wayland support then has
//! libwayland look for a compositor, which prints `error: XDG_RUNTIME_DIR is invalid or not set
//! in the environment.` to stderr when there is no session: noise for a compute process that
//! never presents. Before the instance is created, libwayland-client (when the system has it) is
//! opened and its log handler replaced by one that drops the messages; the driver loads the same
//! library later and inherits the handler. The runtime draws no windows, so no message of
//! libwayland's concerns it.

use std::ffi::{c_char, c_void};
use std::sync::Once;

use device_kit::driver::DriverLibrary;

/// `void (*)(const char *format, va_list args)`: the `va_list` travels as one pointer-sized
/// argument (a pointer to the list on x86-64 and AArch64 alike), which the handler never reads.
type LogHandler = unsafe extern "C" fn(*const c_char, *mut c_void);

/// `void wl_log_set_handler_client(wl_log_func_t handler)`.
type SetHandler = unsafe extern "C" fn(LogHandler);

unsafe extern "C" fn drop_message(_format: *const c_char, _args: *mut c_void) {}

/// Installs the silent handler once, if libwayland-client is on the system.
pub(crate) fn silence() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Ok(library) = DriverLibrary::open("libwayland-client.so.0") else {
            return;
        };
        // SAFETY: the symbol's C signature is `SetHandler`'s.
        let Some(set_handler) =
            (unsafe { library.optional_function::<SetHandler>("wl_log_set_handler_client") })
        else {
            return;
        };
        // SAFETY: the handler has the C signature libwayland calls it with and ignores its
        // arguments; the library stays loaded for the life of the process (DriverLibrary).
        unsafe { set_handler(drop_message) };
    });
}
