//! The backend's errors and their one conversion into the runtime's [`tvm_ffi::Error`].

use std::fmt;

use tvm_ffi::ErrorKind;

/// What can go wrong in the WebGPU backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebGpuError {
    /// No adapter, no driver or no such device: the message says which.
    Unavailable(String),
    /// wgpu refused an operation or the device failed (the message is wgpu's or naga's).
    Device(String),
    /// Device or host memory ran out.
    OutOfMemory(String),
    /// A value the caller passed is wrong (the message names it).
    InvalidValue(String),
    /// A value of the wrong type (the message names it).
    WrongType(String),
}

impl WebGpuError {
    /// A device or driver that is not there.
    pub(crate) fn unavailable(message: impl Into<String>) -> WebGpuError {
        WebGpuError::Unavailable(message.into())
    }

    /// A wrong value, named in `message`.
    pub(crate) fn invalid(message: impl Into<String>) -> WebGpuError {
        WebGpuError::InvalidValue(message.into())
    }

    /// A failure of the device or of wgpu, described in `message`.
    pub(crate) fn device(message: impl Into<String>) -> WebGpuError {
        WebGpuError::Device(message.into())
    }

    /// The error wgpu reported for `what`, by its kind.
    pub(crate) fn from_wgpu(what: &dyn std::fmt::Display, error: &wgpu::Error) -> WebGpuError {
        match error {
            wgpu::Error::OutOfMemory { .. } => {
                WebGpuError::OutOfMemory(format!("{what}: the WebGPU device is out of memory"))
            }
            wgpu::Error::Validation { description, .. } => {
                WebGpuError::InvalidValue(format!("{what}: {description}"))
            }
            wgpu::Error::Internal { description, .. } => {
                WebGpuError::Device(format!("{what}: {description}"))
            }
        }
    }
}

impl fmt::Display for WebGpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WebGpuError::Unavailable(m) => write!(f, "WebGPU is unavailable: {m}"),
            WebGpuError::Device(m)
            | WebGpuError::OutOfMemory(m)
            | WebGpuError::InvalidValue(m)
            | WebGpuError::WrongType(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for WebGpuError {}

impl From<WebGpuError> for tvm_ffi::Error {
    fn from(e: WebGpuError) -> tvm_ffi::Error {
        let kind = match &e {
            WebGpuError::Unavailable(_) | WebGpuError::Device(_) => ErrorKind::RuntimeError,
            WebGpuError::OutOfMemory(_) => ErrorKind::MemoryError,
            WebGpuError::InvalidValue(_) => ErrorKind::ValueError,
            WebGpuError::WrongType(_) => ErrorKind::TypeError,
        };
        tvm_ffi::Error::new(kind, e.to_string())
    }
}

impl From<tvm_ffi::Error> for WebGpuError {
    /// A refusal of the runtime's shared code (metadata, launch arguments, copies), by its kind.
    fn from(e: tvm_ffi::Error) -> WebGpuError {
        if e.kind() == "TypeError" {
            WebGpuError::WrongType(e.message().into_owned())
        } else {
            WebGpuError::InvalidValue(e.message().into_owned())
        }
    }
}

/// Results of this crate.
pub type WgResult<T> = Result<T, WebGpuError>;
