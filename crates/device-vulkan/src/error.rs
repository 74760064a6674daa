//! The backend's errors and their one conversion into the runtime's [`tvm_ffi::Error`].

use std::fmt;

use ash::vk;
use tvm_ffi::ErrorKind;

/// What can go wrong in the Vulkan backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VulkanError {
    /// No loader, no driver or no such device: the message says which.
    Unavailable(String),
    /// A Vulkan call failed.
    Call {
        /// The Vulkan function.
        call: &'static str,
        /// What it returned.
        result: vk::Result,
    },
    /// Device or host memory ran out.
    OutOfMemory(String),
    /// A value the caller passed is wrong (the message names it).
    InvalidValue(String),
    /// A value of the wrong type (the message names it).
    WrongType(String),
}

/// A failed Vulkan call; running out of memory gets its own variant.
pub(crate) fn vk_error(call: &'static str, result: vk::Result) -> VulkanError {
    match result {
        vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => {
            VulkanError::OutOfMemory(format!("{call} failed: {result}"))
        }
        _ => VulkanError::Call { call, result },
    }
}

impl VulkanError {
    /// A device or driver that is not there.
    pub(crate) fn unavailable(message: impl Into<String>) -> VulkanError {
        VulkanError::Unavailable(message.into())
    }

    /// A wrong value, named in `message`.
    pub(crate) fn invalid(message: impl Into<String>) -> VulkanError {
        VulkanError::InvalidValue(message.into())
    }
}

impl fmt::Display for VulkanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VulkanError::Unavailable(m) => write!(f, "Vulkan is unavailable: {m}"),
            VulkanError::Call { call, result } => {
                write!(f, "{call} failed: {result}")?;
                if *result == vk::Result::ERROR_DEVICE_LOST {
                    f.write_str(" (the Vulkan device was lost)")?;
                }
                Ok(())
            }
            VulkanError::OutOfMemory(m)
            | VulkanError::InvalidValue(m)
            | VulkanError::WrongType(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for VulkanError {}

impl From<VulkanError> for tvm_ffi::Error {
    fn from(e: VulkanError) -> tvm_ffi::Error {
        let kind = match &e {
            VulkanError::Unavailable(_) | VulkanError::Call { .. } => ErrorKind::RuntimeError,
            VulkanError::OutOfMemory(_) => ErrorKind::MemoryError,
            VulkanError::InvalidValue(_) => ErrorKind::ValueError,
            VulkanError::WrongType(_) => ErrorKind::TypeError,
        };
        tvm_ffi::Error::new(kind, e.to_string())
    }
}

impl From<tvm_ffi::Error> for VulkanError {
    /// A refusal of the runtime's shared kernel code (metadata, launch arguments), by its kind.
    fn from(e: tvm_ffi::Error) -> VulkanError {
        if e.kind() == "TypeError" {
            VulkanError::WrongType(e.message().into_owned())
        } else {
            VulkanError::InvalidValue(e.message().into_owned())
        }
    }
}

/// Results of this crate.
pub type VkResult<T> = Result<T, VulkanError>;
