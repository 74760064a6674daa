//! The errors of a buffer-handle backend and their one conversion into the runtime's
//! [`tvm_ffi::Error`]: one enum for every such backend, whose call failures are the backend's
//! own type.

use std::fmt;

use tvm_ffi::ErrorKind;

/// A failed call of a backend's API (a Vulkan call and its result, wgpu's message), and the
/// names the backend's messages use.
pub trait BackendFailure:
    fmt::Display + fmt::Debug + Clone + PartialEq + Eq + Send + Sync + 'static
{
    /// The backend's name in text: `Vulkan`, `WebGPU`.
    const TITLE: &'static str;
    /// The name of its devices: `vulkan` (as in `vulkan:0`), `webgpu`.
    const DEVICE_NAME: &'static str;
}

/// What can go wrong in a buffer-handle backend whose calls fail with `F`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendError<F> {
    /// No loader, no driver or no such device: the message says which.
    Unavailable(String),
    /// A call of the backend's API failed, or the device did.
    Failed(F),
    /// Device or host memory ran out.
    OutOfMemory(String),
    /// A value the caller passed is wrong (the message names it).
    InvalidValue(String),
    /// A value of the wrong type (the message names it).
    WrongType(String),
}

/// Results of a buffer-handle backend whose calls fail with `F`.
pub type BackendResult<T, F> = Result<T, BackendError<F>>;

impl<F> BackendError<F> {
    /// A device or driver that is not there.
    pub fn unavailable(message: impl Into<String>) -> BackendError<F> {
        BackendError::Unavailable(message.into())
    }

    /// A wrong value, named in `message`.
    pub fn invalid(message: impl Into<String>) -> BackendError<F> {
        BackendError::InvalidValue(message.into())
    }
}

impl<F: BackendFailure> fmt::Display for BackendError<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendError::Unavailable(m) => write!(f, "{} is unavailable: {m}", F::TITLE),
            BackendError::Failed(failure) => fmt::Display::fmt(failure, f),
            BackendError::OutOfMemory(m)
            | BackendError::InvalidValue(m)
            | BackendError::WrongType(m) => f.write_str(m),
        }
    }
}

impl<F: BackendFailure> std::error::Error for BackendError<F> {}

impl<F: BackendFailure> From<BackendError<F>> for tvm_ffi::Error {
    fn from(e: BackendError<F>) -> tvm_ffi::Error {
        let kind = match &e {
            BackendError::Unavailable(_) | BackendError::Failed(_) => ErrorKind::RuntimeError,
            BackendError::OutOfMemory(_) => ErrorKind::MemoryError,
            BackendError::InvalidValue(_) => ErrorKind::ValueError,
            BackendError::WrongType(_) => ErrorKind::TypeError,
        };
        tvm_ffi::Error::new(kind, e.to_string())
    }
}

impl<F> From<tvm_ffi::Error> for BackendError<F> {
    /// A refusal of the kit's shared code (metadata, launch arguments, copies), by its kind.
    fn from(e: tvm_ffi::Error) -> BackendError<F> {
        if e.kind() == "TypeError" {
            BackendError::WrongType(e.message().into_owned())
        } else {
            BackendError::InvalidValue(e.message().into_owned())
        }
    }
}
