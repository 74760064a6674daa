// A C++ subclass of ModuleObj in a library of its own, built with our headers: what a C++
// backend (Apache TVM's library modules, Relax VM executables) looks like to our runtime. It
// registers `cxx_test.MakeCounterModule` when loaded.
#include <tvm/ffi/ffi.h>

namespace ffi = tvm::ffi;

namespace {

class CounterModule : public ffi::ModuleObj {
 public:
  const char* kind() const override { return "cxx_counter"; }
  int GetPropertyMask() const override { return kRunnable; }

  ffi::Optional<ffi::Function> GetFunction(const ffi::String& name) override {
    if (name == "triple") {
      return ffi::Function::FromTyped("triple", [](int64_t x) { return 3 * x; });
    }
    if (name == "throwing_lookup") {
      TVM_FFI_THROW(KeyError) << "looking up throwing_lookup fails on purpose";
    }
    return std::nullopt;
  }

  ffi::Optional<ffi::String> GetFunctionDoc(const ffi::String& name) override {
    if (name == "triple") return ffi::String("Triples x.");
    return std::nullopt;
  }

  ffi::Array GetWriteFormats() const override { return ffi::Array::Make(ffi::String("txt")); }

  ffi::Bytes SaveToBytes() const override { return ffi::Bytes("counter-bytes"); }

  ffi::String InspectSource(const ffi::String& format) const override {
    TVM_FFI_THROW(RuntimeError) << "InspectSource threw for format " << format;
  }
};

struct Register {
  Register() {
    ffi::Function::SetGlobal("cxx_test.MakeCounterModule",
                             ffi::Function::FromTyped("cxx_test.MakeCounterModule", [] {
                               return ffi::MakeModule<CounterModule>();
                             }));
  }
};

const Register register_at_load;

}  // namespace
