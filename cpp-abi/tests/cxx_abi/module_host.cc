// A C++ host (our headers, linked against libtvm_ffi.so, no Python) that checks modules both
// ways: the C++ subclass of counter_module.cc through the runtime's ffi.Module* functions, the
// runtime's modules through their C++ vtable, imports across the two kinds (twice, cycles), and
// errors thrown by a vtable slot.
// Usage: module_host <kernel.so> <libcounter_module.so>
#include <tvm/ffi/ffi.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace ffi = tvm::ffi;

#define REQUIRE(cond)                                                    \
  do {                                                                   \
    if (!(cond)) {                                                       \
      std::printf("FAILED at line %d: %s\n", __LINE__, #cond);           \
      std::exit(1);                                                      \
    }                                                                    \
  } while (0)

namespace {

ffi::Function Global(const char* name) { return ffi::Function::GetGlobalRequired(name); }

/*! \brief Runs `body`, which must throw an Error of `kind` whose message contains `text`. */
template <typename Body>
void RequireError(int line, const char* kind, const char* text, Body body) {
  try {
    body();
  } catch (const ffi::Error& err) {
    if (err.kind() == kind && err.message().find(text) != std::string_view::npos) return;
    std::printf("FAILED at line %d: got %s: %s\n", line, std::string(err.kind()).c_str(),
                err.what());
    std::exit(1);
  }
  std::printf("FAILED at line %d: nothing was thrown\n", line);
  std::exit(1);
}

int64_t NumImports(const ffi::Module& mod) {
  return Global("ffi.ModuleGetImports")(mod).cast<ffi::Array>().size();
}

}  // namespace

int main(int argc, char** argv) {
  REQUIRE(argc == 3);
  REQUIRE(dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL) != nullptr);
  ffi::Module cxx = Global("cxx_test.MakeCounterModule")().cast<ffi::Module>();
  ffi::Module native = ffi::Module::LoadFromFile(argv[1]);

  // The C++ module through the runtime's functions (its vtable, called by the runtime).
  REQUIRE(Global("ffi.ModuleGetKind")(cxx).cast<ffi::String>() == "cxx_counter");
  ffi::Function triple =
      Global("ffi.ModuleGetFunction")(cxx, "triple", false).cast<ffi::Function>();
  REQUIRE(triple(int64_t(5)).cast<int64_t>() == 15);
  REQUIRE(Global("ffi.ModuleGetFunction")(cxx, "nope", false).is_none());
  REQUIRE(Global("ffi.ModuleImplementsFunction")(cxx, "triple", false).cast<bool>());
  REQUIRE(Global("ffi.ModuleGetFunctionDoc")(cxx, "triple").cast<ffi::String>() == "Triples x.");
  REQUIRE(Global("ffi.ModuleGetFunctionMetadata")(cxx, "triple").is_none());
  REQUIRE(Global("ffi.ModuleGetPropertyMask")(cxx).cast<int64_t>() == 2);
  ffi::Array formats = Global("ffi.ModuleGetWriteFormats")(cxx).cast<ffi::Array>();
  REQUIRE(formats.size() == 1 && formats[0].cast<ffi::String>() == "txt");
  REQUIRE(Global("ffi.ModuleSaveToBytes")(cxx).cast<ffi::Bytes>() == "counter-bytes");

  // Slots that throw: the runtime reports their errors, kind and message kept.
  RequireError(__LINE__, "RuntimeError", "InspectSource threw for format asm",
               [&] { Global("ffi.ModuleInspectSource")(cxx, "asm"); });
  RequireError(__LINE__, "KeyError", "throwing_lookup fails on purpose",
               [&] { Global("ffi.ModuleGetFunction")(cxx, "throwing_lookup", false); });
  RequireError(__LINE__, "RuntimeError", "Module[cxx_counter] does not support WriteToFile",
               [&] { Global("ffi.ModuleWriteToFile")(cxx, "/tmp/x", "txt"); });

  // The runtime's module through its C++ vtable.
  REQUIRE(std::string(native->kind()) == "library");
  REQUIRE(native->ImplementsFunction("add_one"));
  REQUIRE(native->GetFunction("add_one").value()(int64_t(1)).cast<int64_t>() == 2);
  REQUIRE(!native->GetFunction("triple").has_value());
  RequireError(__LINE__, "ValueError", "fail was called",
               [&] { native->GetFunction("fail").value()(); });
  RequireError(__LINE__, "RuntimeError", "does not support SaveToBytes",
               [&] { native->SaveToBytes(); });

  // Imports across the kinds: a runtime module into the C++ one (through its vtable) ...
  Global("ffi.ModuleImportModule")(cxx, native);
  REQUIRE(NumImports(cxx) == 1);
  ffi::Function add_one =
      Global("ffi.ModuleGetFunction")(cxx, "add_one", true).cast<ffi::Function>();
  REQUIRE(add_one(int64_t(9)).cast<int64_t>() == 10);
  REQUIRE(cxx->GetFunction("add_one", true).has_value());
  RequireError(__LINE__, "RuntimeError", "Cyclic dependency",
               [&] { Global("ffi.ModuleImportModule")(native, cxx); });

  // ... and the C++ one into a runtime module, twice (allowed; the first is found).
  ffi::Module system = Global("ffi.SystemLib")("cxx_host.").cast<ffi::Module>();
  Global("ffi.ModuleImportModule")(system, cxx);
  system->ImportModule(cxx);
  REQUIRE(NumImports(system) == 2);
  REQUIRE(Global("ffi.ModuleGetFunction")(system, "triple", true)
              .cast<ffi::Function>()(int64_t(2))
              .cast<int64_t>() == 6);
  REQUIRE(system->GetFunction("triple", true).has_value());
  REQUIRE(system->GetFunction("add_one", true).has_value());
  REQUIRE(system->GetFunctionDoc("triple", true).value() == "Triples x.");
  RequireError(__LINE__, "RuntimeError", "Cyclic dependency", [&] { cxx->ImportModule(system); });
  RequireError(__LINE__, "RuntimeError", "Cyclic dependency",
               [&] { Global("ffi.ModuleImportModule")(cxx, system); });
  RequireError(__LINE__, "KeyError", "throwing_lookup fails on purpose",
               [&] { Global("ffi.ModuleGetFunction")(system, "throwing_lookup", true); });

  // Clearing, both kinds and both ways.
  cxx->ClearImports();
  REQUIRE(NumImports(cxx) == 0);
  Global("ffi.ModuleClearImports")(system);
  REQUIRE(NumImports(system) == 0);

  std::printf("module host ok\n");
  return 0;
}
