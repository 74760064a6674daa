//! Loading the driver: missing, too old, without devices, missing entry points, index range.

use device_cuda::CudaBackend;
use device_kit::driver::runtime::RuntimeSource;
use tvm_ffi::DataType;
use tvm_runtime::device::{DeviceApi, DeviceAttr};

use super::*;

fn exists(api: &CudaDeviceApi, device: Device) -> bool {
    let value = api.attr(device, DeviceAttr::Exist).unwrap().unwrap();
    value.try_as::<i64>() == Some(1)
}

#[test]
fn a_missing_driver_is_an_error_naming_the_library_and_the_loader_reason() {
    let backend = Arc::new(CudaBackend::with_library("/nonexistent/libcuda.so.1"));
    let api = CudaDeviceApi::new(backend);
    assert!(!exists(&api, cuda(0)));
    let reason = api.unavailable_reason(cuda(0)).unwrap();
    assert!(
        reason.contains("CUDA driver not found: /nonexistent/libcuda.so.1")
            && reason.contains("cannot open shared object file"),
        "{reason}"
    );
    let err = api.alloc(cuda(0), 16, 64, DataType::uint(8)).unwrap_err();
    assert!(err.message().contains("/nonexistent/libcuda.so.1"), "{err}");
}

#[test]
fn a_library_without_the_entry_points_names_the_first_missing_one() {
    let backend = CudaBackend::with_library("libc.so.6");
    let err = backend.runtime().unwrap_err();
    assert_eq!(err.message(), "libc.so.6 has no symbol cuInit");
}

#[test]
fn an_old_driver_is_refused_with_both_versions() {
    let fake = build_fake(&["FAKE_DRIVER_VERSION=10020"]);
    let api = CudaDeviceApi::new(fake.backend());
    assert!(!exists(&api, cuda(0)));
    let reason = api.unavailable_reason(cuda(0)).unwrap();
    assert!(reason.contains("version 10.2, older than 11.0"), "{reason}");
}

#[test]
fn a_driver_without_devices_says_so() {
    let fake = build_fake(&["FAKE_DEVICE_COUNT=0"]);
    let api = CudaDeviceApi::new(fake.backend());
    assert!(!exists(&api, cuda(0)));
    let reason = api.unavailable_reason(cuda(0)).unwrap();
    assert!(reason.contains("CUDA_ERROR_NO_DEVICE (100)"), "{reason}");
}

#[test]
fn device_indices_out_of_range_do_not_exist_and_others_keep_working() {
    let (_fake, _backend, api) = fake_api();
    device_kit::testing::assert_two_devices(&api, "CUDA driver");
}

#[test]
fn attributes_come_from_the_driver() {
    let (fake, _backend, api) = fake_api();
    let attr = |id: i32, attr| api.attr(cuda(id), attr).unwrap().unwrap();
    assert_eq!(
        attr(0, DeviceAttr::ComputeVersion)
            .try_as::<String>()
            .unwrap(),
        "9.0"
    );
    assert_eq!(
        attr(1, DeviceAttr::DeviceName).try_as::<String>().unwrap(),
        "Fake CUDA Device 1"
    );
    assert_eq!(
        attr(0, DeviceAttr::MultiProcessorCount).try_as::<i64>(),
        Some(132)
    );
    assert_eq!(
        attr(1, DeviceAttr::MultiProcessorCount).try_as::<i64>(),
        Some(133)
    );
    assert_eq!(attr(0, DeviceAttr::WarpSize).try_as::<i64>(), Some(32));
    assert_eq!(
        attr(0, DeviceAttr::MaxThreadsPerBlock).try_as::<i64>(),
        Some(1024)
    );
    assert_eq!(
        attr(0, DeviceAttr::MaxSharedMemoryPerBlock).try_as::<i64>(),
        Some(48 << 10)
    );
    assert_eq!(
        attr(0, DeviceAttr::MaxThreadDimensions)
            .try_as::<String>()
            .unwrap(),
        "[1024, 1024, 64]"
    );
    assert_eq!(attr(0, DeviceAttr::ApiVersion).try_as::<i64>(), Some(12080));
    assert_eq!(
        attr(0, DeviceAttr::DriverVersion)
            .try_as::<String>()
            .unwrap(),
        "12.8"
    );
    assert_eq!(
        attr(0, DeviceAttr::TotalGlobalMemory).try_as::<i64>(),
        Some(1 << 30)
    );
    let before = attr(0, DeviceAttr::AvailableGlobalMemory)
        .try_as::<i64>()
        .unwrap();
    let ptr = api.alloc(cuda(0), 1 << 20, 64, DataType::uint(8)).unwrap();
    let after = attr(0, DeviceAttr::AvailableGlobalMemory)
        .try_as::<i64>()
        .unwrap();
    assert_eq!(before - after, 1 << 20);
    // SAFETY: allocated above.
    unsafe { api.free(cuda(0), ptr).unwrap() };
    assert!(api.attr(cuda(0), DeviceAttr::GcnArch).unwrap().is_none());
    assert_eq!(
        fake.live("contexts"),
        1,
        "attributes need no context; memory on cuda:0 does"
    );
}

#[test]
fn dropping_the_backend_releases_its_contexts() {
    let fake = build_fake(&[]);
    let backend = fake.backend();
    backend.runtime().unwrap().bind(cuda(1)).unwrap();
    assert_eq!(fake.live("contexts"), 1);
    drop(backend);
    assert_eq!(fake.live("contexts"), 0);
}
