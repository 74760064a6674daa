//! Compiles the C side of the ABI tests (`c/*.c`) against `cpp-abi/include` only, and makes the
//! test executables export the runtime's `TVMFFI*` symbols.

use std::path::{Path, PathBuf};

fn c_sources(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "c" || ext == "h"))
        .collect();
    files.sort();
    files
}

fn rerun_if_changed_recursive(dir: &Path) {
    println!("cargo:rerun-if-changed={}", dir.display());
    for entry in std::fs::read_dir(dir).expect("readable include directory") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rerun_if_changed_recursive(&path);
        } else {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let include_dir = manifest_dir.join("../include");
    let c_dir = manifest_dir.join("c");

    let mut build = cc::Build::new();
    // The header directory is the only include path: the tests see the ABI exactly as a kernel
    // author does. (abi_tests.h sits next to the sources and is included with quotes.)
    // warnings(true) is -Wall, extra_warnings(true) is -Wextra, warnings_into_errors is -Werror.
    build
        .include(&include_dir)
        .std("c11")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true);
    let sources = c_sources(&c_dir);
    for path in &sources {
        println!("cargo:rerun-if-changed={}", path.display());
        if path.extension().is_some_and(|ext| ext == "c") {
            build.file(path);
        }
    }
    println!("cargo:rerun-if-changed={}", c_dir.display());
    rerun_if_changed_recursive(&include_dir);
    build.compile("tvm_ffi_abi_c_tests");

    // A program that embeds the runtime exports the C API so that libraries it loads later can
    // resolve it; the symbol test checks that every declared function is visible this way.
    match std::env::var("CARGO_CFG_TARGET_OS").as_deref() {
        Ok("macos") | Ok("ios") => {
            println!("cargo:rustc-link-arg-tests=-Wl,-exported_symbol,_TVMFFI*");
        }
        Ok("windows") => {}
        _ => println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic-symbol=TVMFFI*"),
    }
}
