//! The runtime's global functions (`ffi.Module*`, `ffi.SystemLib`, `runtime.*`), called through
//! the global registry the way C, C++ and Python callers reach them, and `load_module`'s refusals.

use std::ffi::{OsStr, c_void};
use std::os::unix::ffi::OsStrExt;

use tvm_ffi::{Any, Array, DataType, Device, ErrorKind, Function, Shape, Tensor};
use tvm_runtime::{Module, load_module, system_lib};

fn global(name: &str) -> Function {
    tvm_runtime::init();
    Function::get_global_required(name).unwrap()
}

#[test]
fn load_module_names_what_it_cannot_load() {
    tvm_runtime::init();
    let err = load_module(OsStr::from_bytes(b"/tmp/\xff.so")).unwrap_err();
    assert!(err.is_kind(ErrorKind::ValueError), "{err}");
    assert!(err.message().contains("path is not UTF-8"), "{err}");

    for path in ["/tmp/no_extension", "/tmp.d/kernel"] {
        let err = load_module(path).unwrap_err();
        assert!(err.is_kind(ErrorKind::RuntimeError), "{err}");
        assert!(err.message().contains("has no extension"), "{path}: {err}");
    }

    let err = load_module("/tmp/kernel.weird").unwrap_err();
    assert!(
        err.message().contains(
            "Loader for `.weird` files is not registered (ffi.Module.load_from_file.weird)"
        ),
        "{err}"
    );

    // .dylib, .dll and .dso go to the shared-library loader, which reports the missing file.
    for ext in ["dylib", "dll", "dso"] {
        let path = format!("/nonexistent/tvm-kernel.{ext}");
        let err = load_module(&path).unwrap_err();
        assert!(!err.message().contains("is not registered"), "{ext}: {err}");
        assert!(err.message().contains(&path), "{ext}: {err}");
    }

    // The global does the same.
    let err = global("ffi.ModuleLoadFromFile")
        .call(("/tmp/kernel.weird",))
        .unwrap_err();
    assert!(err.message().contains("`.weird`"), "{err}");
}

#[test]
fn system_lib_global_takes_at_most_a_prefix() {
    let system = global("ffi.SystemLib");
    let default: Module = system.call(()).unwrap().cast().unwrap();
    assert!(
        default
            .as_object()
            .ptr_eq(system_lib("").unwrap().as_object())
    );
    let prefixed: Module = system.call(("globals_test.",)).unwrap().cast().unwrap();
    assert!(
        prefixed
            .as_object()
            .ptr_eq(system_lib("globals_test.").unwrap().as_object())
    );
    assert!(!prefixed.as_object().ptr_eq(default.as_object()));

    let err = system.call(("a.", "b.")).unwrap_err();
    assert!(err.is_kind(ErrorKind::TypeError), "{err}");
    assert!(err.message().contains("at most 1 argument, got 2"), "{err}");
    let err = system.call((1i64,)).unwrap_err();
    assert!(err.is_kind(ErrorKind::TypeError), "{err}");
}

#[test]
fn module_globals_see_kinds_functions_and_imports() {
    let lib = system_lib("globals_imports.").unwrap();
    let other = system_lib("globals_other.").unwrap();
    let kind: String = global("ffi.ModuleGetKind")
        .call((lib.clone(),))
        .unwrap()
        .cast()
        .unwrap();
    assert_eq!(kind, "system_lib");

    let implements = global("ffi.ModuleImplementsFunction");
    let has: bool = implements
        .call((lib.clone(), "no_such_function", true))
        .unwrap()
        .cast()
        .unwrap();
    assert!(!has);
    let found = global("ffi.ModuleGetFunction")
        .call((lib.clone(), "no_such_function", false))
        .unwrap();
    assert!(found.is_none());
    for name in ["ffi.ModuleGetFunctionMetadata", "ffi.ModuleGetFunctionDoc"] {
        let value = global(name)
            .call((lib.clone(), "no_such_function"))
            .unwrap();
        assert!(value.is_none(), "{name}");
        // Apache TVM's arity: (module, name, query_imports).
        let value = global(name)
            .call((lib.clone(), "no_such_function", true))
            .unwrap();
        assert!(value.is_none(), "{name}");
        let err = global(name).call((lib.clone(),)).unwrap_err();
        assert!(
            err.message().contains("(module, name[, query_imports])"),
            "{name}"
        );
    }
    let mask: i64 = global("ffi.ModuleGetPropertyMask")
        .call((lib.clone(),))
        .unwrap()
        .cast()
        .unwrap();
    assert_eq!(mask, Module::BINARY_SERIALIZABLE | Module::RUNNABLE);
    let formats = global("ffi.ModuleGetWriteFormats")
        .call((lib.clone(),))
        .unwrap()
        .cast::<Array>()
        .unwrap();
    assert!(formats.is_empty());
    let source: String = global("ffi.ModuleInspectSource")
        .call((lib.clone(), "c"))
        .unwrap()
        .cast()
        .unwrap();
    assert!(source.is_empty());
    let err = global("ffi.ModuleWriteToFile")
        .call((lib.clone(), "/tmp/never-written.so", "so"))
        .unwrap_err();
    assert!(err.message().contains("does not support WriteToFile"));
    // Pinning is idempotent, and unpinning a module that is not pinned does nothing.
    for name in [
        "ffi.ModuleGlobalsAdd",
        "ffi.ModuleGlobalsAdd",
        "ffi.ModuleGlobalsRemove",
    ] {
        global(name).call((lib.clone(),)).unwrap();
    }
    global("ffi.ModuleGlobalsRemove")
        .call((lib.clone(),))
        .unwrap();

    let imports = global("ffi.ModuleGetImports");
    let import_count = |m: &Module| {
        imports
            .call((m.clone(),))
            .unwrap()
            .cast::<Array>()
            .unwrap()
            .len()
    };
    assert_eq!(import_count(&lib), 0);
    global("ffi.ModuleImportModule")
        .call((lib.clone(), other.clone()))
        .unwrap();
    assert_eq!(import_count(&lib), 1);
    let err = global("ffi.ModuleImportModule")
        .call((other.clone(), lib.clone()))
        .unwrap_err();
    assert!(err.message().contains("Cyclic dependency"), "{err}");
    global("ffi.ModuleClearImports")
        .call((lib.clone(),))
        .unwrap();
    assert_eq!(import_count(&lib), 0);

    // A zero context (no library) finds nothing.
    let lookup = global("ffi.ModuleLookupFromImports");
    assert!(lookup.call((0i64, "anything")).unwrap().is_none());
}

fn attr(device: Device, kind: i32) -> Any {
    global("runtime.DeviceGetAttr")
        .call((device, kind))
        .unwrap()
}

#[test]
fn cpu_attributes_through_the_global() {
    let cpu = Device::cpu(0);
    assert_eq!(attr(cpu, 0).cast::<i64>().unwrap(), 1, "exist");
    assert_eq!(attr(cpu, 5).cast::<String>().unwrap(), "cpu", "device_name");
    let processors = attr(cpu, 7).cast::<i64>().unwrap();
    let expected = std::thread::available_parallelism().unwrap().get() as i64;
    assert_eq!(processors, expected, "multi_processor_count");
    let total = attr(cpu, 14).cast::<i64>().unwrap();
    let available = attr(cpu, 15).cast::<i64>().unwrap();
    assert!(
        total > 0 && available > 0 && available <= total,
        "{available} of {total}"
    );
    // Attributes a CPU has no answer for are None.
    for kind in [1, 2, 3, 4, 6, 8, 9, 10, 11, 12, 13, 16] {
        assert!(attr(cpu, kind).is_none(), "kind {kind}");
    }

    let err = global("runtime.DeviceGetAttr")
        .call((cpu, 17i32))
        .unwrap_err();
    assert!(err.is_kind(ErrorKind::ValueError), "{err}");
    assert!(
        err.message()
            .contains("unknown device attribute kind 17 (0..=16 are defined)"),
        "{err}"
    );
}

#[test]
fn cpu_streams_are_the_null_stream() {
    let cpu = Device::cpu(0);
    let stream: *mut c_void = global("runtime.DeviceStreamCreate")
        .call((cpu,))
        .unwrap()
        .cast()
        .unwrap();
    assert!(stream.is_null(), "the CPU has no streams");
    global("runtime.DeviceStreamSync")
        .call((cpu, Any::none()))
        .unwrap();
    global("runtime.DeviceStreamSync")
        .call((cpu, stream))
        .unwrap();
    let previous: *mut c_void = global("runtime.DeviceSetStream")
        .call((cpu, stream))
        .unwrap()
        .cast()
        .unwrap();
    assert!(previous.is_null());
    global("runtime.DeviceStreamFree")
        .call((cpu, stream))
        .unwrap();
}

#[test]
fn tensor_globals_allocate_and_copy_on_the_cpu() {
    let empty = global("runtime.TensorEmpty");
    let to: Tensor = empty
        .call((Shape::new(&[2, 3]), DataType::float(32), Device::cpu(0)))
        .unwrap()
        .cast()
        .unwrap();
    assert_eq!(to.shape(), [2, 3]);
    assert_eq!(to.dtype(), DataType::float(32));
    assert_eq!(
        to.dltensor().data as usize % 64,
        0,
        "tensor data is 64-byte aligned"
    );

    let values = [1f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let from = Tensor::from_slice(&values, &[2, 3]).unwrap();
    global("runtime.TensorCopyFromTo")
        .call((from, to.clone()))
        .unwrap();
    assert_eq!(to.as_slice::<f32>().unwrap(), values);

    let wrong = Tensor::from_slice(&[1f32, 2.0], &[2]).unwrap();
    let err = global("runtime.TensorCopyFromTo")
        .call((wrong, to))
        .unwrap_err();
    assert!(err.is_kind(ErrorKind::ValueError), "{err}");
}

#[test]
fn copies_into_a_read_only_tensor_are_refused_and_reads_still_work() {
    use tvm_runtime::device::TensorDeviceExt;
    let data = Tensor::from_slice(&[1f32, 2.0, 3.0], &[3]).unwrap();
    let managed = data.to_dlpack_versioned();
    // SAFETY: a fresh export, ours until the import takes it; flagged read-only first.
    let read_only = unsafe {
        (*managed).flags |= tvm_ffi::abi::DLPACK_FLAG_BITMASK_READ_ONLY;
        Tensor::from_dlpack_versioned(managed, 0, false).unwrap()
    };
    let source = Tensor::from_slice(&[9f32; 3], &[3]).unwrap();
    let errors = [
        global("runtime.TensorCopyFromTo")
            .call((source.clone(), read_only.clone()))
            .unwrap_err(),
        read_only.copy_from(&source).unwrap_err(),
        read_only.copy_from_slice(&[9f32; 3]).unwrap_err(),
        read_only.check_writable().unwrap_err(),
    ];
    for err in errors {
        assert!(err.is_kind(ErrorKind::ValueError), "{err}");
        assert!(
            err.message().starts_with(
                "assignment destination is read-only: Tensor(shape=[3], dtype=float32, device=cpu:0)"
            ),
            "{err}"
        );
    }
    assert_eq!(read_only.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    assert_eq!(
        read_only
            .copy_to(Device::cpu(0))
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        [1.0, 2.0, 3.0]
    );
    data.check_writable().unwrap();
}

#[test]
fn device_attributes_are_named_as_python_spells_them() {
    use tvm_runtime::device::DeviceAttr;
    let names: Vec<String> = DeviceAttr::ALL.iter().map(|a| a.to_string()).collect();
    assert_eq!(
        names[DeviceAttr::MaxThreadsPerBlock as usize],
        "max_threads_per_block"
    );
    assert_eq!(
        names[DeviceAttr::L2CacheSizeBytes as usize],
        "l2_cache_size_bytes"
    );
    for (code, (attr, name)) in DeviceAttr::ALL.iter().zip(&names).enumerate() {
        assert_eq!(*attr as usize, code, "ALL is in TVM's numbering");
        assert_eq!(DeviceAttr::from_code(code as i32), Some(*attr));
        assert_eq!(attr.name(), name);
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "{name}"
        );
    }
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "names are distinct");
    assert_eq!(DeviceAttr::from_code(17), None);
    assert_eq!(DeviceAttr::from_code(-1), None);
}
