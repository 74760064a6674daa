//! The tests learn the target triple, to compile their C kernels with `cc`. (Executables that
//! embed the runtime need no linker flags: the core exports the C API to the libraries they load,
//! see `tvm-ffi-capi`'s `c_api_shim.rs`.)

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    println!("cargo:rustc-env=TVM_RUNTIME_BUILD_TARGET={target}");
}
