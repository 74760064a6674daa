// A C++ host compiled against Apache TVM FFI's headers and linked against our libtvm_ffi.so (no
// Python in the process): loads a compiled module, calls it through apache-tvm-ffi's C++ API
// (non-virtual and virtual ModuleObj members on a module our runtime made), catches the
// tvm::ffi::Error of a failing function, and uses the other exported C++ functions.
// Usage: apache_host <kernel.so>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/dataclass.h>
#include <tvm/ffi/extra/json.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/extra/structural_equal.h>
#include <tvm/ffi/extra/structural_hash.h>
#include <tvm/ffi/function.h>

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

int main(int argc, char** argv) {
  REQUIRE(argc == 2);
  ffi::Module mod = ffi::Module::LoadFromFile(argv[1]);

  // Non-virtual members (exported by the library) and virtual ones (the runtime's vtable).
  ffi::Optional<ffi::Function> add_one = mod->GetFunction("add_one", false);
  REQUIRE(add_one.has_value());
  REQUIRE((*add_one)(41).cast<int64_t>() == 42);
  REQUIRE(std::string(mod->kind()) == "library");
  REQUIRE(mod->ImplementsFunction("add_one"));
  REQUIRE(!mod->ImplementsFunction("no_such_function", true));
  REQUIRE(!mod->GetFunction("no_such_function").has_value());

  // A failing function: its error comes out as tvm::ffi::Error with kind and message.
  bool caught = false;
  try {
    (*mod->GetFunction("fail", false))();
  } catch (const ffi::Error& err) {
    caught = true;
    REQUIRE(err.kind() == "ValueError");
    REQUIRE(err.message() == "fail was called");
    REQUIRE(std::string(err.what()) == "fail was called");
  }
  REQUIRE(caught);

  // A virtual function the runtime's module does not support throws through the vtable.
  caught = false;
  try {
    mod->SaveToBytes();
  } catch (const ffi::Error& err) {
    caught = true;
    REQUIRE(err.kind() == "RuntimeError");
    REQUIRE(err.message().find("SaveToBytes") != std::string::npos);
  }
  REQUIRE(caught);

  // The other exported functions.
  ffi::Any a = ffi::String("hello");
  REQUIRE(ffi::StructuralEqual::Equal(a, ffi::Any(ffi::String("hello"))));
  REQUIRE(ffi::StructuralHash::Hash(a) == ffi::StructuralHash::Hash(ffi::String("hello")));
  ffi::Any parsed = ffi::json::Parse("[1, 2, 3]");
  REQUIRE(std::string(ffi::json::Stringify(parsed)) == "[1,2,3]");
  ffi::String error_msg;
  ffi::json::Parse("[1, 2", &error_msg);
  REQUIRE(!error_msg.empty());
  REQUIRE(std::string(ffi::ReprPrint(ffi::Any(int64_t(7)))) == "7");
  int visited = 0;
  ffi::Module::VisitContextSymbols([&](ffi::String, void*) { ++visited; });
  REQUIRE(visited >= 0);

  std::printf("apache host ok\n");
  return 0;
}
