//! The backend's errors: the kit's [`BackendError`] with a failed Vulkan call as its failure.

use std::fmt;

use ash::vk;
use device_kit::buffer::{BackendError, BackendFailure};

/// A Vulkan call that failed, and what it returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VulkanCall {
    /// The Vulkan function.
    pub call: &'static str,
    /// What it returned.
    pub result: vk::Result,
}

impl fmt::Display for VulkanCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed: {}", self.call, self.result)?;
        if self.result == vk::Result::ERROR_DEVICE_LOST {
            f.write_str(" (the Vulkan device was lost)")?;
        }
        Ok(())
    }
}

impl BackendFailure for VulkanCall {
    const TITLE: &'static str = "Vulkan";
    const DEVICE_NAME: &'static str = "vulkan";
}

/// What can go wrong in the Vulkan backend.
pub type VulkanError = BackendError<VulkanCall>;

/// A failed Vulkan call; running out of memory gets its own variant.
pub(crate) fn vk_error(call: &'static str, result: vk::Result) -> VulkanError {
    match result {
        vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => {
            VulkanError::OutOfMemory(format!("{call} failed: {result}"))
        }
        _ => VulkanError::Failed(VulkanCall { call, result }),
    }
}

/// Results of this crate.
pub type VkResult<T> = Result<T, VulkanError>;
