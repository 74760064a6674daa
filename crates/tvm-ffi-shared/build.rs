//! Sets the library's SONAME and the C++ symbols it exports.
//!
//! On Linux the file gets the SONAME `libtvm_ffi.so`, whatever cargo names it: programs and
//! libraries linked against it (Apache TVM's, kernels linked with `-ltvm_ffi`, our Python
//! extension) record that name and find the one copy of the runtime by it.
//!
//! The C++ half of the ABI is compiled by `tvm-ffi-capi` (its `cxx/` folder) and linked whole.
//! rustc exports only the `#[no_mangle]` Rust symbols of a cdylib; a version script adds the C++
//! symbols below (the linker merges it with rustc's own list: LLD does, the linker of Rust 1.90
//! and later on x86_64 Linux, hence the workspace's `rust-version`; GNU ld refuses two version
//! scripts with anonymous tags). Exactly these, by mangled name:
//! the inline functions the C++ code also instantiates (`tvm::ffi::Any::~Any()`, ...) stay
//! local, so they can never take the place of a C++ client's own definitions of the same names.

use std::fmt::Write as _;
use std::path::PathBuf;

/// The C++ symbols of apache-tvm-ffi 0.1.15's `libtvm_ffi.so`, and the two
/// out-of-line members our `ModuleObj` adds (subclasses built with our headers refer to them).
const CXX_EXPORTS: &[&str] = &[
    // tvm::ffi::Module::LoadFromFile(String const&), VisitContextSymbols(TypedFunction<...>)
    "_ZN3tvm3ffi6Module12LoadFromFileERKNS0_6StringE",
    "_ZN3tvm3ffi6Module19VisitContextSymbolsERKNS0_13TypedFunctionIFvNS0_6StringEPvEEE",
    // tvm::ffi::ModuleObj members
    "_ZN3tvm3ffi9ModuleObj11GetFunctionERKNS0_6StringEb",
    "_ZN3tvm3ffi9ModuleObj18ImplementsFunctionERKNS0_6StringEb",
    "_ZN3tvm3ffi9ModuleObj14GetFunctionDocERKNS0_6StringEb",
    "_ZN3tvm3ffi9ModuleObj19GetFunctionMetadataERKNS0_6StringEb",
    "_ZN3tvm3ffi9ModuleObj12ImportModuleERKNS0_6ModuleE",
    "_ZN3tvm3ffi9ModuleObj12ClearImportsEv",
    "_ZNK3tvm3ffi9ModuleObj11WriteToFileERKNS0_6StringES4_",
    "_ZNK3tvm3ffi9ModuleObj11SaveToBytesEv",
    // structural equality and hash, visit errors
    "_ZN3tvm3ffi15StructuralEqual5EqualERKNS0_3AnyES4_bb",
    "_ZN3tvm3ffi15StructuralEqual16GetFirstMismatchERKNS0_3AnyES4_bb",
    "_ZN3tvm3ffi14StructuralHash4HashERKNS0_3AnyEbb",
    "_ZN3tvm3ffi17VisitErrorContext15FindAccessPathsERKNS0_9ObjectRefERKS1_b",
    // JSON, JSON graphs, printing, copies, recursive comparison
    "_ZN3tvm3ffi4json5ParseERKNS0_6StringEPS2_",
    "_ZN3tvm3ffi4json9StringifyERKNS0_3AnyERKNS0_8OptionalIivEE",
    "_ZN3tvm3ffi11ToJSONGraphERKNS0_3AnyES3_",
    "_ZN3tvm3ffi13FromJSONGraphERKNS0_3AnyE",
    "_ZN3tvm3ffi9ReprPrintERKNS0_3AnyE",
    "_ZN3tvm3ffi8DeepCopyERKNS0_3AnyE",
    "_ZN3tvm3ffi13RecursiveHashERKNS0_3AnyE",
    "_ZN3tvm3ffi11RecursiveEqERKNS0_3AnyES3_",
    "_ZN3tvm3ffi11RecursiveLtERKNS0_3AnyES3_",
    "_ZN3tvm3ffi11RecursiveLeERKNS0_3AnyES3_",
    "_ZN3tvm3ffi11RecursiveGtERKNS0_3AnyES3_",
    "_ZN3tvm3ffi11RecursiveGeERKNS0_3AnyES3_",
    // vtable, typeinfo and typeinfo name of ModuleObj and Error
    "_ZTVN3tvm3ffi9ModuleObjE",
    "_ZTIN3tvm3ffi9ModuleObjE",
    "_ZTSN3tvm3ffi9ModuleObjE",
    "_ZTVN3tvm3ffi5ErrorE",
    "_ZTIN3tvm3ffi5ErrorE",
    "_ZTSN3tvm3ffi5ErrorE",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os != "linux" {
        return;
    }
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtvm_ffi.so");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let script = out.join("cxx_exports.map");
    let mut text = String::from("{\n  global:\n");
    for symbol in CXX_EXPORTS {
        let _ = writeln!(text, "    {symbol};");
    }
    text.push_str("};\n");
    std::fs::write(&script, text).expect("writing the version script");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        script.display()
    );
}
