//! The Vulkan instance: the loader (`libvulkan`, opened at run time), the optional validation
//! layer and its messages, and the physical devices present, in the loader's order.

use std::ffi::{CStr, c_void};
use std::io::Write;
use std::sync::{Mutex, PoisonError};

use ash::vk;

use crate::error::{VulkanError, vk_error};

/// The validation layer Debian's `vulkan-validationlayers` installs.
const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// The Vulkan loader opened when no other is named.
#[cfg(not(any(target_vendor = "apple", windows)))]
const DEFAULT_LOADER: &str = "libvulkan.so.1";
#[cfg(target_vendor = "apple")]
const DEFAULT_LOADER: &str = "libvulkan.dylib";
#[cfg(windows)]
const DEFAULT_LOADER: &str = "vulkan-1.dll";

/// How the backend sets itself up; read once, when the instance is created.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VulkanOptions {
    /// Enable `VK_LAYER_KHRONOS_validation` (when installed) and record its messages.
    pub validation: bool,
    /// Treat every device as if its memory were not host-visible, so that copies take the
    /// staging path a discrete GPU needs (for testing that path on a CPU driver).
    pub force_staging: bool,
    /// The Vulkan loader library to open instead of the system's (`libvulkan.so.1` on Linux).
    pub loader: Option<std::path::PathBuf>,
}

impl VulkanOptions {
    /// The options the environment asks for: `TVM_VULKAN_VALIDATION=1`,
    /// `TVM_VULKAN_FORCE_STAGING=1` and `TVM_VULKAN_LOADER=<path of a Vulkan loader>`.
    pub fn from_env() -> VulkanOptions {
        let on = |name: &str| std::env::var(name).is_ok_and(|v| v == "1");
        VulkanOptions {
            validation: on("TVM_VULKAN_VALIDATION"),
            force_staging: on("TVM_VULKAN_FORCE_STAGING"),
            loader: std::env::var_os("TVM_VULKAN_LOADER")
                .filter(|path| !path.is_empty())
                .map(Into::into),
        }
    }
}

/// What one physical device offers, captured at start-up.
#[derive(Clone)]
pub(crate) struct PhysicalDevice {
    pub(crate) raw: vk::PhysicalDevice,
    pub(crate) name: String,
    pub(crate) properties: vk::PhysicalDeviceProperties,
    pub(crate) memory: vk::PhysicalDeviceMemoryProperties,
    pub(crate) subgroup_size: u32,
    /// The first queue family that can run compute work.
    pub(crate) compute_family: Option<u32>,
}

/// Messages of the validation layer (warnings and errors), in arrival order.
#[derive(Default)]
pub(crate) struct ValidationLog {
    messages: Mutex<Vec<String>>,
}

/// The loader, the instance and the devices it found.
pub(crate) struct Instance {
    /// Kept alive: the function pointers of `raw` point into the library it opened.
    pub(crate) entry: ash::Entry,
    pub(crate) raw: ash::Instance,
    pub(crate) api_version: u32,
    pub(crate) devices: Vec<PhysicalDevice>,
    pub(crate) options: VulkanOptions,
    messenger: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    /// Boxed so that its address, handed to the messenger, stays put.
    log: Box<ValidationLog>,
}

/// Receives the validation layer's messages: records warnings and errors and prints them.
unsafe extern "system" fn on_validation_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user_data: *mut c_void,
) -> vk::Bool32 {
    let serious = vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
        | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR;
    if !severity.intersects(serious) || data.is_null() || user_data.is_null() {
        return vk::FALSE;
    }
    // SAFETY: the layer passes valid callback data for the duration of the call.
    let text = unsafe { (*data).message_as_c_str() }
        .map(|m| m.to_string_lossy().into_owned())
        .unwrap_or_default();
    // SAFETY: `user_data` is the instance's boxed log, which outlives the messenger.
    let log = unsafe { &*user_data.cast::<ValidationLog>() };
    let _ = writeln!(std::io::stderr(), "tvm vulkan validation: {text}");
    log.messages
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(text);
    vk::FALSE
}

/// Whether the loader offers instance layer `name`.
fn has_layer(entry: &ash::Entry, name: &CStr) -> bool {
    // SAFETY: a plain query of the loader.
    let layers = unsafe { entry.enumerate_instance_layer_properties() }.unwrap_or_default();
    layers
        .iter()
        .any(|l| l.layer_name_as_c_str().is_ok_and(|n| n == name))
}

impl Instance {
    /// Opens `libvulkan`, creates an instance and lists the physical devices. A missing loader
    /// or driver is an error that names it.
    pub(crate) fn load(options: VulkanOptions) -> Result<Instance, VulkanError> {
        let loader = options
            .loader
            .clone()
            .unwrap_or_else(|| DEFAULT_LOADER.into());
        // SAFETY: dlopens the Vulkan loader asked for, whose initialisers are trusted.
        let entry = unsafe { ash::Entry::load_from(&loader) }.map_err(|e| {
            VulkanError::unavailable(format!(
                "the Vulkan loader '{}' could not be opened ({e}); install it (Debian: \
                 libvulkan1) or name another with TVM_VULKAN_LOADER",
                loader.display()
            ))
        })?;
        // SAFETY: a plain query of the loader.
        let loader_version = unsafe { entry.try_enumerate_instance_version() }
            .ok()
            .flatten()
            .unwrap_or(vk::API_VERSION_1_0);
        let api_version = loader_version.min(vk::API_VERSION_1_3);
        let app = vk::ApplicationInfo::default()
            .application_name(c"tvm")
            .engine_name(c"tvm")
            .api_version(api_version);
        let validation = options.validation && has_layer(&entry, VALIDATION_LAYER);
        if options.validation && !validation {
            let _ = writeln!(
                std::io::stderr(),
                "tvm vulkan: validation was requested but {} is not installed",
                VALIDATION_LAYER.to_string_lossy()
            );
        }
        let layers = [VALIDATION_LAYER.as_ptr()];
        let extensions = [ash::ext::debug_utils::NAME.as_ptr()];
        let mut info = vk::InstanceCreateInfo::default().application_info(&app);
        if validation {
            info = info
                .enabled_layer_names(&layers)
                .enabled_extension_names(&extensions);
        }
        // SAFETY: `info` and everything it points at live across the call.
        let raw = unsafe { entry.create_instance(&info, None) }.map_err(|e| {
            if e == vk::Result::ERROR_INCOMPATIBLE_DRIVER {
                VulkanError::unavailable(
                    "no Vulkan driver is installed (ERROR_INCOMPATIBLE_DRIVER; Debian: \
                     mesa-vulkan-drivers)",
                )
            } else {
                vk_error("vkCreateInstance", e)
            }
        })?;
        let mut instance = Instance {
            entry,
            raw,
            api_version,
            devices: Vec::new(),
            options,
            messenger: None,
            log: Box::default(),
        };
        if validation {
            instance.messenger = Some(instance.create_messenger()?);
        }
        instance.devices = instance.enumerate()?;
        Ok(instance)
    }

    fn create_messenger(
        &self,
    ) -> Result<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT), VulkanError> {
        let loader = ash::ext::debug_utils::Instance::new(&self.entry, &self.raw);
        let info = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(
                vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                    | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
            )
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                    | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
            )
            .pfn_user_callback(Some(on_validation_message))
            .user_data(
                std::ptr::from_ref::<ValidationLog>(&self.log)
                    .cast_mut()
                    .cast(),
            );
        // SAFETY: the log the callback writes to outlives the messenger (destroyed in Drop).
        let messenger = unsafe { loader.create_debug_utils_messenger(&info, None) }
            .map_err(|e| vk_error("vkCreateDebugUtilsMessengerEXT", e))?;
        Ok((loader, messenger))
    }

    fn enumerate(&self) -> Result<Vec<PhysicalDevice>, VulkanError> {
        // SAFETY: a query of a live instance.
        let raw_devices = unsafe { self.raw.enumerate_physical_devices() }
            .map_err(|e| vk_error("vkEnumeratePhysicalDevices", e))?;
        Ok(raw_devices.into_iter().map(|d| self.describe(d)).collect())
    }

    fn describe(&self, raw: vk::PhysicalDevice) -> PhysicalDevice {
        // SAFETY: queries of a physical device of this instance.
        let (properties, memory, families) = unsafe {
            (
                self.raw.get_physical_device_properties(raw),
                self.raw.get_physical_device_memory_properties(raw),
                self.raw.get_physical_device_queue_family_properties(raw),
            )
        };
        let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
        if properties.api_version >= vk::API_VERSION_1_1 && self.api_version >= vk::API_VERSION_1_1
        {
            let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut subgroup);
            // SAFETY: a query of a Vulkan 1.1 device; the chain lives across the call.
            unsafe { self.raw.get_physical_device_properties2(raw, &mut props2) };
        }
        let compute_family = families
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .map(|i| i as u32);
        PhysicalDevice {
            raw,
            name: properties
                .device_name_as_c_str()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            properties,
            memory,
            subgroup_size: subgroup.subgroup_size.max(1),
            compute_family,
        }
    }

    /// The validation layer's warnings and errors so far.
    pub(crate) fn validation_messages(&self) -> Vec<String> {
        self.log
            .messages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether the validation layer is on.
    pub(crate) fn validation_enabled(&self) -> bool {
        self.messenger.is_some()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: every device of this instance is gone (devices keep the instance alive), and
        // the messenger is destroyed before the instance.
        unsafe {
            if let Some((loader, messenger)) = self.messenger.take() {
                loader.destroy_debug_utils_messenger(messenger, None);
            }
            self.raw.destroy_instance(None);
        }
    }
}
