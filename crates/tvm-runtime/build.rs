//! Executables that embed the runtime (the examples and test binaries) export the `TVMFFI*`
//! C functions, so that kernel libraries they load resolve the C API against them. The tests
//! also learn the target triple, to compile their C kernels with `cc`.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-examples=-Wl,--export-dynamic-symbol=TVMFFI*");
        println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic-symbol=TVMFFI*");
    }
    let target = std::env::var("TARGET").unwrap_or_default();
    println!("cargo:rustc-env=TVM_RUNTIME_BUILD_TARGET={target}");
}
