//! The C++ layer (`cpp-abi/include/tvm/ffi/*.h`) and the kernel examples (`cpp-abi/examples`),
//! built at test time with the system `gcc` / `g++` into shared libraries that link against
//! nothing, loaded into this executable (whose runtime exports `TVMFFI*`), and called through the
//! C ABI exactly as a module loader does (safe-call functions, `handle` NULL):
//!
//! * `layer_*`: the tests of `cpp/layer_tests.cc` (Any, String, ObjectRef, Function, Error,
//!   Array, TensorView against this runtime), one Rust test each, plus tensors, strings and
//!   byte arrays made here and read by the C++ side.
//! * `legacy_abi::*`, `legacy_abi_*`: the tests of `cpp/legacy_abi_tests.cc`, the bridge from the
//!   old packed-function ABI (`tvm/ffi/extra/legacy_abi.h`): every type code both ways, bad
//!   codes, results, wrapped legacy functions, and a runtime tensor as `kTVMNDArrayHandle`.
//! * `*_add_one`, `*_concat`, `*_sum_array`, `cpp_example_*`: both examples on runtime tensors,
//!   `DLTensor*` arguments, strings, arrays and lists; their errors (the typed wrapper's
//!   `TypeError` names the function, the argument and both types); metadata and doc symbols; the
//!   global function the C++ example registers while it is loaded.
//! * `abi_version_*`: every library records `__tvm_ffi__abi_version` once (also when several C
//!   and C++ translation units include the header), and not when it opts out.

// This binary is a final artifact: it links the process state (and the `testing.*` functions,
// registered when the binary loads).
use tvm_ffi_capi as _;
use tvm_ffi_testing as _;

use std::ffi::{CString, c_int, c_void};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use tvm_ffi::abi::{self, DLTensor, TVMFFIAny, TVMFFIAnyPayload, TVMFFIByteArray};
use tvm_ffi::{Any, Array, Error, Function, List, Tensor};

type SafeCall = unsafe extern "C" fn(*mut c_void, *const TVMFFIAny, i32, *mut TVMFFIAny) -> c_int;

// ---------------------------------------------------------------------------------------------
// Building and loading
// ---------------------------------------------------------------------------------------------

/// A library loaded with `RTLD_NOW | RTLD_LOCAL` for the rest of the process.
struct Library {
    name: &'static str,
    /// The `dlopen` handle, as an address (handles are never closed).
    handle: usize,
    /// `nm -D --defined-only` of the file, taken before the build directory is removed.
    dynamic_symbols: Vec<String>,
}

impl Library {
    fn symbol(&self, symbol: &str) -> Option<*mut c_void> {
        let c_name = CString::new(symbol).expect("no NUL in a symbol name");
        // SAFETY: a live handle and a NUL-terminated name.
        let address = unsafe { libc::dlsym(self.handle as *mut c_void, c_name.as_ptr()) };
        (!address.is_null()).then_some(address)
    }

    fn function(&self, symbol: &str) -> SafeCall {
        let address = self
            .symbol(symbol)
            .unwrap_or_else(|| panic!("{} does not export {symbol}", self.name));
        // SAFETY: the `__tvm_ffi_*` symbols of these libraries are safe-call functions.
        unsafe { std::mem::transmute::<*mut c_void, SafeCall>(address) }
    }

    /// Calls the exported `__tvm_ffi_<name>` like a module loader.
    fn call(&self, name: &str, args: &[TVMFFIAny]) -> Result<Any, Error> {
        call_safe(self.function(&format!("__tvm_ffi_{name}")), args)
    }
}

struct Libraries {
    c_example: Library,
    cpp_example: Library,
    layer_tests: Library,
    /// The tests of the legacy-ABI bridge (cpp/legacy_abi_tests.cc).
    legacy_abi: Library,
    /// Two C and two C++ translation units that all include c_api.h.
    multi_unit: Library,
    /// Built with -DTVM_FFI_NO_ABI_VERSION_RECORD.
    no_record: Library,
}

fn manifest_path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Compiles `sources` into the shared library `out` with the flags a kernel author would use.
fn compile(compiler: &str, std_flag: &str, extra: &[&str], sources: &[PathBuf], out: &Path) {
    let mut command = Command::new(compiler);
    command
        .arg(std_flag)
        .args([
            "-O1", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-I",
        ])
        .arg(manifest_path("../include"))
        .args(extra)
        .args(sources)
        .arg("-o")
        .arg(out);
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn defined_dynamic_symbols(path: &Path) -> Vec<String> {
    let output = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run nm: {e}"));
    assert!(output.status.success(), "nm -D {} failed", path.display());
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().last().map(str::to_owned))
        .collect()
}

fn load(name: &'static str, path: &Path) -> Library {
    let dynamic_symbols = defined_dynamic_symbols(path);
    let c_path = CString::new(path.as_os_str().as_encoded_bytes()).expect("no NUL in a path");
    // SAFETY: a NUL-terminated path; the libraries' initializers only call the C API.
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        // SAFETY: dlerror returns a NUL-terminated message after a failed dlopen.
        let message = unsafe { std::ffi::CStr::from_ptr(libc::dlerror()) };
        panic!(
            "dlopen {} failed: {}",
            path.display(),
            message.to_string_lossy()
        );
    }
    Library {
        name,
        handle: handle as usize,
        dynamic_symbols,
    }
}

/// Builds every library once per test process (sequentially: the machines are small), loads
/// them, and removes the build directory (loaded libraries stay mapped).
fn libraries() -> &'static Libraries {
    static LIBRARIES: OnceLock<Libraries> = OnceLock::new();
    LIBRARIES.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("cpp_layer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the build directory");

        let c_example = dir.join("libadd_one_c.so");
        compile(
            "gcc",
            "-std=c11",
            &[],
            &[manifest_path("../examples/add_one_c.c")],
            &c_example,
        );
        let cpp_example = dir.join("libadd_one_cpp.so");
        let cpp_source = manifest_path("../examples/add_one_cpp.cc");
        compile("g++", "-std=c++17", &[], &[cpp_source], &cpp_example);
        let layer_tests = dir.join("liblayer_tests.so");
        let layer_source = manifest_path("cpp/layer_tests.cc");
        compile("g++", "-std=c++17", &[], &[layer_source], &layer_tests);
        let legacy_abi = dir.join("liblegacy_abi_tests.so");
        let legacy_source = manifest_path("cpp/legacy_abi_tests.cc");
        compile("g++", "-std=c++17", &[], &[legacy_source], &legacy_abi);

        // Four translation units including the header, linked into one library; compiled with
        // -fvisibility=hidden, which must not hide the record.
        let units = [
            ("unit_a.c", "int unit_a(void) { return 1; }\n"),
            ("unit_b.c", "int unit_b(void) { return 2; }\n"),
            ("unit_c.cc", "int unit_c() { return 3; }\n"),
            (
                "unit_d.cc",
                "#include <tvm/ffi/ffi.h>\nint unit_d() { return 4; }\n",
            ),
        ];
        let mut objects = Vec::new();
        for (file, body) in units {
            let source = dir.join(file);
            std::fs::write(&source, format!("#include <tvm/ffi/c_api.h>\n{body}"))
                .expect("write a source file");
            let object = dir.join(format!("{file}.o"));
            let (compiler, std_flag) = if file.ends_with(".c") {
                ("gcc", "-std=c11")
            } else {
                ("g++", "-std=c++17")
            };
            let output = Command::new(compiler)
                .args([std_flag, "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra"])
                .args(["-Werror", "-c", "-I"])
                .arg(manifest_path("../include"))
                .arg(&source)
                .arg("-o")
                .arg(&object)
                .output()
                .expect("run the compiler");
            assert!(
                output.status.success(),
                "{compiler} {file}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            objects.push(object);
        }
        let multi_unit = dir.join("libmulti_unit.so");
        let output = Command::new("g++")
            .arg("-shared")
            .args(&objects)
            .arg("-o")
            .arg(&multi_unit)
            .output()
            .expect("run the linker");
        assert!(
            output.status.success(),
            "linking the four units failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );

        let no_record = dir.join("libno_record.so");
        compile(
            "gcc",
            "-std=c11",
            &["-DTVM_FFI_NO_ABI_VERSION_RECORD"],
            &[manifest_path("../examples/add_one_c.c")],
            &no_record,
        );

        let libraries = Libraries {
            c_example: load("add_one_c", &c_example),
            cpp_example: load("add_one_cpp", &cpp_example),
            layer_tests: load("layer_tests", &layer_tests),
            legacy_abi: load("legacy_abi_tests", &legacy_abi),
            multi_unit: load("multi_unit", &multi_unit),
            no_record: load("no_record", &no_record),
        };
        let _ = std::fs::remove_dir_all(&dir);
        libraries
    })
}

// ---------------------------------------------------------------------------------------------
// Calling
// ---------------------------------------------------------------------------------------------

fn call_safe(f: SafeCall, args: &[TVMFFIAny]) -> Result<Any, Error> {
    let mut result = TVMFFIAny::NONE;
    // SAFETY: `args` are valid views for the call; `result` is None as the convention asks.
    let rc = unsafe {
        f(
            std::ptr::null_mut(),
            args.as_ptr(),
            args.len() as i32,
            &mut result,
        )
    };
    if rc == 0 {
        // SAFETY: on success the callee stored an owning value.
        Ok(unsafe { Any::from_raw(result) })
    } else {
        Err(Error::take_raised().expect("a failed call leaves an error in the slot"))
    }
}

/// Borrowed views of owning values (valid while `values` lives).
fn views(values: &[&Any]) -> Vec<TVMFFIAny> {
    values.iter().map(|value| *value.as_raw()).collect()
}

fn raw(type_index: i32, payload: TVMFFIAnyPayload) -> TVMFFIAny {
    TVMFFIAny {
        type_index,
        small_str_len: 0,
        payload,
    }
}

fn raw_str(text: &CString) -> TVMFFIAny {
    raw(
        abi::kTVMFFIRawStr,
        TVMFFIAnyPayload {
            v_c_str: text.as_ptr(),
        },
    )
}

fn dltensor_ptr(tensor: &mut DLTensor) -> TVMFFIAny {
    raw(
        abi::kTVMFFIDLTensorPtr,
        TVMFFIAnyPayload {
            v_ptr: (tensor as *mut DLTensor).cast(),
        },
    )
}

/// A float32 DLTensor over `data` (compact, strides NULL) on `device_type`.
fn float32_dltensor(data: &mut [f32], shape: &mut [i64], device_type: i32) -> DLTensor {
    DLTensor {
        data: data.as_mut_ptr().cast(),
        device: abi::DLDevice {
            device_type,
            device_id: 0,
        },
        ndim: shape.len() as i32,
        dtype: abi::DLDataType {
            code: abi::kDLFloat,
            bits: 32,
            lanes: 1,
        },
        shape: shape.as_mut_ptr(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

fn string_of(value: &Any) -> String {
    value
        .cast::<String>()
        .unwrap_or_else(|e| panic!("expected a string, got {}: {e}", value.type_key()))
}

fn expect_error(result: Result<Any, Error>, kind: &str) -> Error {
    match result {
        Ok(value) => panic!("expected a {kind}, got a {} value", value.type_key()),
        Err(err) => {
            assert_eq!(err.kind(), kind, "unexpected error: {}", err.message());
            err
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The tests of cpp/layer_tests.cc
// ---------------------------------------------------------------------------------------------

/// Runs the exported C++ test `name` of `lib` (no arguments; it fails by throwing).
fn run_cpp_test(lib: &Library, name: &str) {
    if let Err(err) = lib.call(name, &[]) {
        panic!(
            "C++ test {name} of {} failed: {}: {}\n{}",
            lib.name,
            err.kind(),
            err.message(),
            err.backtrace()
        );
    }
}

/// One Rust test per C++ test of a library: `cpp_tests!(module, library field, tests...)`.
macro_rules! cpp_tests {
    ($module:ident, $library:ident, $($name:ident),* $(,)?) => {
        mod $module {
            $(
                #[test]
                fn $name() {
                    let lib = &super::libraries().$library;
                    super::run_cpp_test(lib, stringify!($name));
                }
            )*
        }
    };
}

cpp_tests!(
    layer,
    layer_tests,
    test_any_plain_values,
    test_strings,
    test_object_ref_counts,
    test_function_calls,
    test_typed_functions,
    test_packed_functions_and_globals,
    test_errors,
    test_arrays,
    test_tensor_views,
    test_load_time_registration,
);

// The bridge from the old packed-function ABI (tvm/ffi/extra/legacy_abi.h).
cpp_tests!(
    legacy_abi,
    legacy_abi,
    test_legacy_to_ffi_every_code,
    test_ffi_to_legacy_strings_bytes_objects,
    test_bad_legacy_codes,
    test_move_legacy_result,
    test_wrap_legacy_function,
);

#[test]
fn legacy_abi_tensor_crosses_as_ndarray_handle() {
    let lib = &libraries().legacy_abi;
    let tensor = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).expect("tensor");
    let value = Any::from(tensor);
    if let Err(err) = lib.call("legacy_tensor", &views(&[&value])) {
        panic!("legacy_tensor failed: {}: {}", err.kind(), err.message());
    }
}

#[test]
fn layer_reads_runtime_tensors() {
    let lib = &libraries().layer_tests;
    let tensor = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).expect("tensor");
    let value = Any::from(tensor);
    let info = lib
        .call("inspect_tensor", &views(&[&value]))
        .expect("inspect_tensor")
        .cast::<Array>()
        .expect("an array");
    let items: Vec<String> = info.iter().map(|item| format!("{item:?}")).collect();
    assert_eq!(info.len(), 6, "{items:?}");
    assert_eq!(info.as_slice()[0].cast::<i64>().ok(), Some(2));
    assert_eq!(info.as_slice()[1].cast::<i64>().ok(), Some(6));
    assert_eq!(info.as_slice()[2].cast::<f64>().ok(), Some(21.0));
    assert_eq!(
        info.as_slice()[3].cast::<bool>().ok(),
        Some(true),
        "contiguous"
    );
    assert_eq!(
        info.as_slice()[4].cast::<bool>().ok(),
        Some(true),
        "float32"
    );
    assert_eq!(
        info.as_slice()[5].cast::<bool>().ok(),
        Some(true),
        "from an ffi.Tensor"
    );

    // A DLTensor* argument: strides NULL, no object behind it.
    let mut data = [1.0f32, 2.0];
    let mut shape = [2i64];
    let mut dl = float32_dltensor(&mut data, &mut shape, abi::kDLCPU);
    let info = lib
        .call("inspect_tensor", &[dltensor_ptr(&mut dl)])
        .expect("inspect_tensor")
        .cast::<Array>()
        .expect("an array");
    assert_eq!(info.as_slice()[2].cast::<f64>().ok(), Some(3.0));
    assert_eq!(info.as_slice()[3].cast::<bool>().ok(), Some(true));
    assert_eq!(info.as_slice()[5].cast::<bool>().ok(), Some(false));
}

#[test]
fn layer_any_parameter_owns_borrowed_forms() {
    let lib = &libraries().layer_tests;
    // A raw C string argument becomes an owned string.
    let text = CString::new("a raw C string from Rust").expect("no NUL");
    let back = lib.call("echo_any", &[raw_str(&text)]).expect("echo_any");
    assert_eq!(back.type_index(), abi::kTVMFFIStr);
    assert_eq!(string_of(&back), "a raw C string from Rust");
    // A byte-array argument becomes owned bytes.
    let bytes = b"\x00\x01\x02 bytes";
    let array = TVMFFIByteArray {
        data: bytes.as_ptr().cast(),
        size: bytes.len(),
    };
    let arg = raw(
        abi::kTVMFFIByteArrayPtr,
        TVMFFIAnyPayload {
            v_ptr: (&array as *const TVMFFIByteArray).cast_mut().cast(),
        },
    );
    let back = lib.call("echo_any", &[arg]).expect("echo_any");
    assert_eq!(back.type_index(), abi::kTVMFFIBytes);
    let back = back.cast::<tvm_ffi::Bytes>().expect("bytes");
    assert_eq!(back.as_bytes(), bytes);
    // Plain values and objects pass through.
    let seven = Any::from(7i64);
    assert_eq!(
        lib.call("echo_any", &views(&[&seven]))
            .expect("echo_any")
            .cast::<i64>()
            .ok(),
        Some(7)
    );
}

// ---------------------------------------------------------------------------------------------
// The examples: add_one
// ---------------------------------------------------------------------------------------------

fn check_add_one(lib: &Library) {
    // Runtime tensors (ffi.Tensor), 1-D and 2-D.
    for shape in [&[5i64][..], &[2, 3][..]] {
        let numel: i64 = shape.iter().product();
        let input: Vec<f32> = (0..numel).map(|i| i as f32 * 0.5).collect();
        let x = Any::from(Tensor::from_slice(&input, shape).expect("x"));
        let y_tensor = Tensor::from_slice(&vec![0.0f32; numel as usize], shape).expect("y");
        let y = Any::from(y_tensor.clone());
        let result = lib.call("add_one", &views(&[&x, &y])).expect("add_one");
        assert!(result.is_none(), "{}: add_one returns None", lib.name);
        let expected: Vec<f32> = input.iter().map(|v| v + 1.0).collect();
        assert_eq!(y_tensor.as_slice::<f32>().expect("f32"), &expected[..]);
    }

    // DLTensor* arguments.
    let mut x_data = [1.0f32, -1.0, 10.0];
    let mut y_data = [0.0f32; 3];
    let mut shape = [3i64];
    let mut x = float32_dltensor(&mut x_data, &mut shape, abi::kDLCPU);
    let mut y_shape = [3i64];
    let mut y = float32_dltensor(&mut y_data, &mut y_shape, abi::kDLCPU);
    lib.call("add_one", &[dltensor_ptr(&mut x), dltensor_ptr(&mut y)])
        .expect("add_one on DLTensor*");
    assert_eq!(y_data, [2.0, 0.0, 11.0]);
}

#[test]
fn c_example_add_one() {
    check_add_one(&libraries().c_example);
}

#[test]
fn cpp_example_add_one() {
    check_add_one(&libraries().cpp_example);
}

/// Wrong dtype, device and shape: the kernels' own checks (both examples).
fn check_add_one_rejects(lib: &Library) {
    let f64_tensor = Any::from(Tensor::from_slice(&[1.0f64, 2.0], &[2]).expect("f64"));
    let f32_tensor = Any::from(Tensor::from_slice(&[1.0f32, 2.0], &[2]).expect("f32"));
    let f32_other_shape = Any::from(Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).expect("f32"));

    let err = expect_error(
        lib.call("add_one", &views(&[&f64_tensor, &f32_tensor])),
        "TypeError",
    );
    let message = err.message();
    assert!(
        message.contains("add_one: argument x must be a float32 tensor")
            && message.contains("bits 64"),
        "{}: {message}",
        lib.name
    );

    let err = expect_error(
        lib.call("add_one", &views(&[&f32_tensor, &f32_other_shape])),
        "ValueError",
    );
    let message = err.message();
    assert!(
        message.contains("shapes differ in dimension 0: x has 2, y has 3"),
        "{}: {message}",
        lib.name
    );

    // A tensor on another device is refused before its memory is touched.
    let mut data = [0.0f32; 2];
    let mut shape = [2i64];
    let mut cuda = float32_dltensor(&mut data, &mut shape, abi::kDLCUDA);
    let err = expect_error(
        lib.call("add_one", &[dltensor_ptr(&mut cuda), *f32_tensor.as_raw()]),
        "TypeError",
    );
    let message = err.message();
    assert!(
        message.contains("argument x must be on the CPU") && message.contains("got 2"),
        "{}: {message}",
        lib.name
    );

    // Non-contiguous input.
    let mut data = [0.0f32; 4];
    let mut shape = [2i64, 2];
    let mut strides = [1i64, 2];
    let mut transposed = float32_dltensor(&mut data, &mut shape, abi::kDLCPU);
    transposed.strides = strides.as_mut_ptr();
    let err = expect_error(
        lib.call(
            "add_one",
            &[dltensor_ptr(&mut transposed), *f32_tensor.as_raw()],
        ),
        "ValueError",
    );
    assert!(
        err.message().contains("must be contiguous"),
        "{}: {}",
        lib.name,
        err.message()
    );
}

#[test]
fn c_example_add_one_rejects_bad_tensors() {
    let lib = &libraries().c_example;
    check_add_one_rejects(lib);
    let one = Any::from(1i64);
    let err = expect_error(lib.call("add_one", &views(&[&one])), "TypeError");
    assert_eq!(err.message(), "add_one expects 2 arguments, got 1");
    let err = expect_error(lib.call("add_one", &views(&[&one, &one])), "TypeError");
    assert_eq!(
        err.message(),
        "add_one: argument x must be a tensor, got int"
    );
}

#[test]
fn cpp_example_add_one_rejects_bad_tensors() {
    let lib = &libraries().cpp_example;
    check_add_one_rejects(lib);
    // The typed wrapper checks the arguments before the kernel runs.
    let one = Any::from(1i64);
    let tensor = Any::from(Tensor::from_slice(&[1.0f32], &[1]).expect("tensor"));
    let err = expect_error(lib.call("add_one", &views(&[&tensor])), "TypeError");
    assert_eq!(
        err.message(),
        "Mismatched number of arguments when calling: \
         `add_one(0: ffi.Tensor, 1: ffi.Tensor) -> None`. Expected 2 but got 1 arguments"
    );
    let err = expect_error(lib.call("add_one", &views(&[&tensor, &one])), "TypeError");
    assert_eq!(
        err.message(),
        "Mismatched type on argument #1 when calling: \
         `add_one(0: ffi.Tensor, 1: ffi.Tensor) -> None`. Expected `ffi.Tensor` but got `int`"
    );
    let text = CString::new("not a tensor").expect("no NUL");
    let err = expect_error(
        lib.call("add_one", &[raw_str(&text), *tensor.as_raw()]),
        "TypeError",
    );
    assert_eq!(
        err.message(),
        "Mismatched type on argument #0 when calling: \
         `add_one(0: ffi.Tensor, 1: ffi.Tensor) -> None`. Expected `ffi.Tensor` but got `str`"
    );
}

// ---------------------------------------------------------------------------------------------
// The examples: strings and arrays
// ---------------------------------------------------------------------------------------------

fn check_concat(lib: &Library) {
    // Small + small, small + heap, heap + heap, and raw C strings.
    let cases = [
        ("ab", "cd"),
        ("hello, ", "a longer second string"),
        ("a long first string / ", "a long second string"),
        ("", ""),
    ];
    for (a, b) in cases {
        let a_any = Any::from(a);
        let b_any = Any::from(b);
        let joined = lib
            .call("concat", &views(&[&a_any, &b_any]))
            .expect("concat");
        assert_eq!(string_of(&joined), format!("{a}{b}"), "{}", lib.name);
        let expected_index = if a.len() + b.len() <= 7 {
            abi::kTVMFFISmallStr
        } else {
            abi::kTVMFFIStr
        };
        assert_eq!(joined.type_index(), expected_index, "{}", lib.name);
    }
    let a = CString::new("raw ").expect("no NUL");
    let b = CString::new("C strings").expect("no NUL");
    let joined = lib
        .call("concat", &[raw_str(&a), raw_str(&b)])
        .expect("concat of raw strings");
    assert_eq!(string_of(&joined), "raw C strings");

    let one = Any::from(1i64);
    let s = Any::from("s");
    let err = expect_error(lib.call("concat", &views(&[&s, &one])), "TypeError");
    assert!(
        err.message().contains("int"),
        "{}: {}",
        lib.name,
        err.message()
    );
}

#[test]
fn c_example_concat() {
    check_concat(&libraries().c_example);
}

#[test]
fn cpp_example_concat() {
    let lib = &libraries().cpp_example;
    check_concat(lib);
    let one = Any::from(1i64);
    let s = Any::from("s");
    let err = expect_error(lib.call("concat", &views(&[&s, &one])), "TypeError");
    assert_eq!(
        err.message(),
        "Mismatched type on argument #1 when calling: \
         `concat(0: str, 1: str) -> str`. Expected `str` but got `int`"
    );
}

fn check_sum_array(lib: &Library) {
    let array = Any::from(Array::from_vec(
        (1..=10i64).map(Any::from).collect::<Vec<_>>(),
    ));
    let sum = lib.call("sum_array", &views(&[&array])).expect("sum_array");
    assert_eq!(sum.cast::<i64>().ok(), Some(55), "{}", lib.name);

    let list = List::new();
    for v in [5i64, -2, 100] {
        list.push(v);
    }
    let list = Any::from(list);
    let sum = lib
        .call("sum_array", &views(&[&list]))
        .expect("sum_array of a list");
    assert_eq!(sum.cast::<i64>().ok(), Some(103), "{}", lib.name);

    let empty = Any::from(Array::from_vec(Vec::new()));
    let sum = lib
        .call("sum_array", &views(&[&empty]))
        .expect("sum_array of []");
    assert_eq!(sum.cast::<i64>().ok(), Some(0), "{}", lib.name);

    let mixed = Any::from(Array::from_vec(vec![Any::from(1i64), Any::from("x")]));
    let err = expect_error(lib.call("sum_array", &views(&[&mixed])), "TypeError");
    // The C++ layer names types as users know them; the C example prints the type key itself.
    let expected = if lib.name.ends_with("_cpp") {
        "Cannot convert from type `str` to `int`"
    } else {
        "element 1 must be an int, got ffi.SmallStr"
    };
    assert!(
        err.message().contains(expected),
        "{}: {}",
        lib.name,
        err.message()
    );
}

#[test]
fn c_example_sum_array() {
    check_sum_array(&libraries().c_example);
}

#[test]
fn cpp_example_sum_array() {
    let lib = &libraries().cpp_example;
    check_sum_array(lib);
    let one = Any::from(1i64);
    let err = expect_error(lib.call("sum_array", &views(&[&one])), "TypeError");
    assert_eq!(
        err.message(),
        "Mismatched type on argument #0 when calling: `sum_array(0: ffi.Array) -> int`. \
         Expected `ffi.Array` but got `int`"
    );
}

// ---------------------------------------------------------------------------------------------
// The C++ example: errors, metadata, documentation, load-time registration
// ---------------------------------------------------------------------------------------------

#[test]
fn cpp_example_raises_value_error() {
    let lib = &libraries().cpp_example;
    let five = Any::from(5i64);
    let err = expect_error(
        lib.call("raise_value_error", &views(&[&five])),
        "ValueError",
    );
    assert_eq!(err.message(), "raise_value_error was called with 5");
    assert!(
        err.backtrace().contains("add_one_cpp.cc"),
        "the backtrace starts at the throwing line: {}",
        err.backtrace()
    );
}

fn metadata_of(lib: &Library, name: &str) -> Option<String> {
    let symbol = lib.symbol(&format!("__tvm_ffi__metadata_{name}"))?;
    // SAFETY: metadata symbols are safe-call functions.
    let f = unsafe { std::mem::transmute::<*mut c_void, SafeCall>(symbol) };
    Some(string_of(&call_safe(f, &[]).expect("metadata call")))
}

#[test]
fn cpp_example_metadata_and_doc() {
    let lib = &libraries().cpp_example;
    let expected = [
        (
            "add_one",
            r#"{"type":"ffi.Function","args":[{"type":"None"},{"type":"ffi.Tensor"},{"type":"ffi.Tensor"}]}"#,
        ),
        (
            "concat",
            r#"{"type":"ffi.Function","args":[{"type":"ffi.String"},{"type":"ffi.String"},{"type":"ffi.String"}]}"#,
        ),
        (
            "sum_array",
            r#"{"type":"ffi.Function","args":[{"type":"int"},{"type":"ffi.Array"}]}"#,
        ),
        (
            "raise_value_error",
            r#"{"type":"ffi.Function","args":[{"type":"int"},{"type":"int"}]}"#,
        ),
    ];
    for (name, schema) in expected {
        let metadata = metadata_of(lib, name).unwrap_or_else(|| panic!("no metadata for {name}"));
        let escaped = schema.replace('"', "\\\"");
        assert_eq!(
            metadata,
            format!(r#"{{"type_schema":"{escaped}"}}"#),
            "{name}"
        );
    }

    let doc = lib.function("__tvm_ffi__doc_add_one");
    let doc = string_of(&call_safe(doc, &[]).expect("doc call"));
    assert_eq!(
        doc,
        "Writes x + 1 into y (float32 CPU tensors, same shape)."
    );
    assert!(lib.symbol("__tvm_ffi__doc_concat").is_none());

    // The C example exports no metadata.
    assert!(metadata_of(&libraries().c_example, "add_one").is_none());
}

#[test]
fn cpp_example_registers_global_at_load() {
    // Loading the library ran its static initializers.
    let _ = libraries();
    let f = Function::get_global("cpp_example.registered_at_load")
        .expect("registered when the library was loaded");
    assert_eq!(f.call((21i64,)).expect("call").cast::<i64>().ok(), Some(42));
    let err = f.call(("x",)).expect_err("a string is not an int");
    assert_eq!(
        err.message(),
        "Mismatched type on argument #0 when calling: \
         `cpp_example.registered_at_load(0: int) -> int`. Expected `int` but got `str`"
    );
    // The static-init block of layer_tests.cc ran too.
    let f = Function::get_global("cpp_layer_tests.static_init").expect("registered at load");
    assert_eq!(f.call(("four",)).expect("call").cast::<i64>().ok(), Some(4));
}

// ---------------------------------------------------------------------------------------------
// ABI version record
// ---------------------------------------------------------------------------------------------

const ABI_VERSION_SYMBOL: &str = "__tvm_ffi__abi_version";

fn abi_version_of(lib: &Library) -> Option<u32> {
    let address = lib.symbol(ABI_VERSION_SYMBOL)?;
    // SAFETY: the symbol is a `const uint32_t`.
    Some(unsafe { *address.cast::<u32>() })
}

#[test]
fn abi_version_recorded_by_every_library() {
    let expected = (abi::TVM_FFI_VERSION_MAJOR << 16) | abi::TVM_FFI_VERSION_MINOR;
    let libs = libraries();
    for lib in [
        &libs.c_example,
        &libs.cpp_example,
        &libs.layer_tests,
        &libs.multi_unit,
    ] {
        assert_eq!(abi_version_of(lib), Some(expected), "{}", lib.name);
        let records = lib
            .dynamic_symbols
            .iter()
            .filter(|s| *s == ABI_VERSION_SYMBOL)
            .count();
        assert_eq!(
            records, 1,
            "{} exports the record {records} times",
            lib.name
        );
    }
    // The four translation units (two C, two C++, all -fvisibility=hidden) link into one
    // library that exports the record (counted once above) and hides their own functions.
    let unit_exports: Vec<&String> = libs
        .multi_unit
        .dynamic_symbols
        .iter()
        .filter(|s| s.contains("unit_"))
        .collect();
    assert!(unit_exports.is_empty(), "not hidden: {unit_exports:?}");
}

#[test]
fn abi_version_record_can_be_left_out() {
    let lib = &libraries().no_record;
    assert_eq!(abi_version_of(lib), None);
    assert!(!lib.dynamic_symbols.iter().any(|s| s == ABI_VERSION_SYMBOL));
    // The library works without it.
    let a = Any::from("x");
    let joined = lib.call("concat", &views(&[&a, &a])).expect("concat");
    assert_eq!(string_of(&joined), "xx");
}
