//! Loading HIP: missing, too old, without devices, missing entry points, index range, and the
//! attributes it reports.

use device_kit::driver::runtime::RuntimeSource;
use tvm_ffi::DataType;
use tvm_runtime::device::DeviceAttr;

use super::*;

fn exists(api: &RocmDeviceApi, device: Device) -> bool {
    let value = api.attr(device, DeviceAttr::Exist).unwrap().unwrap();
    value.try_as::<i64>() == Some(1)
}

#[test]
fn a_missing_runtime_is_an_error_naming_the_library_and_the_loader_reason() {
    let api = RocmDeviceApi::new(Arc::new(RocmBackend::with_library(
        "/nonexistent/libamdhip64.so",
    )));
    assert!(!exists(&api, rocm(0)));
    let reason = api.unavailable_reason(rocm(0)).unwrap();
    assert!(
        reason.contains("HIP runtime not found: /nonexistent/libamdhip64.so")
            && reason.contains("cannot open shared object file"),
        "{reason}"
    );
    let err = api.alloc(rocm(0), 16, 64, DataType::uint(8)).unwrap_err();
    assert!(
        err.message().contains("/nonexistent/libamdhip64.so"),
        "{err}"
    );
}

#[test]
fn a_library_without_the_entry_points_names_the_first_missing_one() {
    let err = RocmBackend::with_library("libc.so.6")
        .runtime()
        .unwrap_err();
    assert_eq!(err.message(), "libc.so.6 has no symbol hipInit");
}

#[test]
fn an_old_runtime_is_refused_with_both_versions() {
    let fake = build_fake(&["FAKE_RUNTIME_VERSION=40421432"]);
    let api = RocmDeviceApi::new(backend(&fake));
    assert!(!exists(&api, rocm(0)));
    let reason = api.unavailable_reason(rocm(0)).unwrap();
    assert!(
        reason.contains("version 4.4.21432, older than 5.0.0"),
        "{reason}"
    );
}

#[test]
fn a_runtime_without_devices_says_so() {
    let fake = build_fake(&["FAKE_DEVICE_COUNT=0"]);
    let api = RocmDeviceApi::new(backend(&fake));
    assert!(!exists(&api, rocm(0)));
    let reason = api.unavailable_reason(rocm(0)).unwrap();
    assert!(
        reason.contains("the HIP runtime sees no device")
            && reason.contains("hipErrorInvalidDevice (101): invalid device ordinal"),
        "{reason}"
    );
}

#[test]
fn device_indices_out_of_range_do_not_exist_and_others_keep_working() {
    let (_fake, _backend, api) = fake_api();
    device_kit::testing::assert_two_devices(&api, "HIP runtime");
}

#[test]
fn attributes_come_from_hip_with_its_own_numbering() {
    let (_fake, _backend, api) = fake_api();
    let attr = |id: i32, attr| api.attr(rocm(id), attr).unwrap().unwrap();
    let int = |id, a| attr(id, a).try_as::<i64>().unwrap();
    let text = |id, a| attr(id, a).try_as::<String>().unwrap();
    assert_eq!(text(0, DeviceAttr::GcnArch), "gfx90a");
    assert_eq!(text(0, DeviceAttr::ComputeVersion), "9.0");
    assert_eq!(text(1, DeviceAttr::DeviceName), "Fake AMD Instinct 1");
    assert_eq!(int(0, DeviceAttr::MultiProcessorCount), 104);
    assert_eq!(int(1, DeviceAttr::MultiProcessorCount), 105);
    assert_eq!(int(0, DeviceAttr::WarpSize), 64);
    assert_eq!(int(0, DeviceAttr::MaxThreadsPerBlock), 1024);
    assert_eq!(int(0, DeviceAttr::MaxSharedMemoryPerBlock), 64 << 10);
    assert_eq!(int(0, DeviceAttr::MaxClockRate), 1_700_000);
    assert_eq!(int(0, DeviceAttr::L2CacheSizeBytes), 8 << 20);
    assert_eq!(int(0, DeviceAttr::MaxRegistersPerBlock), 65536);
    assert_eq!(
        text(0, DeviceAttr::MaxThreadDimensions),
        "[1024, 1024, 1024]"
    );
    assert_eq!(int(0, DeviceAttr::ApiVersion), 60_032_830);
    assert_eq!(text(0, DeviceAttr::DriverVersion), "6.0.32830");
    assert_eq!(int(0, DeviceAttr::TotalGlobalMemory), 1 << 30);
    let before = int(0, DeviceAttr::AvailableGlobalMemory);
    let ptr = api.alloc(rocm(0), 1 << 20, 64, DataType::uint(8)).unwrap();
    assert_eq!(before - int(0, DeviceAttr::AvailableGlobalMemory), 1 << 20);
    // SAFETY: allocated above.
    unsafe { api.free(rocm(0), ptr).unwrap() };
    assert!(
        api.attr(rocm(0), DeviceAttr::ImagePitchAlignment)
            .unwrap()
            .is_none()
    );
}

#[test]
fn rocm_5_properties_are_read_in_their_own_layout() {
    let fake = build_fake(&["FAKE_LEGACY_PROPERTIES"]);
    let api = RocmDeviceApi::new(backend(&fake));
    let arch = api.attr(rocm(1), DeviceAttr::GcnArch).unwrap().unwrap();
    assert_eq!(arch.try_as::<String>().unwrap(), "gfx90a");
    let runtime = backend(&fake);
    let full = runtime.runtime().unwrap().gcn_arch_name(rocm(0)).unwrap();
    assert_eq!(full.as_deref(), Some("gfx90a:sramecc+:xnack-"));
}
