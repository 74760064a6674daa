//! The fake drivers of the driver-API backends' tests, built from C into a directory of each
//! test's own over the host-memory GPU of `fake/gpu_fake.h` and the kernels library
//! `fake/kernels.c`, and descriptors of float tensors on them.

use std::ffi::{CString, c_char};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use tvm_ffi::Device;
use tvm_ffi::abi::{DLDataType, DLDevice, DLTensor, kDLFloat};

use crate::driver::DriverLibrary;

/// The directory of the shared fake sources (`gpu_fake.h`, `kernels.c`).
pub fn fake_sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fake")
}

/// Compiles C `source` into the shared library `out`, with `-I` to [`fake_sources`] and the
/// extra flags `defines`. Panics (failing the test) when the compiler fails.
pub fn compile_library(source: &Path, out: &Path, defines: &[String]) {
    let target = env!("DEVICE_KIT_BUILD_TARGET");
    let compiler = cc::Build::new()
        .target(target)
        .host(target)
        .opt_level(1)
        .cargo_metadata(false)
        .get_compiler();
    let status = compiler
        .to_command()
        .args(["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(fake_sources())
        .arg("-o")
        .arg(out)
        .args(defines)
        .arg(source)
        .args(["-ldl", "-lpthread"])
        .status()
        .expect("the C compiler runs");
    assert!(status.success(), "compiling {} failed", source.display());
}

/// A fake driver built for one test, with its kernels library next to it.
#[derive(Debug)]
pub struct FakeDriver {
    /// The fake vendor library.
    pub library: PathBuf,
    /// The directory of this build, for the test's own files.
    pub dir: PathBuf,
    /// The name of the fake's `long <name>(const char *what)` that counts what is not released.
    live_symbol: &'static str,
}

impl FakeDriver {
    /// Builds fake driver `source` as `library_name` in a fresh directory (tests run in
    /// parallel: a shared output path would let one test load a file another is still
    /// writing), with the kernels library baked in and `-D` switches `defines`
    /// (`FAKE_DEVICE_COUNT=0`, ...). `prefix` names the directory after the crate.
    pub fn build(
        prefix: &str,
        source: &Path,
        library_name: &str,
        live_symbol: &'static str,
        defines: &[&str],
    ) -> FakeDriver {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir()
            .join(format!("{prefix}-{}", std::process::id()))
            .join(NEXT.fetch_add(1, Ordering::Relaxed).to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let kernels = dir.join("libfake_kernels.so");
        compile_library(&fake_sources().join("kernels.c"), &kernels, &[]);
        let mut flags: Vec<String> = defines.iter().map(|d| format!("-D{d}")).collect();
        flags.push(format!("-DFAKE_KERNELS_LIBRARY=\"{}\"", kernels.display()));
        let library = dir.join(library_name);
        compile_library(source, &library, &flags);
        FakeDriver {
            library,
            dir,
            live_symbol,
        }
    }

    /// What the fake holds and has not released: "allocations", "host", "streams", "events",
    /// "modules" (and what the vendor's fake adds).
    pub fn live(&self, what: &str) -> i64 {
        let library = DriverLibrary::open(self.library.to_str().unwrap()).unwrap();
        // SAFETY: the fake's `long <live_symbol>(const char *)`.
        let live: unsafe extern "C" fn(*const c_char) -> i64 =
            unsafe { library.function(self.live_symbol).unwrap() };
        let what = CString::new(what).unwrap();
        // SAFETY: a NUL-terminated name.
        unsafe { live(what.as_ptr()) }
    }
}

/// A float32 descriptor of `data` on `device` (host data when the device is the CPU), compact
/// unless `strides` are given.
pub fn f32_tensor(
    data: *mut u8,
    device: Device,
    shape: &mut [i64],
    strides: Option<&mut [i64]>,
) -> DLTensor {
    DLTensor {
        data: data.cast(),
        device: DLDevice {
            device_type: device.device_type(),
            device_id: device.device_id(),
        },
        ndim: shape.len() as i32,
        dtype: DLDataType {
            code: kDLFloat,
            bits: 32,
            lanes: 1,
        },
        shape: shape.as_mut_ptr(),
        strides: strides.map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
        byte_offset: 0,
    }
}
