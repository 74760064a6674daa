//! Link settings of the `tvm._native` shared library.
//!
//! On Linux the library gets the SONAME `libtvm_ffi.so`: it is the one library of the process that
//! defines the `TVMFFI*` C API, so a kernel or backend linked with `-ltvm_ffi` (a NEEDED entry
//! `libtvm_ffi.so`) is satisfied by the copy that `tvm/base.py` has already loaded, whatever the
//! file is called inside the wheel. Other platforms get no extra arguments.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtvm_ffi.so");
    }
}
