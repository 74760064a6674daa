//! The device layer: the registry, the CPU and the strict test backend through the whole device
//! API, tensors on any device, and a backend written in C registered through its C table.

use std::ffi::{CString, c_int, c_void};
use std::sync::{Arc, Once};

use tvm_ffi::abi::{DLTensor, kDLCPU, kDLExtDev, kDLHexagon, kDLMAIA, kDLVPI};
use tvm_ffi::{DataType, Device, ErrorKind, Function, Tensor};
use tvm_runtime::device::{
    self, DeviceAttr, TensorDeviceExt, TestDeviceConfig, copy_tensor, create_stream, device_attr,
    empty_on, free_stream, register_device_api, set_current_stream, sync_stream, test_device_stats,
};

const TEST_DEVICE_MEMORY: u64 = 64 << 20;

/// The runtime's globals and the test device (`ext_dev:0` and `ext_dev:1`), once per process.
pub fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        tvm_runtime::init();
        device::register_test_device(TestDeviceConfig {
            num_devices: 2,
            memory_bytes: TEST_DEVICE_MEMORY,
        })
        .unwrap();
    });
}

fn ext(id: i32) -> Device {
    Device::new(kDLExtDev, id)
}

fn f32_tensor(values: &[f32], shape: &[i64]) -> Tensor {
    Tensor::from_slice(values, shape).unwrap()
}

/// A descriptor of `base` with another shape, strides and byte offset (same data and device).
fn strided(base: &Tensor, shape: &mut [i64], strides: &mut [i64], byte_offset: u64) -> DLTensor {
    DLTensor {
        ndim: shape.len() as i32,
        shape: shape.as_mut_ptr(),
        strides: strides.as_mut_ptr(),
        byte_offset,
        ..*base.dltensor()
    }
}

#[test]
fn cpu_is_registered_and_unknown_types_are_named() {
    setup();
    assert!(device::registered_device_types().contains(&kDLCPU));
    assert!(device::device_exists(Device::cpu(0)));
    assert!(!device::device_exists(Device::cpu(1)));
    let err = empty_on(&[2], DataType::float(32), Device::rocm(0)).unwrap_err();
    assert!(err.is_kind(ErrorKind::ValueError), "{err}");
    assert!(err.message().contains("rocm:0"), "{err}");
    let err = empty_on(&[2], DataType::float(32), ext(7)).unwrap_err();
    assert!(err.message().contains("ext_dev:7 does not exist"), "{err}");
    let err = register_device_api(kDLCPU, Arc::new(device::cpu::CpuDeviceApi)).unwrap_err();
    assert!(err.is_kind(ErrorKind::ValueError) && err.message().contains("already registered"));
}

#[test]
fn large_host_tensors_start_on_a_huge_page_boundary() {
    setup();
    let huge_page = 2 << 20;
    let large = empty_on(&[(3 << 20) + 100], DataType::uint(8), Device::cpu(0)).unwrap();
    assert_eq!(large.dltensor().data as usize % huge_page, 0);
    let small = empty_on(&[100], DataType::uint(8), Device::cpu(0)).unwrap();
    assert_eq!(
        small.dltensor().data as usize % 64,
        0,
        "small ones keep the tensor alignment"
    );
    // Every byte is usable, the ones past the last whole page included.
    let values: Vec<u8> = (0..(3 << 20) + 100).map(|i| (i % 251) as u8).collect();
    large.copy_from_slice(&values).unwrap();
    assert_eq!(large.to_vec::<u8>().unwrap(), values);
}

#[test]
fn attributes_of_the_test_device() {
    setup();
    let name = device_attr(ext(0), DeviceAttr::DeviceName)
        .unwrap()
        .unwrap();
    assert_eq!(name.cast::<String>().unwrap(), "tvm test device");
    let total = device_attr(ext(1), DeviceAttr::TotalGlobalMemory)
        .unwrap()
        .unwrap();
    assert_eq!(total.cast::<i64>().unwrap(), TEST_DEVICE_MEMORY as i64);
    assert_eq!(
        device_attr(ext(0), DeviceAttr::WarpSize)
            .unwrap()
            .unwrap()
            .cast::<i64>()
            .unwrap(),
        32
    );
    assert!(device_attr(ext(0), DeviceAttr::GcnArch).unwrap().is_none());
    let exists = device_attr(ext(5), DeviceAttr::Exist).unwrap().unwrap();
    assert_eq!(exists.cast::<i64>().unwrap(), 0);
    assert!(device_attr(ext(5), DeviceAttr::WarpSize).is_err());
}

#[test]
fn round_trip_through_the_device_with_strides_and_offsets() {
    setup();
    // A 3x4 host matrix; copy its transposed 2x3 corner (rows 1..3 of the transpose) to the device.
    let host: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let source = f32_tensor(&host, &[3, 4]);
    let (mut shape, mut strides) = ([2i64, 3], [1i64, 4]);
    let corner = strided(&source, &mut shape, &mut strides, 4); // starts at element 1
    let on_device = empty_on(&[2, 3], DataType::float(32), ext(0)).unwrap();
    assert_eq!(on_device.device(), ext(0));
    // SAFETY: both descriptors are alive for the synchronous copy.
    unsafe { copy_tensor(&corner, on_device.dltensor(), None, true).unwrap() };
    // Device to device (to the other index), then back to the host.
    let other = on_device.copy_to(ext(1)).unwrap();
    assert_eq!(
        other.to_vec::<f32>().unwrap(),
        [1.0, 5.0, 9.0, 2.0, 6.0, 10.0]
    );
    // Host into a strided window of a device tensor: the second column of a 3x2 matrix.
    let matrix = empty_on(&[3, 2], DataType::float(32), ext(0)).unwrap();
    matrix.copy_from_slice(&[0f32; 6]).unwrap();
    let column = f32_tensor(&[7.0, 8.0, 9.0], &[3]);
    let (mut shape, mut strides) = ([3i64], [2i64]);
    let window = strided(&matrix, &mut shape, &mut strides, 4);
    // SAFETY: both descriptors are alive for the synchronous copy.
    unsafe { copy_tensor(column.dltensor(), &window, None, true).unwrap() };
    assert_eq!(
        matrix.to_vec::<f32>().unwrap(),
        [0.0, 7.0, 0.0, 8.0, 0.0, 9.0]
    );
}

#[test]
fn copies_on_a_stream_land_when_it_is_synchronized() {
    setup();
    let device = ext(1);
    let stream = create_stream(device).unwrap();
    let on_device = empty_on(&[4], DataType::float(32), device).unwrap();
    on_device.copy_from_slice(&[1f32, 2.0, 3.0, 4.0]).unwrap();
    let host = Tensor::empty(&[4], DataType::float(32), Device::cpu(0)).unwrap();
    // SAFETY: both tensors outlive the stream's synchronization below.
    unsafe { copy_tensor(on_device.dltensor(), host.dltensor(), Some(stream), false).unwrap() };
    assert_eq!(
        host.as_slice::<f32>().unwrap(),
        [0.0; 4],
        "visible before the sync"
    );
    sync_stream(device, Some(stream)).unwrap();
    assert_eq!(host.as_slice::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);

    // The thread's current stream is what copies use by default.
    let previous = set_current_stream(device, stream).unwrap();
    assert!(previous.is_null());
    assert_eq!(device::current_stream(device), stream);
    // A stream of ext_dev:1 is refused on ext_dev:0.
    let err = set_current_stream(ext(0), stream).unwrap_err();
    assert!(
        err.is_kind(ErrorKind::ValueError) && err.message().contains("belongs to"),
        "{err}"
    );
    let err = sync_stream(ext(0), Some(stream)).unwrap_err();
    assert!(err.message().contains("belongs to"), "{err}");
    // SAFETY: the stream came from create_stream on this device and is not used afterwards.
    unsafe { free_stream(device, stream).unwrap() };
    assert!(
        device::current_stream(device).is_null(),
        "freeing clears the current stream"
    );
    // SAFETY: an already freed stream: refused by the backend, nothing touched.
    let err = unsafe { free_stream(device, stream) }.unwrap_err();
    assert!(err.message().contains("unknown stream"), "{err}");
}

#[test]
fn bad_copies_and_allocations_are_clear_errors_and_nothing_leaks() {
    setup();
    let before = test_device_stats().unwrap();
    {
        let a = empty_on(&[2, 3], DataType::float(32), ext(0)).unwrap();
        let b = empty_on(&[3, 2], DataType::float(32), ext(0)).unwrap();
        let c = empty_on(&[2, 3], DataType::int(32), ext(0)).unwrap();
        let err = b.copy_from(&a).unwrap_err();
        assert!(
            err.is_kind(ErrorKind::ValueError) && err.message().contains("[2, 3]"),
            "{err}"
        );
        let err = c.copy_from(&a).unwrap_err();
        assert!(err.message().contains("int32"), "{err}");
        let err = a.copy_from_slice(&[1f32; 5]).unwrap_err();
        assert!(err.message().contains("5"), "{err}");
        let err = a.to_vec::<i32>().unwrap_err();
        assert!(err.is_kind(ErrorKind::TypeError), "{err}");
        // A window reaching past the allocation.
        let (mut shape, mut strides) = ([4i64], [2i64]);
        let overrun = strided(&a, &mut shape, &mut strides, 0);
        let host = Tensor::empty(&[4], DataType::float(32), Device::cpu(0)).unwrap();
        // SAFETY: valid descriptors; the backend refuses the out-of-bounds side.
        let err = unsafe { copy_tensor(&overrun, host.dltensor(), None, true) }.unwrap_err();
        assert!(
            err.message().contains("not inside a live allocation"),
            "{err}"
        );
        let live = test_device_stats().unwrap().live_allocations;
        assert!(live >= before.live_allocations + 3);
    }
    let too_big = TEST_DEVICE_MEMORY as i64;
    let err = empty_on(&[too_big], DataType::float(32), ext(0)).unwrap_err();
    assert!(err.is_kind(ErrorKind::MemoryError), "{err}");
    assert!(err.message().contains(&(too_big * 4).to_string()), "{err}");
    // SAFETY: a pointer the backend never handed out: refused, nothing freed.
    let err = unsafe { device::free_data(ext(0), 0x1000 as *mut c_void) }.unwrap_err();
    assert!(err.message().contains("not a live allocation"), "{err}");
    let err = device::alloc_data(ext(0), 16, 3, DataType::uint(8)).unwrap_err();
    assert!(err.message().contains("power of two"), "{err}");
}

#[test]
fn the_environment_allocator_reaches_every_backend() {
    setup();
    // tvm_ffi's Tensor::empty knows only the CPU; other devices go through the environment's
    // DLPack allocator, which the runtime's init points at the registry.
    let t = Tensor::empty(&[5], DataType::float(64), ext(1)).unwrap();
    assert_eq!(t.device(), ext(1));
    t.copy_from_slice(&[1f64, 2.0, 3.0, 4.0, 5.0]).unwrap();
    let back = t.copy_to(Device::cpu(0)).unwrap();
    assert_eq!(back.as_slice::<f64>().unwrap(), [1.0, 2.0, 3.0, 4.0, 5.0]);
    let empty = Function::get_global_required("runtime.TensorEmpty").unwrap();
    let via_global: Tensor = empty
        .call((tvm_ffi::Shape::new(&[2, 2]), DataType::int(8), ext(0)))
        .unwrap()
        .cast()
        .unwrap();
    assert_eq!(via_global.shape(), [2, 2]);
}

// -- a backend written in C -----------------------------------------------------------------------

struct CBackend {
    handle: *mut c_void,
}

impl CBackend {
    fn load() -> CBackend {
        let source = crate::module::repo_root().join("cpp-abi/examples/device_backend.c");
        let path = crate::module::compile_kernel(&source, "libexample_device");
        let path = CString::new(path.to_str().unwrap()).unwrap();
        // A library opened directly (not through load_module) needs the C API visible first.
        tvm_runtime::export_c_api().unwrap();
        // SAFETY: loading a library we just built; its TVMFFI* references resolve against this
        // executable.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(
            !handle.is_null(),
            "dlopen of the example device backend failed"
        );
        CBackend { handle }
    }

    fn symbol(&self, name: &str) -> *mut c_void {
        let name = CString::new(name).unwrap();
        // SAFETY: a live handle and a NUL-terminated name.
        let symbol = unsafe { libc::dlsym(self.handle, name.as_ptr()) };
        assert!(!symbol.is_null(), "{name:?} is missing");
        symbol
    }

    fn register(&self, device_type: i32) -> c_int {
        // SAFETY: the example's exported function has this signature.
        let f: extern "C" fn(i32) -> c_int =
            unsafe { std::mem::transmute(self.symbol("example_device_register")) };
        f(device_type)
    }

    fn register_broken(&self, device_type: i32, defect: c_int) -> c_int {
        // SAFETY: the example's exported function has this signature.
        let f: extern "C" fn(i32, c_int) -> c_int =
            unsafe { std::mem::transmute(self.symbol("example_device_register_broken")) };
        f(device_type, defect)
    }

    fn counter(&self, name: &str) -> i64 {
        // SAFETY: the example's exported counters take no arguments.
        let f: extern "C" fn() -> i64 = unsafe { std::mem::transmute(self.symbol(name)) };
        f()
    }
}

fn take_error() -> tvm_ffi::Error {
    tvm_ffi::Error::take_raised().expect("an error was raised")
}

#[test]
fn a_c_backend_registers_through_its_table() {
    setup();
    let backend = CBackend::load();
    let device = Device::new(kDLHexagon, 0);
    for (defect, expected) in [(1, "no `copy`"), (2, "struct_size"), (3, "version 99")] {
        assert_eq!(backend.register_broken(kDLMAIA, defect), -1);
        let err = take_error();
        assert!(err.is_kind(ErrorKind::ValueError), "{err}");
        assert!(err.message().contains(expected), "{err}");
    }
    assert!(!device::registered_device_types().contains(&kDLMAIA));
    assert_eq!(backend.register(kDLHexagon), 0, "{}", take_error());
    assert_eq!(backend.register(kDLHexagon), -1);
    assert!(take_error().message().contains("already registered"));
    // The refused registrations released nothing: the caller kept its context.
    assert_eq!(backend.counter("example_device_released") as i32, 0);

    let name = device_attr(device, DeviceAttr::DeviceName)
        .unwrap()
        .unwrap();
    assert_eq!(name.cast::<String>().unwrap(), "example C device");
    assert!(!device::device_exists(Device::new(kDLHexagon, 1)));
    let host: Vec<f32> = (0..6).map(|v| v as f32).collect();
    let source = f32_tensor(&host, &[2, 3]);
    {
        let on_device = source.copy_to(device).unwrap();
        assert_eq!(backend.counter("example_device_live_allocations"), 1);
        assert_eq!(on_device.to_vec::<f32>().unwrap(), host);
        // Between two kinds of device the data passes through the host.
        let on_test = on_device.copy_to(ext(0)).unwrap();
        assert_eq!(on_test.to_vec::<f32>().unwrap(), host);
        let back = empty_on(&[2, 3], DataType::float(32), device).unwrap();
        back.copy_from(&on_test).unwrap();
        assert_eq!(back.to_vec::<f32>().unwrap(), host);
    }
    assert_eq!(
        backend.counter("example_device_live_allocations"),
        0,
        "freed on drop"
    );
    let err = empty_on(&[1], DataType::float(32), Device::new(kDLHexagon, 1)).unwrap_err();
    assert!(err.message().contains("does not exist"), "{err}");
}

#[test]
fn a_rust_backend_from_another_library_registers_through_the_c_table() {
    setup();
    // What a backend library linking its own copy of the runtime does: export its DeviceApi as
    // a C table and register it through ffi.DeviceAPIRegister.
    let backend = Arc::new(device::TestDeviceApi::new(TestDeviceConfig::default()));
    device::register_external(kDLVPI, backend.clone()).unwrap();
    let err = device::register_external(kDLVPI, backend.clone()).unwrap_err();
    assert!(err.message().contains("already registered"), "{err}");
    let vpi = Device::new(kDLVPI, 1);
    let name = device_attr(vpi, DeviceAttr::DeviceName).unwrap().unwrap();
    assert_eq!(name.cast::<String>().unwrap(), "tvm test device");
    {
        let t = f32_tensor(&[1.0, 2.0], &[2]).copy_to(vpi).unwrap();
        assert_eq!(backend.stats().live_allocations, 1);
        assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 2.0]);
        // Errors raised behind the table keep their kind.
        let err = empty_on(&[1 << 40], DataType::float(32), vpi).unwrap_err();
        assert!(err.is_kind(ErrorKind::MemoryError), "{err}");
    }
    assert_eq!(backend.stats().live_allocations, 0);
}

#[test]
fn single_queue_backends_refuse_other_streams_by_name() {
    use tvm_runtime::device::{StreamHandle, require_default_stream};
    require_default_stream("Vulkan", StreamHandle::NULL).unwrap();
    let other = StreamHandle(std::ptr::dangling_mut::<c_void>());
    let err = require_default_stream("Vulkan", other).unwrap_err();
    assert!(err.is_kind(ErrorKind::ValueError), "{err}");
    assert!(
        err.message()
            .contains("Vulkan devices have one queue, the default (NULL) stream; got stream 0x"),
        "{err}"
    );
}
