//! Errors as objects: a kind, a message, a backtrace and an optional cause, laid out as the C
//! ABI's error cell so that C, C++, Rust and Python all read and raise the same value.

use std::borrow::Cow;
use std::cell::UnsafeCell;
use std::ffi::CString;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::abi::{self, TVMFFIByteArray, TVMFFIErrorCell, TVMFFIObject, kTVMFFIError};
use crate::any::{Any, AnyView};
use crate::object::{Object, ObjectCore, ObjectRef};

/// The error kinds the runtime itself raises. Any other kind string is valid too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A failure with no more specific kind.
    RuntimeError,
    /// A value of the right type but unacceptable content (a bad dtype string, ...).
    ValueError,
    /// A value of the wrong type, or a wrong argument count.
    TypeError,
    /// An unknown key (a type key, a map key, ...).
    KeyError,
    /// An index out of range.
    IndexError,
    /// A missing attribute or function.
    AttributeError,
    /// A broken invariant inside the runtime, including a caught panic.
    InternalError,
    /// A feature that is not available.
    NotImplementedError,
    /// Memory could not be allocated.
    MemoryError,
    /// An integer out of range.
    OverflowError,
    /// A failed assertion.
    AssertionError,
}

impl ErrorKind {
    /// The kind string carried by the error object.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::RuntimeError => "RuntimeError",
            ErrorKind::ValueError => "ValueError",
            ErrorKind::TypeError => "TypeError",
            ErrorKind::KeyError => "KeyError",
            ErrorKind::IndexError => "IndexError",
            ErrorKind::AttributeError => "AttributeError",
            ErrorKind::InternalError => "InternalError",
            ErrorKind::NotImplementedError => "NotImplementedError",
            ErrorKind::MemoryError => "MemoryError",
            ErrorKind::OverflowError => "OverflowError",
            ErrorKind::AssertionError => "AssertionError",
        }
    }
}

impl AsRef<str> for ErrorKind {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The view of an error object shared by every producer: header plus error cell.
/// The cell sits in an `UnsafeCell` because `update_backtrace` rewrites it in place.
#[repr(C)]
pub struct ErrorObj {
    base: Object,
    cell: UnsafeCell<TVMFFIErrorCell>,
}

// SAFETY: the cell's pointers refer to memory owned by the object; the only mutation is the
// backtrace update, which the ABI leaves to the error's owner to serialize (as C++ does).
unsafe impl Send for ErrorObj {}
// SAFETY: as above.
unsafe impl Sync for ErrorObj {}

// SAFETY: repr(C) with the header first; `ffi.Error` has the static index 67.
unsafe impl ObjectCore for ErrorObj {
    const TYPE_KEY: &'static str = "ffi.Error";
    fn type_index() -> i32 {
        kTVMFFIError
    }
}

impl ErrorObj {
    /// The view of a new error object (header and cell), for producers that lay their storage
    /// out after it.
    pub fn new(cell: TVMFFIErrorCell) -> ErrorObj {
        ErrorObj {
            base: Object::header(),
            cell: UnsafeCell::new(cell),
        }
    }

    /// The error cell, for a producer that owns the object exclusively.
    pub fn cell_mut(&mut self) -> &mut TVMFFIErrorCell {
        self.cell.get_mut()
    }

    /// The address of the cell, for the producer's `update_backtrace` hook, which rewrites it in
    /// place under the ABI's rule that the error's owner serializes updates.
    pub fn cell_ptr(&self) -> *mut TVMFFIErrorCell {
        self.cell.get()
    }

    /// The error cell.
    pub fn cell(&self) -> &TVMFFIErrorCell {
        // SAFETY: the cell is only rewritten by `update_backtrace`, never concurrently with a
        // read by the error's owner.
        unsafe { &*self.cell.get() }
    }
}

/// A runtime error: kind, message, backtrace (most recent call first) and optional cause.
#[derive(Clone)]
pub struct Error {
    obj: ObjectRef<ErrorObj>,
}

/// Result type of the runtime.
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn cell_text(array: &TVMFFIByteArray) -> Cow<'_, str> {
    // SAFETY: the error object owns `size` bytes at `data` for as long as it lives.
    String::from_utf8_lossy(unsafe { array.as_bytes() })
}

/// The captured stack of the caller as the runtime formats backtraces (most recent call first),
/// borrowed from the calling thread's buffer: valid until the thread's next capture.
fn captured_backtrace() -> TVMFFIByteArray {
    // SAFETY: NULL file/function ask for the captured stack only; the result is NULL or points
    // at a valid byte array, which stays valid until the next call on this thread.
    let backtrace = unsafe { abi::TVMFFIBacktrace(std::ptr::null(), 0, std::ptr::null(), 0) };
    if backtrace.is_null() {
        TVMFFIByteArray::EMPTY
    } else {
        // SAFETY: non-NULL results point at a valid byte array.
        unsafe { *backtrace }
    }
}

/// The backtrace of the caller, as [`Error::new`] records it (frames of the runtime's own
/// plumbing left out), for errors made with an explicit backtrace.
pub fn current_backtrace() -> String {
    // SAFETY: the captured text stays valid until the next capture on this thread, after the
    // copy made here.
    String::from_utf8_lossy(unsafe { captured_backtrace().as_bytes() }).into_owned()
}

impl Error {
    /// Creates an error of `kind` with `message` and the backtrace of the caller.
    ///
    /// The caller's frames are recorded now and turned into text only when the backtrace is
    /// first read ([`Error::backtrace`]), which is what makes raising cheap: the error is raised
    /// through `TVMFFIErrorSetRaisedFromCStr` and taken back out of the slot, whose previous
    /// error (if any) is put back. Text with a NUL byte, which a C string cannot carry, takes
    /// the slower path of a backtrace made into text at once.
    ///
    /// Cold: callers keep their error paths out of line.
    #[cold]
    pub fn new(kind: impl AsRef<str>, message: impl AsRef<str>) -> Error {
        let (kind, message) = (kind.as_ref(), message.as_ref());
        if let (Ok(c_kind), Ok(c_message)) = (CString::new(kind), CString::new(message)) {
            let previous = Self::take_raised();
            // SAFETY: both strings are NUL-terminated and live for the call.
            unsafe { abi::TVMFFIErrorSetRaisedFromCStr(c_kind.as_ptr(), c_message.as_ptr()) };
            let raised = Self::take_raised();
            if let Some(previous) = previous {
                previous.set_raised();
            }
            if let Some(raised) = raised {
                return raised;
            }
        }
        Self::with_text_backtrace(kind, message)
    }

    /// [`Error::new`] with the backtrace made into text at once.
    #[cold]
    #[inline(never)]
    fn with_text_backtrace(kind: &str, message: &str) -> Error {
        // The captured text is copied by `create` before anything captures again.
        let backtrace = captured_backtrace();
        Self::create(kind, message, backtrace, None, None)
    }

    /// Creates an error with an explicit backtrace text.
    pub fn with_backtrace(
        kind: impl AsRef<str>,
        message: impl AsRef<str>,
        backtrace: &str,
    ) -> Error {
        Self::create(
            kind.as_ref(),
            message.as_ref(),
            TVMFFIByteArray::from_text(backtrace),
            None,
            None,
        )
    }

    /// Creates an error that carries `context` as its extra context (the cell's
    /// `extra_context`, such as the foreign exception an error stands for), readable again with
    /// [`Error::extra_context`]. Only objects can be carried: any other value (None included)
    /// makes an error without extra context.
    pub fn with_extra_context(
        kind: impl AsRef<str>,
        message: impl AsRef<str>,
        backtrace: &str,
        context: Any,
    ) -> Error {
        Self::create(
            kind.as_ref(),
            message.as_ref(),
            TVMFFIByteArray::from_text(backtrace),
            None,
            context.as_object_ptr(),
        )
    }

    /// A new error object. `cause` and `extra_context` are borrowed; the cell retains them.
    fn create(
        kind: &str,
        message: &str,
        backtrace: TVMFFIByteArray,
        cause: Option<&Error>,
        extra_context: Option<*mut TVMFFIObject>,
    ) -> Error {
        let kind = TVMFFIByteArray::from_text(kind);
        let message = TVMFFIByteArray::from_text(message);
        let cause = cause.map_or(std::ptr::null_mut(), |c| c.as_raw().cast());
        let extra_context = extra_context.map_or(std::ptr::null_mut(), |c| c.cast());
        let mut out = std::ptr::null_mut();
        // SAFETY: all arrays point at live bytes; the cause and the extra context are live
        // objects the caller keeps for the call, retained by the cell.
        let rc = unsafe {
            abi::TVMFFIErrorCreateWithCauseAndExtraContext(
                &kind,
                &message,
                &backtrace,
                cause,
                extra_context,
                &mut out,
            )
        };
        if rc != 0 || out.is_null() {
            std::alloc::handle_alloc_error(std::alloc::Layout::new::<ErrorObj>());
        }
        // SAFETY: a successful create hands us one owned reference to an error object.
        unsafe { Error::from_raw(out.cast()) }
    }

    /// A copy of this error (kind, message, backtrace and cause) that carries `context` as its
    /// extra context (objects only, as in [`Error::with_extra_context`]).
    pub fn with_replaced_extra_context(&self, context: Any) -> Error {
        let backtrace = self.backtrace();
        Self::create(
            &self.kind(),
            &self.message(),
            TVMFFIByteArray::from_bytes(backtrace.as_bytes()),
            self.cause().as_ref(),
            context.as_object_ptr(),
        )
    }

    /// A copy of this error whose cause is `cause`.
    pub fn with_cause(self, cause: Error) -> Error {
        let backtrace = self.backtrace();
        Self::create(
            &self.kind(),
            &self.message(),
            TVMFFIByteArray::from_bytes(backtrace.as_bytes()),
            Some(&cause),
            None,
        )
    }

    /// Takes over one strong reference to an error object.
    ///
    /// # Safety
    /// `ptr` points at a live `ffi.Error` object; the caller transfers one strong reference.
    pub unsafe fn from_raw(ptr: *mut TVMFFIObject) -> Error {
        // SAFETY: guaranteed by the caller.
        let obj = unsafe { ObjectRef::from_raw(ptr) };
        Error { obj }
    }

    /// Wraps an error object reference.
    pub fn from_object(obj: ObjectRef<ErrorObj>) -> Error {
        Error { obj }
    }

    /// The underlying object reference.
    pub fn as_object(&self) -> &ObjectRef<ErrorObj> {
        &self.obj
    }

    /// The header pointer, borrowed.
    pub fn as_raw(&self) -> *mut TVMFFIObject {
        self.obj.as_raw()
    }

    /// Gives up ownership of the error object.
    pub fn into_raw(self) -> *mut TVMFFIObject {
        self.obj.into_raw()
    }

    /// The kind string, such as `"ValueError"`.
    pub fn kind(&self) -> Cow<'_, str> {
        cell_text(&self.obj.cell().kind)
    }

    /// The message.
    pub fn message(&self) -> Cow<'_, str> {
        cell_text(&self.obj.cell().message)
    }

    /// The backtrace text, most recent call first.
    ///
    /// An error whose cell has no backtrace text is first asked for it through its
    /// `update_backtrace` hook, with an empty append: a producer that records frames when the
    /// error is raised (this runtime does) makes the text then; for any other error the empty
    /// append changes nothing.
    pub fn backtrace(&self) -> Cow<'_, str> {
        // SAFETY: the field is aligned and lives as long as the object. Producers that make the
        // text on request store the size atomically (release) once the text is complete; other
        // writes of the cell happen before it is shared, or are serialized by the owner.
        let size = unsafe { AtomicUsize::from_ptr(&raw mut (*self.obj.cell_ptr()).backtrace.size) }
            .load(Ordering::Acquire);
        if size == 0 {
            self.update_backtrace("", true);
        }
        cell_text(&self.obj.cell().backtrace)
    }

    /// The error that caused this one, if any.
    pub fn cause(&self) -> Option<Error> {
        let cause = self.obj.cell().cause_chain;
        if cause.is_null() {
            return None;
        }
        // SAFETY: the cell owns a reference to its cause, which is an error object.
        let obj = unsafe { ObjectRef::from_borrowed(cause.cast()) };
        Some(Error { obj })
    }

    /// The extra context the error carries (see [`Error::with_extra_context`]), borrowed from
    /// it; `None` if it carries none.
    pub fn extra_context(&self) -> Option<AnyView<'_>> {
        let context = self.obj.cell().extra_context;
        if context.is_null() {
            return None;
        }
        // SAFETY: the cell owns a reference to its extra context, a live object whose header
        // gives its type, for as long as the error lives.
        Some(unsafe { AnyView::from_object_ptr(context.cast()) })
    }

    /// Whether the kind equals `kind`.
    pub fn is_kind(&self, kind: impl AsRef<str>) -> bool {
        self.kind() == kind.as_ref()
    }

    /// Replaces (`append == false`) or extends the backtrace through the cell's update hook.
    pub fn update_backtrace(&self, backtrace: &str, append: bool) {
        let text = TVMFFIByteArray::from_text(backtrace);
        let mode = if append {
            abi::kTVMFFIBacktraceUpdateModeAppend
        } else {
            abi::kTVMFFIBacktraceUpdateModeReplace
        };
        if let Some(update) = self.obj.cell().update_backtrace {
            // SAFETY: the hook belongs to this object and copies the bytes it is given.
            unsafe { update(self.as_raw().cast(), &text, mode) };
        }
    }

    /// Stores this error in the calling thread's error slot (replacing any previous one).
    pub fn set_raised(&self) {
        // SAFETY: the slot takes its own reference; we keep ours.
        unsafe { abi::TVMFFIErrorSetRaised(self.as_raw().cast()) }
    }

    /// Moves the error out of the calling thread's error slot, leaving it empty.
    pub fn take_raised() -> Option<Error> {
        let mut out = std::ptr::null_mut();
        // SAFETY: `out` is a valid slot; the result is an owned reference or NULL.
        unsafe { abi::TVMFFIErrorMoveFromRaised(&mut out) };
        // SAFETY: a non-NULL result is an owned error reference.
        (!out.is_null()).then(|| unsafe { Error::from_raw(out.cast()) })
    }

    /// The raised error, or a new error of `kind` naming `context` when a C function failed
    /// without raising one.
    pub fn take_raised_or(kind: impl AsRef<str>, context: impl fmt::Display) -> Error {
        Self::take_raised().unwrap_or_else(|| {
            Error::new(
                kind,
                format!("call failed without raising an error: {context}"),
            )
        })
    }

    /// Raises a new error from a kind and message in C-string form (through the C API).
    pub fn raise_from_str(kind: &str, message: &str) {
        let kind = CString::new(kind.replace('\0', "\\0")).expect("NUL removed");
        let message = CString::new(message.replace('\0', "\\0")).expect("NUL removed");
        // SAFETY: both strings are NUL-terminated and live for the call.
        unsafe { abi::TVMFFIErrorSetRaisedFromCStr(kind.as_ptr(), message.as_ptr()) }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind(), self.message())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind(), self.message())?;
        if let Some(cause) = self.cause() {
            write!(f, "\ncaused by: {cause:?}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// Returns early with an error of the given kind and formatted message.
#[macro_export]
macro_rules! bail {
    ($kind:expr, $($fmt:tt)+) => {
        return ::core::result::Result::Err($crate::Error::new($kind, format!($($fmt)+)))
    };
}

/// Returns early with an error unless the condition holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $kind:expr, $($fmt:tt)+) => {
        if !$cond {
            $crate::bail!($kind, $($fmt)+);
        }
    };
}
