//! Device selection and attributes, and the errors where no driver is installed.

use std::process::Command;
use std::sync::Arc;

use device_kit::buffer::BufferBackend;
use device_vulkan::{VulkanBackend, VulkanDeviceApi, VulkanOptions};
use tvm_ffi::Device;
use tvm_runtime::device::{DeviceApi, DeviceAttr, alloc_data, device_attr, device_exists};

use crate::common::{api, assert_quiet, vulkan0};

#[test]
fn devices_are_listed_and_answer_their_attributes() {
    let Some(api) = api() else { return };
    let names = api.device_names().unwrap();
    let attr = |a| device_attr(vulkan0(), a).unwrap().expect("answered");
    assert!(device_exists(vulkan0()));
    assert_eq!(
        attr(DeviceAttr::DeviceName).cast::<String>().unwrap(),
        names[0]
    );
    assert!(attr(DeviceAttr::MaxThreadsPerBlock).cast::<i64>().unwrap() >= 128);
    assert!(attr(DeviceAttr::WarpSize).cast::<i64>().unwrap() >= 1);
    assert!(
        attr(DeviceAttr::MaxSharedMemoryPerBlock)
            .cast::<i64>()
            .unwrap()
            >= 16384
    );
    assert!(attr(DeviceAttr::TotalGlobalMemory).cast::<i64>().unwrap() > 0);
    let version = attr(DeviceAttr::ApiVersion).cast::<String>().unwrap();
    assert!(version.starts_with("1."), "{version}");
    let dims = attr(DeviceAttr::MaxThreadDimensions)
        .cast::<String>()
        .unwrap();
    assert!(
        dims.starts_with('[') && dims.matches(',').count() == 2,
        "{dims}"
    );
    assert!(
        device_attr(vulkan0(), DeviceAttr::GcnArch)
            .unwrap()
            .is_none()
    );
    // Debug test runs check the validation layer's silence wherever Debian's layer is installed.
    let layer = "/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json";
    if cfg!(debug_assertions) && std::path::Path::new(layer).exists() {
        assert!(api.validation_enabled());
    }
    assert_quiet(&api);
}

#[test]
fn a_missing_index_does_not_exist_and_names_what_is_present() {
    let Some(api) = api() else { return };
    let missing = Device::vulkan(77);
    assert!(!device_exists(missing));
    let exist = api.attr(missing, DeviceAttr::Exist).unwrap().unwrap();
    assert_eq!(exist.cast::<i64>().unwrap(), 0);
    let err = alloc_data(missing, 16, 64, tvm_ffi::DataType::float(32)).unwrap_err();
    let names = api.device_names().unwrap();
    assert!(
        err.message().contains("no Vulkan device 77") && err.message().contains(&names[0]),
        "{err}"
    );
}

/// Run by [`with_no_driver_exist_is_false_and_allocation_names_the_driver`] in a child process
/// whose loader finds no driver.
#[test]
#[ignore = "run in a child process without a Vulkan driver"]
fn no_driver_child() {
    let api = VulkanDeviceApi::new(Arc::new(VulkanBackend::new(Default::default())));
    tvm_runtime::device::register_device_api(7, std::sync::Arc::new(api)).unwrap();
    assert!(!device_exists(vulkan0()));
    let err = alloc_data(vulkan0(), 16, 64, tvm_ffi::DataType::float(32)).unwrap_err();
    assert!(
        err.message().contains("ERROR_INCOMPATIBLE_DRIVER"),
        "{}",
        err.message()
    );
}

#[test]
fn with_no_driver_exist_is_false_and_allocation_names_the_driver() {
    let Some(_) = api() else { return };
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "devices::no_driver_child",
            "--ignored",
            "--nocapture",
        ])
        .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
        .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert!(out.contains("1 passed"), "{out}");
}

#[test]
fn a_missing_loader_is_an_error_naming_the_library() {
    let api = VulkanDeviceApi::new(Arc::new(VulkanBackend::new(VulkanOptions {
        loader: Some("/nonexistent/libvulkan.so.1".into()),
        ..Default::default()
    })));
    let err = tvm_ffi::Error::from(api.device_names().unwrap_err());
    assert_eq!(err.kind(), "RuntimeError", "{err}");
    assert!(
        err.message().contains("'/nonexistent/libvulkan.so.1'")
            && err.message().contains("TVM_VULKAN_LOADER"),
        "{err}"
    );
    // Asked again, the same answer: nothing is retried or left half made.
    let again = tvm_ffi::Error::from(api.device_names().unwrap_err());
    assert_eq!(again.message(), err.message());
    assert_eq!(
        api.attr(vulkan0(), DeviceAttr::Exist)
            .unwrap()
            .unwrap()
            .cast::<i64>()
            .unwrap(),
        0
    );
}

#[test]
fn set_raw_stream_refuses_what_sync_refuses() {
    let Some(api) = api() else { return };
    device_kit::testing::assert_default_stream_only(vulkan0(), "Vulkan");
    assert_quiet(&api);
}
