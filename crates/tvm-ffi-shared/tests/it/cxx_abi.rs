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
//! tvm-ffi-shared cxx_abi`). The last two need apache-tvm-ffi 0.1.15.post2 (installed with pip
//! into a venv under `target/`, or found at `$TVM_FFI_APACHE_PACKAGE`, the `tvm_ffi` package folder); without it
//! (offline) they say so and pass.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::hosts::{
    build_host, compile, library_file, link_flags, our_include, repo, run, scratch,
};

fn sources() -> PathBuf {
    repo().join("cpp-abi/tests/cxx_abi")
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
    let dir = scratch("cxx_abi", "layout");
    let exe = build_host(
        &dir,
        "g++",
        &sources().join("layout.cc"),
        "layout",
        &["-std=c++17"],
    );
    assert!(run(&mut Command::new(&exe)).contains("layout ok"));
}

#[test]
fn cxx_modules_and_runtime_modules_work_both_ways() {
    let dir = scratch("cxx_abi", "modules");
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
    let source = sources().join("module_host.cc");
    let host = build_host(&dir, "g++", &source, "module_host", &["-std=c++17"]);
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
    let dir = scratch("cxx_abi", "apache_host");
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
