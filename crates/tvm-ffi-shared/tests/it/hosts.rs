//! Building and running host programs that link `libtvm_ffi.so` (no Python in them), shared by
//! the test files of this crate.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Our headers.
pub fn our_include() -> PathBuf {
    repo().join("python/tvm/include")
}

/// The library cargo built for these tests: `target/<profile>/deps/libtvm_ffi_shared.so`, next to
/// this executable (cargo refreshes that copy for `cargo test`; the one in `target/<profile>/`
/// only for `cargo build`).
pub fn library_file() -> PathBuf {
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

/// A scratch folder holding `libtvm_ffi.so` (a link to the built library) and what a test
/// builds, one per test: `target/tmp/<suite>-<pid>-<name>`.
pub fn scratch(suite: &str, name: &str) -> PathBuf {
    let dir = repo()
        .join("target/tmp")
        .join(format!("{suite}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    std::os::unix::fs::symlink(library_file(), dir.join("libtvm_ffi.so")).expect("a link");
    dir
}

/// Runs a command that must succeed; its output otherwise. The library path cargo sets for
/// tests is dropped, so the hosts find `libtvm_ffi.so` through their rpath alone (under
/// `cargo test --workspace` it also lists the build folder of the Python extension, which holds
/// a copy of the library).
pub fn run(command: &mut Command) -> String {
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
pub fn compile(compiler: &str, sources: &[PathBuf], flags: &[&str], out: &Path) {
    // Sources first: the linker reads the libraries among the flags after the objects.
    run(Command::new(compiler)
        .args(sources)
        .args(flags)
        .arg("-o")
        .arg(out));
}

/// Links an executable against the library in `dir` (`-ltvm_ffi`, found there at run time).
pub fn link_flags(dir: &Path) -> Vec<String> {
    vec![
        format!("-L{}", dir.display()),
        "-ltvm_ffi".into(),
        format!("-Wl,-rpath,{}", dir.display()),
        "-ldl".into(),
    ]
}

/// Compiles `source` into the executable `dir/<name>`, linked against the library in `dir`, with
/// our headers and all warnings as errors; `flags` add the language standard and the like.
pub fn build_host(
    dir: &Path,
    compiler: &str,
    source: &Path,
    name: &str,
    flags: &[&str],
) -> PathBuf {
    let exe = dir.join(name);
    let include = format!("-I{}", our_include().display());
    let mut all = vec!["-Wall", "-Wextra", "-Werror", include.as_str()];
    all.extend_from_slice(flags);
    let link = link_flags(dir);
    all.extend(link.iter().map(String::as_str));
    compile(compiler, &[source.to_path_buf()], &all, &exe);
    exe
}
