//! Links `tvm._native` against the runtime library, `libtvm_ffi.so`, and puts that library where
//! the package ships it (`python/tvm/lib/`).
//!
//! The extension holds no state: everything it calls is in the runtime library, which it links
//! by SONAME and finds at run time through the rpath `$ORIGIN/lib`. The library comes from
//! `$TVM_FFI_LIBRARY` (a built `libtvm_ffi.so`) when set; otherwise this script builds the
//! `tvm-ffi-shared` crate with cargo, with the same profile, into a target directory of its own
//! (`target/libtvm_ffi`, or `$TVM_FFI_LIBRARY_TARGET_DIR`), which the workspace's cargo commands
//! and maturin builds all share. A separate target directory keeps the inner build off the outer
//! one's lock, and the library's build does not depend on PyO3's settings, so maturin's and
//! cargo's builds reuse it.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable naming a prebuilt runtime library to link and ship.
const LIBRARY_ENV: &str = "TVM_FFI_LIBRARY";

/// The environment variable naming the target directory of the library's build (a build from an
/// unpacked sdist shares the checkout's this way).
const TARGET_DIR_ENV: &str = "TVM_FFI_LIBRARY_TARGET_DIR";

/// Variables cargo sets for build scripts that would change or misdirect the inner build: the
/// outer build's flags and wrappers (clippy, coverage), and its target directory.
const OUTER_BUILD_VARIABLES: [&str; 6] = [
    "CARGO_ENCODED_RUSTFLAGS",
    "RUSTFLAGS",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed={LIBRARY_ENV}");
    println!("cargo:rerun-if-env-changed={TARGET_DIR_ENV}");
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest_dir.join("../..");
    let library = match env::var_os(LIBRARY_ENV) {
        Some(path) => {
            let path = PathBuf::from(path);
            if !path.is_file() {
                panic!("{LIBRARY_ENV}={} is not a file", path.display());
            }
            // A rebuilt library is copied again.
            println!("cargo:rerun-if-changed={}", path.display());
            path
        }
        None => build_library(&workspace),
    };

    // `-ltvm_ffi` needs the file under that name; its SONAME is what the extension records.
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    let link_dir = out_dir.join("lib");
    copy_if_changed(&library, &link_dir.join("libtvm_ffi.so"));
    copy_if_changed(&library, &workspace.join("python/tvm/lib/libtvm_ffi.so"));
    println!("cargo:rustc-link-search=native={}", link_dir.display());
    println!("cargo:rustc-link-lib=dylib=tvm_ffi");
    if env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-rpath,$ORIGIN/lib");
    }
}

/// Builds the `tvm-ffi-shared` crate with the outer build's profile; returns the library file.
fn build_library(workspace: &Path) -> PathBuf {
    for watched in ["crates", "Cargo.toml", "Cargo.lock", "python/tvm/include"] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }
    let profile = outer_profile();
    let target_dir = env::var_os(TARGET_DIR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target/libtvm_ffi"));
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace)
        .args(["build", "--locked", "-p", "tvm-ffi-shared", "--lib"])
        .args(["--profile", &profile])
        .arg("--target-dir")
        .arg(&target_dir);
    let target = env::var("TARGET").expect("set by cargo");
    let cross = env::var("HOST").ok().as_deref() != Some(target.as_str());
    if cross {
        command.args(["--target", &target]);
    }
    for variable in OUTER_BUILD_VARIABLES {
        command.env_remove(variable);
    }
    let status = command
        .status()
        .unwrap_or_else(|err| panic!("cannot run cargo to build libtvm_ffi.so: {err}"));
    if !status.success() {
        panic!("building libtvm_ffi.so (cargo build -p tvm-ffi-shared) failed: {status}");
    }
    let mut dir = target_dir;
    if cross {
        dir.push(&target);
    }
    dir.push(if profile == "dev" { "debug" } else { &profile });
    dir.join("libtvm_ffi_shared.so")
}

/// The cargo profile of the outer build, read from `OUT_DIR`
/// (`<target>/<profile dir>/build/<package>/out`, where the dev profile's dir is `debug`).
fn outer_profile() -> String {
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    let profile_dir = out_dir
        .ancestors()
        .nth(3)
        .and_then(Path::file_name)
        .and_then(|name| name.to_str())
        .expect("OUT_DIR has the layout <target>/<profile>/build/<package>/out");
    match profile_dir {
        "debug" => "dev".to_owned(),
        other => other.to_owned(),
    }
}

/// Copies `from` to `to` unless `to` already has the same bytes (a copy would change its time
/// and make the next build redo work for nothing).
fn copy_if_changed(from: &Path, to: &Path) {
    let bytes =
        std::fs::read(from).unwrap_or_else(|err| panic!("cannot read {}: {err}", from.display()));
    if std::fs::read(to).is_ok_and(|existing| existing == bytes) {
        return;
    }
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)
            .unwrap_or_else(|err| panic!("cannot create {}: {err}", parent.display()));
    }
    // Written beside and renamed, so a process that has the old file mapped keeps it intact.
    let partial = to.with_extension("so.partial");
    std::fs::write(&partial, &bytes)
        .and_then(|()| std::fs::rename(&partial, to))
        .unwrap_or_else(|err| panic!("cannot write {}: {err}", to.display()));
}
