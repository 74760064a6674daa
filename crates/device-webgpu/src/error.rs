//! The backend's errors: the kit's [`BackendError`] with wgpu's (or the device's) message as
//! its failure.

use std::fmt;

use device_kit::buffer::{BackendError, BackendFailure};

/// wgpu refused an operation or the device failed (the message is wgpu's or naga's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WgpuFailure(pub String);

impl fmt::Display for WgpuFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl BackendFailure for WgpuFailure {
    const TITLE: &'static str = "WebGPU";
    const DEVICE_NAME: &'static str = "webgpu";
}

/// What can go wrong in the WebGPU backend.
pub type WebGpuError = BackendError<WgpuFailure>;

/// A failure of the device or of wgpu, described in `message`.
pub(crate) fn device_error(message: impl Into<String>) -> WebGpuError {
    WebGpuError::Failed(WgpuFailure(message.into()))
}

/// The error wgpu reported for `what`, by its kind.
pub(crate) fn wgpu_error(what: &dyn fmt::Display, error: &wgpu::Error) -> WebGpuError {
    match error {
        wgpu::Error::OutOfMemory { .. } => {
            WebGpuError::OutOfMemory(format!("{what}: the WebGPU device is out of memory"))
        }
        wgpu::Error::Validation { description, .. } => {
            WebGpuError::InvalidValue(format!("{what}: {description}"))
        }
        wgpu::Error::Internal { description, .. } => device_error(format!("{what}: {description}")),
    }
}

/// Results of this crate.
pub type WgResult<T> = Result<T, WebGpuError>;
