//! Gives the library the SONAME `libtvm_ffi.so`, the name the C harness links against on both
//! sides (the benchmark copies it under that name).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtvm_ffi.so");
    }
}
