//! Finds the exported `TVMFFI*` functions in this crate's sources and generates, for the C API
//! shim (`src/c_api_shim.rs`): the list of their names and addresses (`c_api_exports.rs`), and
//! on Linux x86_64 and aarch64 the shim library itself, built with the C compiler from
//! `shim/shim.S` and `shim/install.c` (cfg `tvm_ffi_shim` when it was built).
//!
//! Also compiles the C++ half of the ABI (`cxx/*.cc`: `ModuleObj`'s vtable and members,
//! `Module::LoadFromFile`, structural equality, JSON, ...) into a static library linked whole
//! into every final artifact that links this crate.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The exports of one source file: (module path, function name).
fn exports_of(path: &Path, module: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).expect("a readable source file");
    let mut exports = Vec::new();
    let mut after_no_mangle = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with("#[") {
            after_no_mangle |= line.contains("no_mangle");
            continue;
        }
        if after_no_mangle {
            let name = line
                .split("fn ")
                .nth(1)
                .and_then(|rest| rest.split('(').next())
                .expect("a function after #[no_mangle]");
            exports.push((module.to_owned(), name.trim().to_owned()));
        }
        after_no_mangle = false;
    }
    exports
}

/// Compiles `cxx/*.cc` against the headers of `python/tvm/include`, linked whole (`+whole-archive`)
/// so that the vtables, typeinfo and functions nothing in Rust refers to are kept.
fn build_cxx(manifest: &Path) {
    let cxx_dir = manifest.join("cxx");
    let include = manifest.join("../../python/tvm/include");
    println!("cargo:rerun-if-changed=cxx");
    println!(
        "cargo:rerun-if-changed={}",
        include.join("tvm/ffi").display()
    );
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&cxx_dir)
        .expect("the cxx folder")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "cc"))
        .collect();
    sources.sort();
    for source in &sources {
        println!("cargo:rerun-if-changed={}", source.display());
    }
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .include(&include)
        .include(&cxx_dir)
        .files(&sources)
        .warnings(true)
        .extra_warnings(true)
        .link_lib_modifier("+whole-archive")
        .compile("tvm_ffi_cxx");
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=shim");
    println!("cargo::rustc-check-cfg=cfg(tvm_ffi_shim)");
    build_cxx(&manifest);

    let mut exports = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(manifest.join("src"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    for file in &files {
        let stem = file.file_stem().unwrap().to_str().unwrap();
        if stem != "lib" {
            exports.extend(exports_of(file, &format!("crate::{stem}")));
        }
    }

    let mut rust = String::from("/// The exported C functions, in shim slot order.\n");
    let _ = writeln!(
        rust,
        "pub(crate) const C_API_NAMES: [&str; {}] = [",
        exports.len()
    );
    for (_, name) in &exports {
        let _ = writeln!(rust, "    {name:?},");
    }
    rust.push_str("];\n\n/// Their addresses, in the same order.\n");
    let _ = writeln!(
        rust,
        "pub(crate) fn c_api_addresses() -> [*const (); {}] {{\n    [",
        exports.len()
    );
    for (module, name) in &exports {
        let _ = writeln!(rust, "        {module}::{name} as *const (),");
    }
    rust.push_str("    ]\n}\n");
    std::fs::write(out.join("c_api_exports.rs"), rust).unwrap();

    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if target_os != "linux" || !matches!(target_arch.as_str(), "x86_64" | "aarch64") {
        return;
    }
    let mut stubs = String::new();
    for (slot, (_, name)) in exports.iter().enumerate() {
        let _ = writeln!(stubs, "STUB({name}, {slot})");
    }
    std::fs::write(out.join("c_api_stubs.inc"), stubs).unwrap();
    std::fs::write(
        out.join("c_api_count.h"),
        format!("#define TVM_FFI_SHIM_SLOTS {}\n", exports.len()),
    )
    .unwrap();
    let compiler = cc::Build::new().get_compiler();
    let library = out.join("libtvm_ffi_shim.so");
    let status = Command::new(compiler.path())
        .args([
            "-shared",
            "-fPIC",
            "-nostdlib",
            "-O2",
            "-Wl,-soname,libtvm_ffi.so",
        ])
        .arg(format!("-I{}", out.display()))
        .arg(manifest.join("shim/shim.S"))
        .arg(manifest.join("shim/install.c"))
        .arg("-o")
        .arg(&library)
        .status();
    match status {
        Ok(status) if status.success() => println!("cargo:rustc-cfg=tvm_ffi_shim"),
        other => println!(
            "cargo:warning=the C API shim was not built ({other:?}): an executable that embeds \
             the runtime must export its TVMFFI* symbols itself to load kernels"
        ),
    }
}
