//! NVRTC (`libnvrtc`), opened at run time: CUDA C source to PTX, registered as the global
//! function `tvm.support.nvrtc_compile(code, options) -> bytes`.

use std::ffi::{CStr, CString, c_char, c_void};
use std::sync::OnceLock;

use device_kit::driver::DriverLibrary;
use device_kit::driver_table;
use tvm_ffi::{Array, Bytes, Error, ErrorKind, Function, Result};

/// The names NVRTC is looked up by, in order.
pub const NVRTC_CANDIDATES: [&str; 5] = [
    "libnvrtc.so",
    "libnvrtc.so.13",
    "libnvrtc.so.12",
    "libnvrtc.so.11.2",
    "libnvrtc.so.11.1",
];
/// The environment variable naming the NVRTC library to use instead.
pub const NVRTC_OVERRIDE_VAR: &str = "TVM_NVRTC_LIBRARY";

type Program = *mut c_void;

driver_table! {
    /// The NVRTC entry points used.
    pub struct NvrtcFunctions {
        required {
            create_program: "nvrtcCreateProgram" => fn(
                *mut Program, *const c_char, *const c_char, i32,
                *const *const c_char, *const *const c_char
            ) -> i32;
            compile_program: "nvrtcCompileProgram" => fn(Program, i32, *const *const c_char) -> i32;
            get_program_log_size: "nvrtcGetProgramLogSize" => fn(Program, *mut usize) -> i32;
            get_program_log: "nvrtcGetProgramLog" => fn(Program, *mut c_char) -> i32;
            get_ptx_size: "nvrtcGetPTXSize" => fn(Program, *mut usize) -> i32;
            get_ptx: "nvrtcGetPTX" => fn(Program, *mut c_char) -> i32;
            destroy_program: "nvrtcDestroyProgram" => fn(*mut Program) -> i32;
            get_error_string: "nvrtcGetErrorString" => fn(i32) -> *const c_char;
        }
        optional {}
    }
}

/// NVRTC, loaded.
#[derive(Debug)]
pub struct Nvrtc {
    _library: DriverLibrary,
    api: NvrtcFunctions,
}

/// Destroys a program when dropped.
struct ProgramGuard<'a> {
    api: &'a NvrtcFunctions,
    program: Program,
}

impl Drop for ProgramGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: a program created by nvrtcCreateProgram, destroyed once.
        unsafe { (self.api.destroy_program)(&mut self.program) };
    }
}

impl Nvrtc {
    /// Opens `$TVM_NVRTC_LIBRARY`, else the first of [`NVRTC_CANDIDATES`] that loads.
    pub fn open() -> std::result::Result<Nvrtc, String> {
        let library = DriverLibrary::open_first("NVRTC", NVRTC_OVERRIDE_VAR, &NVRTC_CANDIDATES)?;
        let api = NvrtcFunctions::load(&library)?;
        Ok(Nvrtc {
            _library: library,
            api,
        })
    }

    fn check(&self, rc: i32, what: &str) -> Result<()> {
        if rc == 0 {
            return Ok(());
        }
        // SAFETY: NVRTC returns a static NUL-terminated string for any result code.
        let text = unsafe { (self.api.get_error_string)(rc) };
        let text = if text.is_null() {
            "unknown NVRTC error".into()
        } else {
            // SAFETY: as above.
            unsafe { CStr::from_ptr(text) }.to_string_lossy()
        };
        Err(Error::new(
            ErrorKind::RuntimeError,
            format!("NVRTC: {what} failed: {text} ({rc})"),
        ))
    }

    /// Compiles CUDA C `code` to PTX with `options` (`--gpu-architecture=compute_90`, ...). A
    /// compile error carries NVRTC's log.
    pub fn compile(&self, code: &str, options: &[String]) -> Result<Vec<u8>> {
        let no_nul = |what: &str| {
            Error::new(
                ErrorKind::ValueError,
                format!("the {what} contains a NUL byte"),
            )
        };
        let source = CString::new(code).map_err(|_| no_nul("CUDA source"))?;
        let options = options
            .iter()
            .map(|o| CString::new(o.as_str()).map_err(|_| no_nul("option")))
            .collect::<Result<Vec<_>>>()?;
        let option_ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let mut program: Program = std::ptr::null_mut();
        // SAFETY: NUL-terminated source and name; no headers.
        let rc = unsafe {
            (self.api.create_program)(
                &mut program,
                source.as_ptr(),
                c"tvm_kernels.cu".as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        self.check(rc, "nvrtcCreateProgram")?;
        let guard = ProgramGuard {
            api: &self.api,
            program,
        };
        // SAFETY: a live program and `option_ptrs.len()` NUL-terminated options.
        let rc = unsafe {
            (self.api.compile_program)(
                guard.program,
                option_ptrs.len() as i32,
                option_ptrs.as_ptr(),
            )
        };
        if rc != 0 {
            let log = self.read(
                &guard,
                self.api.get_program_log_size,
                self.api.get_program_log,
            );
            let log = String::from_utf8_lossy(&log.unwrap_or_default()).into_owned();
            return Err(Error::new(
                ErrorKind::RuntimeError,
                format!("NVRTC compilation error:\n{}", log.trim_end_matches('\0')),
            ));
        }
        self.read(&guard, self.api.get_ptx_size, self.api.get_ptx)
    }

    /// A byte result of a program: its size, then its bytes.
    fn read(
        &self,
        guard: &ProgramGuard<'_>,
        size_of: unsafe extern "C" fn(Program, *mut usize) -> i32,
        read: unsafe extern "C" fn(Program, *mut c_char) -> i32,
    ) -> Result<Vec<u8>> {
        let mut size = 0;
        // SAFETY: a live program and an out-parameter.
        let rc = unsafe { size_of(guard.program, &mut size) };
        self.check(rc, "reading a size")?;
        let mut bytes = vec![0u8; size];
        // SAFETY: a buffer of the size NVRTC reported.
        let rc = unsafe { read(guard.program, bytes.as_mut_ptr().cast()) };
        self.check(rc, "reading a result")?;
        Ok(bytes)
    }
}

/// NVRTC of this process, opened on first use.
pub fn nvrtc() -> Result<&'static Nvrtc> {
    static NVRTC: OnceLock<std::result::Result<Nvrtc, String>> = OnceLock::new();
    NVRTC
        .get_or_init(Nvrtc::open)
        .as_ref()
        .map_err(|why| Error::new(ErrorKind::RuntimeError, why.clone()))
}

/// Registers `tvm.support.nvrtc_compile(code: str, options: list[str]) -> bytes` (PTX).
pub fn register_nvrtc_compile() {
    let name = "tvm.support.nvrtc_compile";
    let compile = Function::from_typed(name, |code: String, options: Array| {
        let options = options
            .iter()
            .map(|o| o.as_view().cast::<String>())
            .collect::<Result<Vec<_>>>()?;
        nvrtc()?.compile(&code, &options).map(Bytes::from)
    });
    let _ = compile.register_global(name, false);
}
