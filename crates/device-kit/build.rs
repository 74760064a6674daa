//! The test support (`testing`) compiles the fake drivers with `cc`, for the target being built.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    println!("cargo:rustc-env=DEVICE_KIT_BUILD_TARGET={target}");
}
