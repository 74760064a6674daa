//! The C++ half of the ABI in `libtvm_ffi.so`, checked with real compilers and separate
//! processes that link the library (no Python in them). The C++ sources are in
//! `cpp-abi/tests/cxx_abi/`:
//!
//! * `layout.cc`: `ModuleObj` and `Error` have apache-tvm-ffi's layout (static_asserts; run).
//! * `module_host.cc` + `counter_module.cc` + `kernel.c`: a C++ subclass of `ModuleObj` in a
//!   library of its own, used through the runtime's `ffi.Module*` functions; the runtime's
//!   modules used through their C++ vtable; imports both ways, twice and in cycles; errors thrown
//!   by vtable slots.
//! * `apache_host.cc`: a host compiled against Apache TVM FFI's own headers, linked against our
//!   library, loading and calling a module and catching a `tvm::ffi::Error`.
//! * the exported symbols contain every symbol of apache-tvm-ffi's `libtvm_ffi.so` (but template
//!   instances of the standard library).
//!
//! The library under test is the one cargo builds with these tests (`cargo test -p
//! tvm-ffi-shared --test cxx_abi`). The last two need apache-tvm-ffi 0.1.15.post2 (installed with pip into a venv under
//! `target/`, or found at `$TVM_FFI_APACHE_PACKAGE`, the `tvm_ffi` package folder); without it
//! (offline) they say so and pass.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The repository root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sources() -> PathBuf {
    repo().join("cpp-abi/tests/cxx_abi")
}

fn our_include() -> PathBuf {
    repo().join("python/tvm/include")
}

/// The library cargo built for these tests: `target/<profile>/deps/libtvm_ffi_shared.so`, next to
/// this executable (cargo refreshes that copy for `cargo test`; the one in `target/<profile>/`
/// only for `cargo build`).
fn library_file() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable");
    let deps = exe.parent().expect("target/<profile>/deps");
    let file = deps.join("libtvm_ffi_shared.so");
    assert!(
        file.exists(),
        "cargo builds the library before its tests: {}",
        file.display()
    );
    file
}

/// A scratch folder holding `libtvm_ffi.so` (a link to the built library) and what the tests
/// build, one per test.
fn scratch(name: &str) -> PathBuf {
    let dir = repo()
        .join("target/tmp")
        .join(format!("cxx_abi-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    std::os::unix::fs::symlink(library_file(), dir.join("libtvm_ffi.so")).expect("a link");
    dir
}

/// Runs a command that must succeed; its output otherwise. The library path cargo sets for
/// tests is dropped, so the hosts find `libtvm_ffi.so` through their rpath alone (under
/// `cargo test --workspace` it also lists the build folder of the Python extension, which holds
/// a copy of the library).
fn run(command: &mut Command) -> String {
    let output = command
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("the command starts");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{command:?} failed:\n{text}");
    text
}

/// Compiles `sources` with `compiler` and `flags` into `out`.
fn compile(compiler: &str, sources: &[PathBuf], flags: &[&str], out: &Path) {
    // Sources first: the linker reads the libraries among the flags after the objects.
    run(Command::new(compiler)
        .args(sources)
        .args(flags)
        .arg("-o")
        .arg(out));
}

/// Links an executable against the library in `dir` (`-ltvm_ffi`, found there at run time).
fn link_flags(dir: &Path) -> Vec<String> {
    vec![
        format!("-L{}", dir.display()),
        "-ltvm_ffi".into(),
        format!("-Wl,-rpath,{}", dir.display()),
        "-ldl".into(),
    ]
}

/// Builds the module the hosts load.
fn build_kernel(dir: &Path) -> PathBuf {
    let kernel = dir.join("kernel.so");
    let include = format!("-I{}", our_include().display());
    compile(
        "gcc",
        &[sources().join("kernel.c")],
        &["-shared", "-fPIC", "-Wall", "-Werror", &include],
        &kernel,
    );
    kernel
}

#[test]
fn module_and_error_have_the_original_layout() {
    let dir = scratch("layout");
    let exe = dir.join("layout");
    let include = format!("-I{}", our_include().display());
    let mut flags = vec![
        "-std=c++17",
        "-Wall",
        "-Wextra",
        "-Werror",
        include.as_str(),
    ];
    let link = link_flags(&dir);
    flags.extend(link.iter().map(String::as_str));
    compile("g++", &[sources().join("layout.cc")], &flags, &exe);
    assert!(run(&mut Command::new(&exe)).contains("layout ok"));
}

#[test]
fn cxx_modules_and_runtime_modules_work_both_ways() {
    let dir = scratch("modules");
    let kernel = build_kernel(&dir);
    let include = format!("-I{}", our_include().display());
    let counter = dir.join("libcounter_module.so");
    compile(
        "g++",
        &[sources().join("counter_module.cc")],
        &[
            "-std=c++17",
            "-shared",
            "-fPIC",
            "-Wall",
            "-Wextra",
            "-Werror",
            &include,
        ],
        &counter,
    );
    let host = dir.join("module_host");
    let mut flags = vec![
        "-std=c++17",
        "-Wall",
        "-Wextra",
        "-Werror",
        include.as_str(),
    ];
    let link = link_flags(&dir);
    flags.extend(link.iter().map(String::as_str));
    compile("g++", &[sources().join("module_host.cc")], &flags, &host);
    let ldd = run(Command::new("ldd").arg(&host));
    assert!(!ldd.contains("libpython"), "no Python in the host:\n{ldd}");
    let output = run(Command::new(&host).arg(&kernel).arg(&counter));
    assert!(output.contains("module host ok"), "{output}");
}

/// The `tvm_ffi` package folder of apache-tvm-ffi 0.1.15.post2, or why there is none.
fn apache_package() -> Result<&'static Path, &'static str> {
    static PACKAGE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PACKAGE
        .get_or_init(|| {
            if let Some(dir) = std::env::var_os("TVM_FFI_APACHE_PACKAGE") {
                return Ok(PathBuf::from(dir));
            }
            let venv = repo().join("target/apache-tvm-ffi-venv");
            let python = venv.join("bin/python");
            let package = || {
                let out = Command::new(&python)
                    .args([
                        "-c",
                        "import importlib.util as u; \
                         print(u.find_spec('tvm_ffi').submodule_search_locations[0])",
                    ])
                    .output()
                    .ok()?;
                let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
                (out.status.success() && dir.join("lib/libtvm_ffi.so").exists()).then_some(dir)
            };
            if let Some(dir) = package() {
                return Ok(dir);
            }
            let made = Command::new("python3")
                .arg("-m")
                .arg("venv")
                .arg(&venv)
                .output();
            if !made.is_ok_and(|o| o.status.success()) {
                return Err("cannot make a venv for apache-tvm-ffi".into());
            }
            let installed = Command::new(venv.join("bin/pip"))
                .args(["install", "-q", "apache-tvm-ffi==0.1.15.post2"])
                .output();
            match installed {
                Ok(out) if out.status.success() => package()
                    .ok_or_else(|| "apache-tvm-ffi installed without lib/libtvm_ffi.so".into()),
                Ok(out) => Err(format!(
                    "pip install apache-tvm-ffi==0.1.15.post2 failed (offline?): {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )),
                Err(err) => Err(format!("cannot run pip: {err}")),
            }
        })
        .as_deref()
        .map_err(String::as_str)
}

/// The dynamic symbols a library defines, by mangled name, with their `nm` type letter.
fn defined_symbols(library: &Path) -> Vec<(char, String)> {
    run(Command::new("nm")
        .arg("-D")
        .arg("--defined-only")
        .arg(library))
    .lines()
    .filter_map(|line| {
        let mut parts = line.split_whitespace();
        let (_, kind, name) = (parts.next()?, parts.next()?, parts.next()?);
        Some((kind.chars().next()?, name.to_owned()))
    })
    .collect()
}

/// Whether a symbol of apache-tvm-ffi is one ours need not define: instances of the standard
/// library's templates (`std::...`), and GNU-unique function-local statics of inline functions
/// in apache-tvm-ffi's own sources (`u`: the loader merges them, no client links them).
fn exempt(kind: char, name: &str) -> bool {
    const STD: [&str; 8] = [
        "_ZNSt",
        "_ZNKSt",
        "_ZTISt",
        "_ZTSSt",
        "_ZTVSt",
        "_ZZNSt",
        "_ZGVZNSt",
        "_ZNSt8__detail",
    ];
    kind == 'u' || STD.iter().any(|prefix| name.starts_with(prefix))
}

#[test]
fn exports_contain_every_symbol_of_the_original() {
    let package = match apache_package() {
        Ok(dir) => dir,
        Err(reason) => {
            eprintln!("skipped: {reason}");
            return;
        }
    };
    let ours: BTreeSet<String> = defined_symbols(&library_file())
        .into_iter()
        .map(|(_, name)| name)
        .collect();
    let theirs = defined_symbols(&package.join("lib/libtvm_ffi.so"));
    let required: Vec<&String> = theirs
        .iter()
        .filter(|(kind, name)| !exempt(*kind, name))
        .map(|(_, name)| name)
        .collect();
    // 50 C functions, 24 C++ functions, vtable, typeinfo and name of two classes.
    assert!(
        required.len() >= 50 + 24 + 6,
        "apache-tvm-ffi's list: {required:?}"
    );
    let missing: Vec<&&String> = required
        .iter()
        .filter(|name| !ours.contains(**name))
        .collect();
    assert!(
        missing.is_empty(),
        "symbols of apache-tvm-ffi ours lacks: {missing:?}"
    );
}

#[test]
fn host_built_with_the_original_headers_runs_on_ours() {
    let package = match apache_package() {
        Ok(dir) => dir,
        Err(reason) => {
            eprintln!("skipped: {reason}");
            return;
        }
    };
    let dir = scratch("apache_host");
    let kernel = build_kernel(&dir);
    let host = dir.join("apache_host");
    let include = format!("-I{}", package.join("include").display());
    let mut flags = vec!["-std=c++17", "-Wall", include.as_str()];
    let link = link_flags(&dir);
    flags.extend(link.iter().map(String::as_str));
    compile("g++", &[sources().join("apache_host.cc")], &flags, &host);
    let ldd = run(Command::new("ldd").arg(&host));
    assert!(!ldd.contains("libpython"), "no Python in the host:\n{ldd}");
    assert!(
        ldd.contains(&dir.join("libtvm_ffi.so").display().to_string()),
        "{ldd}"
    );
    let output = run(Command::new(&host).arg(&kernel));
    assert!(output.contains("apache host ok"), "{output}");
}
